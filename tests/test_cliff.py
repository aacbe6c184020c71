"""The OOM-cliff search against a fake prober with a known cliff."""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import pytest

from trainperf.cliff_record import CliffRecord
from trainperf.errors import TrainperfError
from trainperf.plan.cliff import Probe, ProbeFailed, confirm_cliff, confirmed, find_cliff, verify_cliff


def prober(cliff: int, calls: list[int]) -> Callable[[int], Probe]:
    def probe(value: int) -> Probe:
        calls.append(value)
        return Probe(value, value <= cliff, "ok" if value <= cliff else "oom")

    return probe


@pytest.mark.parametrize("true_cliff", [1, 2, 3, 7, 8, 9, 33, 100, 255, 256, 511])
def test_finds_every_cliff_in_1_to_512_within_the_launch_bound(true_cliff: int) -> None:
    calls: list[int] = []
    cliff = find_cliff("batch_size", 1, 512, prober(true_cliff, calls))
    assert (cliff.largest_fit, cliff.smallest_oom) == (true_cliff, true_cliff + 1)
    assert len(calls) == len(set(calls)), "a value was launched twice"
    assert cliff.launched <= math.ceil(math.log2(512)) + 2  # the bound for 1..512


def test_everything_fits_means_a_cliff_above_the_range() -> None:
    cliff = find_cliff("batch_size", 1, 64, prober(10_000, []))
    assert cliff.largest_fit == 64 and cliff.smallest_oom is None
    assert "above the range" in cliff.describe()


def test_nothing_fits() -> None:
    cliff = find_cliff("batch_size", 4, 64, prober(2, []))
    assert cliff.largest_fit is None and cliff.smallest_oom == 4


def test_probes_the_estimate_rules_out_are_not_launched() -> None:
    calls: list[int] = []
    cliff = find_cliff(
        "batch_size",
        1,
        512,
        prober(20, calls),
        predicted_oom=lambda v: "estimate over memory" if v > 64 else None,
    )
    assert (cliff.largest_fit, cliff.smallest_oom) == (20, 21)
    assert all(v <= 64 for v in calls)
    skipped = [p for p in cliff.probes if p.outcome == "skipped-by-estimate"]
    assert cliff.launched == len(calls) and len(skipped) == len(cliff.probes) - len(calls)


def test_a_crashing_probe_stops_the_search() -> None:
    def probe(value: int) -> Probe:
        return Probe(value, False, "crash", "segfault") if value == 33 else Probe(value, True, "ok")

    with pytest.raises(ProbeFailed, match="batch_size=33: crash segfault"):
        find_cliff("batch_size", 1, 64, probe)


@pytest.mark.parametrize(
    ("axis", "low", "high", "says"),
    [
        ("batch_size", 8, 4, "^cliff range 8..4 on batch_size is empty: give 1 <= low <= high$"),
        ("batch_size", 0, 4, "^cliff range 0..4 on batch_size is empty: give 1 <= low <= high$"),
        (
            "layers",
            1,
            4,
            "^cliff axis 'layers' is not one of batch_size, max_seq_len, grad_accum, micro_batch_size$",
        ),
    ],
)
def test_bad_ranges_are_one_line_errors(axis: str, low: int, high: int, says: str) -> None:
    with pytest.raises(TrainperfError, match=says):
        find_cliff(axis, low, high, prober(3, []))


def test_confirmation_runs_at_both_edges() -> None:
    cliff = find_cliff("batch_size", 1, 512, prober(37, []))
    calls: list[int] = []
    checks = confirm_cliff(cliff, prober(37, calls))
    assert calls == [37, 38] and confirmed(cliff, checks)
    flaky = confirm_cliff(cliff, prober(36, []))  # the edge moved between the search and the check
    assert not confirmed(cliff, flaky)


def test_a_stored_cliff_that_has_not_moved_costs_two_launches() -> None:
    stored = find_cliff("batch_size", 1, 512, prober(37, [])).record([], False)
    calls: list[int] = []
    cliff, checks = verify_cliff(stored, prober(37, calls))
    assert calls == [37, 38] and cliff is not None and cliff.launched == 2
    assert (cliff.largest_fit, cliff.smallest_oom) == (37, 38) and confirmed(cliff, checks)


@pytest.mark.parametrize(("moved_to", "launched"), [(30, [37]), (45, [37, 38])])
def test_a_moved_cliff_fails_verification_and_hands_its_probes_to_the_search(
    moved_to: int, launched: list[int]
) -> None:
    stored = find_cliff("batch_size", 1, 512, prober(37, [])).record([], False)
    calls: list[int] = []
    cliff, checks = verify_cliff(stored, prober(moved_to, calls))
    assert cliff is None and calls == launched
    searched = find_cliff("batch_size", 1, 512, prober(moved_to, calls), known={p.value: p for p in checks})
    assert (searched.largest_fit, searched.smallest_oom) == (moved_to, moved_to + 1)
    assert len(calls) == len(set(calls)), "a verification probe was launched again by the search"


def test_verification_of_a_cliff_above_the_range_launches_only_the_top() -> None:
    stored = find_cliff("batch_size", 1, 64, prober(10_000, [])).record([], False)
    calls: list[int] = []
    cliff, _ = verify_cliff(stored, prober(10_000, calls))
    assert cliff is not None and calls == [64]


def test_a_stored_cliff_reads_back_as_it_was_written() -> None:
    cliff = find_cliff("batch_size", 1, 512, prober(37, []))
    record = cliff.record(confirm_cliff(cliff, prober(37, [])), True)
    record.verified = False
    assert CliffRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record
    # A file from before probes kept their wall time: 0 s, which the night's cost reads as unknown.
    old = {"axis": "batch_size", "low": 1, "high": 2, "largest_fit": 1, "smallest_oom": 2}
    read = CliffRecord.from_dict({**old, "probes": [{"value": 1, "fits": True, "outcome": "ok"}]})
    assert read is not None and read.probes == [Probe(1, True, "ok")] and read.verified is None
    assert "verified" not in read.to_dict() and CliffRecord.from_dict(None) is None
