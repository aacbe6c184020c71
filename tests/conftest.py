"""Self-tests of the harness: CPU only, fast. ``pytester`` drives throw-away catalogues end to end."""

from collections.abc import Iterator

import numpy  # noqa: F401
import pytest

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
