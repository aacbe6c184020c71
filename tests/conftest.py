"""Self-tests of the harness: CPU only, fast. ``pytester`` drives throw-away catalogues end to end."""

from collections.abc import Iterator

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _synthetic_cache_in_tmp(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Synthetic checkpoints go to one folder of this test session, never to ~/.cache."""
    monkeypatch.setenv("TRAINPERF_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "trainperf-cache"))
    yield
