"""Self-tests of the harness: CPU only, fast. ``pytester`` drives throw-away catalogues end to end."""

import json
import os
from collections.abc import Iterator
from typing import Any

import numpy  # noqa: F401
import pytest
from fault_drill import STARTED, Row, kill_all, tagged_by

pytest_plugins = ["pytester"]
# Loaded before any test: a ``pytester`` test puts ``sys.modules`` back as it found it, dropping a
# module first imported during the test, and numpy's C core cannot be loaded twice in one process
# (a later test importing transformers then failed with "cannot load module more than once").


@pytest.fixture(autouse=True)
def _synthetic_cache_in_tmp(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Synthetic checkpoints go to one folder of this test session, never to ~/.cache."""
    monkeypatch.setenv("TRAINPERF_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "trainperf-cache"))
    yield


@pytest.fixture(autouse=True)
def _results_history_in_tmp(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's runs go to a results history of its own, never to the user's data folder."""
    monkeypatch.setenv("TRAINPERF_STORE", f"sqlite:///{tmp_path}/history.sqlite")
    monkeypatch.delenv("TRAINPERF_RUNNER", raising=False)


@pytest.fixture
def row(request: pytest.FixtureRequest) -> Iterator[Row]:
    """A fault-matrix row (``tests/test_fault_matrix*.py``): record its figures (fault, what the
    user saw, exit status, ...) for the published table."""
    figures: dict[str, Any] = {"row": request.node.name}

    def note(**values: Any) -> None:
        figures.update(values)

    failed_before = request.session.testsfailed
    yield note
    # Whatever the row found or where it failed, nothing of its runs stays on the machine (the row's
    # own figure was taken before, by settle).
    kill_all([pid for session in STARTED for pid in tagged_by(session)])
    # The call's report is counted before its fixtures are torn down: a red row is written as red.
    figures["row_passed"] = request.session.testsfailed == failed_before
    target = os.environ.get("TRAINPERF_FAULT_MATRIX")
    if target:
        with open(target, "a") as handle:
            handle.write(json.dumps(figures) + "\n")
