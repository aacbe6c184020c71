"""What moved inside kernel time, from the kernel summaries both sides recorded: groups and kernels
named where kernel time moved, with bounds where a kernel is outside a side's top list; said in the
verdict, an A/B row, a comparison and a bisection's result."""

from __future__ import annotations

from test_verdict_parts import BASELINE, judged, result

from trainperf.judge.compare import Verdict
from trainperf.judge.kernel_changes import kernel_changes, kernel_deltas
from trainperf.report.table import failure_detail
from trainperf.report.upgrades import Study, bisect_lines
from trainperf.result import KernelShare, KernelSummary
from trainperf.studies.bisect_record import BisectRecord

CAST = "void at::native::unrolled_elementwise_kernel<direct_copy_kernel_cuda, LoadWithCast<1>>"


def summary(groups: dict[str, float], top: list[tuple[str, str, float]]) -> KernelSummary:
    return KernelSummary(groups, [KernelShare(name, group, ms, 1.0) for name, group, ms in top], 1)


BEFORE = summary(
    {"GEMM": 600.0, "attention": 200.0, "dtype conversion": 10.0},
    [
        ("gemm_a", "GEMM", 400.0),
        ("gemm_b", "GEMM", 200.0),
        ("flash_fwd", "attention", 150.0),
        ("x", "other", 5.0),
    ],
)
AFTER = summary(
    {"GEMM": 601.0, "attention": 200.01, "dtype conversion": 212.3},
    [
        ("gemm_a", "GEMM", 401.0),
        ("gemm_b", "GEMM", 200.0),
        ("flash_fwd", "attention", 150.0),
        (CAST, "dtype conversion", 128.7),
    ],
)


def test_groups_that_moved_are_named_largest_first_and_a_new_kernel_is_counted_from_the_list_floor() -> None:
    line = kernel_changes(AFTER, BEFORE)
    assert line.startswith("dtype conversion +202.3 ms, GEMM +1.0 ms; kernels: ")  # attention moved 0.01
    # The cast kernel was below A's top list: at most 5.0 ms there (its smallest entry), so +123.7 at least.
    assert "(dtype conversion) +123.7 ms, new in the top 4" in line
    assert "gemm_a (GEMM) +1.0 ms" in line
    assert "x (other)" not in line  # left B's list below its smallest entry (128.7 ms): direction unknown
    assert kernel_changes(BEFORE, BEFORE) == "" and kernel_changes(AFTER, None) == ""


def test_a_kernel_that_left_the_top_list_is_bounded_by_the_lists_smallest_entry() -> None:
    before = summary({"GEMM": 10.0}, [("a", "GEMM", 8.0), ("b", "GEMM", 2.0)])
    after = summary({"GEMM": 7.0}, [("a", "GEMM", 6.0), ("c", "GEMM", 1.0)])
    moved = {kernel.name: round(delta, 3) for kernel, delta, _ in kernel_deltas(after, before)}
    # b: now at most 1.0 (B's smallest entry), so -1.0 at least; c: below A's smallest entry (2.0)
    # before and 1.0 now, which says neither growth nor shrinkage: not named.
    assert moved == {"a": -2.0, "b": -1.0}
    grown = summary({"GEMM": 12.0}, [("a", "GEMM", 8.0), ("c", "GEMM", 3.5)])
    assert [(k.name, round(d, 3), new) for k, d, new in kernel_deltas(grown, before)][-1] == ("c", 1.5, True)


def test_the_verdict_of_a_kernel_regression_says_what_moved_and_a_pass_does_not() -> None:
    slower = result(1.0, 202.0, gemm_ms=62.0)
    verdict = judged(slower, BASELINE)
    assert verdict.verdict is Verdict.REGRESSED and verdict.kernels == "GEMM +2.0 ms"
    assert judged(result(1.0, 200.5, gemm_ms=60.5), BASELINE).kernels == ""
    slower.verdict = verdict.stored()
    assert "    what moved: GEMM +2.0 ms" in failure_detail(slower)


def test_a_bisections_result_says_what_moved_at_the_release_it_found() -> None:
    stored = {
        "package": "trl",
        "range": ["1.6.0", "1.7.0"],
        "good": "1.6.0",
        "bad": "1.7.0",
        "rounds": 1,
        "versions": ["1.6.0", "1.6.1", "1.7.0"],
        "first_bad": "1.7.0",
        "steps": [
            {"version": "1.6.1", "bad": False, "verdict": "x pass", "kernels": ""},
            {
                "version": "1.7.0",
                "bad": True,
                "verdict": "x regressed",
                "kernels": "x: dtype conversion +202.3 ms",
            },
        ],
    }
    record = BisectRecord.from_dict(stored)
    assert record is not None
    lines = bisect_lines(Study("trl-bisect", record))
    assert "What moved at trl 1.7.0: x: dtype conversion +202.3 ms" in lines


def test_a_verl_change_is_said_by_process_part_first_where_both_sides_have_the_parts() -> None:
    """verl's kernels run in its rollout engine and its training worker: which of them moved comes
    first; a side without the parts (a child's own kernels) says groups and kernels only."""
    before = KernelSummary({"GEMM": 1_100.0}, [], 1, roles_ms={"rollout": 877.5, "training": 10_851.3})
    after = KernelSummary({"GEMM": 1_210.0}, [], 1, roles_ms={"rollout": 877.5, "training": 10_961.3})
    assert kernel_changes(after, before) == "in training +110.0 ms; GEMM +110.0 ms"
    plain = KernelSummary({"GEMM": 1_210.0}, [], 1)
    assert kernel_changes(plain, before) == "GEMM +110.0 ms"
