"""Unit tests of trainperf.judge.metrics: tolerance overrides, timing scale, pyproject reading."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainperf.errors import TrainperfError
from trainperf.judge.metrics import METRICS, tolerances_from_pyproject, with_tolerances
from trainperf.paths import REPO_ROOT


def test_defaults_without_overrides() -> None:
    assert with_tolerances({}) == METRICS


def test_override_applies_to_named_metric_only() -> None:
    metrics = with_tolerances({"step_time_s": 0.2, "peak_allocated_gib": "0.1"})
    assert metrics["step_time_s"].tolerance == 0.2
    assert metrics["peak_allocated_gib"].tolerance == 0.1
    assert metrics["tokens_per_s"].tolerance == METRICS["tokens_per_s"].tolerance
    assert metrics["peak_allocated_gib"].abs_tolerance == METRICS["peak_allocated_gib"].abs_tolerance


def test_unknown_metric_names_raise_and_are_named() -> None:
    with pytest.raises(TrainperfError) as info:
        with_tolerances({"step_time_s": 0.1, "stp_time": 0.1, "bogus_gib": 0.2})
    message = str(info.value)
    assert "bogus_gib" in message and "stp_time" in message
    assert "\n" not in message


@pytest.mark.parametrize("bad", [-0.1, 10.0, 25])
def test_out_of_range_tolerance_raises(bad: float) -> None:
    with pytest.raises(TrainperfError, match="step_time_s"):
        with_tolerances({"step_time_s": bad})


def test_timing_scale_only_for_timing_metrics() -> None:
    metrics = with_tolerances({"step_time_s": 0.05}, timing_scale=10.0)
    assert metrics["step_time_s"].tolerance == pytest.approx(0.5)
    assert metrics["energy_per_token_j"].tolerance == pytest.approx(
        10 * METRICS["energy_per_token_j"].tolerance
    )
    for name in ("peak_allocated_gib", "peak_reserved_gib", "device_mem_peak_gib", "host_peak_rss_gib"):
        assert not METRICS[name].timing
        assert metrics[name].tolerance == METRICS[name].tolerance


def test_tolerances_from_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.trainperf.tolerances]\nstep_time_s = 0.07\npeak_allocated_gib = 0.02\n'
    )
    assert tolerances_from_pyproject(tmp_path) == {"step_time_s": 0.07, "peak_allocated_gib": 0.02}


def test_tolerances_from_pyproject_absent(tmp_path: Path) -> None:
    assert tolerances_from_pyproject(tmp_path) == {}
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert tolerances_from_pyproject(tmp_path) == {}


def test_tolerances_from_invalid_pyproject_raise(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.trainperf.tolerances\nstep_time_s = = 0.1\n")
    with pytest.raises(TrainperfError) as info:
        tolerances_from_pyproject(tmp_path)
    assert "pyproject.toml" in str(info.value)
    assert "\n" not in str(info.value)


def test_shipped_pyproject_tolerances_are_valid() -> None:
    """The repository's own [tool.trainperf.tolerances] names only registered metrics."""
    overrides = tolerances_from_pyproject(REPO_ROOT)
    assert overrides, "expected a [tool.trainperf.tolerances] table in the repository's pyproject.toml"
    metrics = with_tolerances(overrides)
    for name, value in overrides.items():
        assert metrics[name].tolerance == pytest.approx(float(value))
