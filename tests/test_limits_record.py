"""A result's limits and memory estimate (``trainperf.limits_record``, ``trainperf.memory_estimate``):
typed records, read from and written back to the JSON objects results and baselines store."""

from __future__ import annotations

import json

from trainperf.limits_record import CliffHeadroom, Limits
from trainperf.memory_estimate import GIB, MemoryEstimate
from trainperf.paths import REPO_ROOT
from trainperf.result import CaseResult


def test_a_missing_figure_is_stored_as_null_beside_why_and_the_others_only_where_known() -> None:
    limits = Limits(achieved_tflops=None, mfu=None, mfu_note="n/a: no steady-state throughput was measured")
    assert limits.to_dict() == {
        "achieved_tflops": None, "mfu": None, "mfu_note": "n/a: no steady-state throughput was measured",
    }  # fmt: skip
    limits.cliff_headroom = CliffHeadroom("batch_size", 4, 16, 4.0, "batch_size 4 of largest fitting 16")
    limits.kwh_per_mtok = 0.25
    assert Limits.from_dict(limits.to_dict()) == limits
    assert Limits.from_dict({}) is None and Limits.from_dict(None) is None


def test_an_estimate_keeps_its_total_in_gib_to_three_places() -> None:
    estimate = MemoryEstimate(1.5 * GIB, 0.25 * GIB, 2 * GIB, 4096, 3.754321 * GIB)
    assert estimate.to_dict()["total_gib"] == 3.754
    assert MemoryEstimate.from_dict(estimate.to_dict()) == estimate
    assert MemoryEstimate.from_dict({"total_gib": 3.0}) is None  # not an estimate: its terms are missing


def test_every_stored_baselines_limits_and_estimate_write_back_unchanged() -> None:
    files = [p for p in sorted((REPO_ROOT / "baselines").rglob("*.json")) if "published" not in p.parts]
    read = 0
    for path in files:
        data = json.loads(path.read_text())
        written = CaseResult.from_dict(data, origin=str(path)).to_dict()
        for key in ("limits", "estimate"):
            if data.get(key) is not None:
                assert written[key] == data[key], (path, key)
                read += 1
    assert read >= 40  # 22 limits and 22 estimates when written
