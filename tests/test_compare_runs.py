"""``trainperf compare RUN_A RUN_B``: run B judged case by case against run A
(trainperf.report.compare_runs)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from trainperf import cli
from trainperf.case_record import CaseRecord
from trainperf.config_record import EffectiveConfig
from trainperf.errors import TrainperfError
from trainperf.fingerprint_record import Fingerprint
from trainperf.judge.compare import Verdict
from trainperf.measure.hardware import load_classes
from trainperf.report.compare_runs import RunComparison, compare_runs, render
from trainperf.result import CaseResult, MetricValue
from trainperf.run_checks_record import RunContamination
from trainperf.run_record import RunRecord
from trainperf.store.results import save_result
from trainperf.studies.comparison_record import Comparison, EnvironmentChange

STEPS = [f"{step}:{100 + 7 * step}" for step in range(2, 32)]
BASE = [0.5 + 0.01 * (i % 5) for i in range(len(STEPS))]
FINGERPRINT = {
    "gpu_name": "NVIDIA H100 80GB HBM3",
    "driver": "580.159.04",
    "power_limit_w": 700.0,
    "torch": "2.11.0+cu130",
    "transformers": "5.17.0",
    "cpu_model": "AMD EPYC",
    "cpu_count": 16,
}
CLASSES = load_classes()


def result(
    case_id: str = "sft_hf-qwen3_8b-lora-short-b4",
    *,
    slowdown: float = 1.0,
    gpu_class: str = "h100",
    outcome: str = "ok",
    alloc: float = 16.4,
    **fingerprint: Any,
) -> CaseResult:
    """A measured case: 30 keyed steps (step k is the same batch in every run), each ``slowdown`` x BASE."""
    samples = [t * slowdown for t in BASE]
    metrics = {
        "step_time_s": MetricValue(
            sorted(samples)[len(samples) // 2], "s", samples=samples, keys=list(STEPS)
        ),
        "tokens_per_s": MetricValue(500.0 / slowdown, "tok/s"),
        "peak_allocated_gib": MetricValue(alloc, "GiB"),
    }
    return CaseResult(
        case_id=case_id,
        case=CaseRecord(id=case_id),
        gpu_class=gpu_class,
        outcome=outcome,
        metrics=metrics if outcome == "ok" else {"peak_allocated_gib": metrics["peak_allocated_gib"]},
        effective_config=EffectiveConfig(gradient_checkpointing=True, trainable_params=1000),
        fingerprint=Fingerprint.from_dict({**FINGERPRINT, **fingerprint}),
    )


def write_run(root: Path, name: str, *results: CaseResult) -> Path:
    run = root / name
    (run / "results").mkdir(parents=True, exist_ok=True)
    for r in results:
        save_result(run / "results" / f"{r.case_id}.json", r)
    return run


def compare(a: list[CaseResult], b: list[CaseResult], strict: bool = False) -> RunComparison:
    return compare_runs(a, b, classes=CLASSES, tolerances={}, strict=strict, label_a="a", label_b="b")


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["compare", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- the pure comparison ---------------------------------------------------------------------


def test_identical_runs_pass() -> None:
    cases = [result("c1"), result("c2")]
    comparison = compare(cases, [result("c1"), result("c2")])
    assert [c.verdict.verdict for c in comparison.cases] == [Verdict.PASS, Verdict.PASS]
    assert comparison.exit_status == 0
    assert comparison.environment == []
    assert "environment: no environment change" in render(comparison)


def test_every_step_ten_percent_slower_regresses() -> None:
    comparison = compare([result()], [result(slowdown=1.10)])
    (case,) = comparison.cases
    assert case.verdict.verdict is Verdict.REGRESSED and case.fails
    step = case.metric("step_time_s")
    assert step is not None and step.ratio == pytest.approx(1.10)
    assert step.note == "paired over 30 steps"
    assert comparison.exit_status == 1
    text = render(comparison)
    assert "+10.0%" in text
    assert "regressed - regressed: step_time_s +10.0%" in text


def test_environment_diff_lists_a_torch_change() -> None:
    comparison = compare([result()], [result(torch="2.12.0+cu130", driver="590.10")])
    assert ("torch", "2.11.0+cu130", "2.12.0+cu130") in comparison.environment
    text = render(comparison)
    assert "environment: driver 580.159.04 -> 590.10; torch 2.11.0+cu130 -> 2.12.0+cu130" in text
    # The environment is what is being compared: it does not fail a case, strict or not.
    assert compare([result()], [result(torch="2.12.0+cu130")], strict=True).exit_status == 0


def test_environment_diff_comes_from_the_first_common_case() -> None:
    comparison = compare(
        [result("c1"), result("c2")], [result("c2", torch="2.12.0"), result("c1", torch="2.13.0")]
    )
    assert comparison.environment_case == "c1"
    assert comparison.environment == [("torch", "2.11.0+cu130", "2.13.0")]


def test_different_classes_are_one_line_error() -> None:
    with pytest.raises(TrainperfError) as info:
        compare([result(gpu_class="h100")], [result(gpu_class="h200")])
    assert str(info.value) == "a is h100, b is h200: compare runs of one class"


def test_no_common_case_is_an_error() -> None:
    with pytest.raises(TrainperfError, match="no case in common"):
        compare([result("c1")], [result("c2")])


def test_cases_only_in_one_run_are_listed() -> None:
    comparison = compare([result("c1"), result("c2")], [result("c2"), result("c3"), result("c4")])
    assert [c.case_id for c in comparison.cases] == ["c2"]
    assert comparison.only_in_a == ["c1"] and comparison.only_in_b == ["c3", "c4"]
    text = render(comparison)
    assert "only in A: c1" in text and "only in B: c3, c4" in text


def test_oom_where_a_fit_is_an_outcome_change() -> None:
    comparison = compare([result()], [result(outcome="oom")])
    assert comparison.cases[0].verdict.verdict is Verdict.OUTCOME_CHANGED
    assert comparison.exit_status == 1


def test_config_change_fails() -> None:
    b = result()
    b.effective_config = dataclasses.replace(b.effective_config, gradient_checkpointing=False)
    comparison = compare([result()], [b])
    assert comparison.cases[0].verdict.verdict is Verdict.CONFIG_CHANGED
    assert comparison.exit_status == 1


def test_noisy_fails_only_with_strict() -> None:
    # +8% on the median, no per-step support: unkeyed samples that overlap widely.
    spread = [0.70, 0.85, 1.00, 1.15, 1.30, 0.92, 1.07]
    a, b = result(), result()
    a.metrics["step_time_s"] = MetricValue(1.0, "s", samples=spread)
    b.metrics["step_time_s"] = MetricValue(1.08, "s", samples=[v * 1.08 for v in spread])
    assert compare([a], [b]).cases[0].verdict.verdict is Verdict.NOISY
    assert compare([a], [b]).exit_status == 0
    assert compare([a], [b], strict=True).exit_status == 1


def test_cpu_timing_from_another_processor_is_not_gated() -> None:
    """The class's timing_comparable_only_on_same rule (cpu: cpu_model, cpu_count), as in the runner."""
    a = result(gpu_class="cpu")
    comparison = compare([a], [result(gpu_class="cpu", slowdown=2.0, cpu_model="Intel Xeon")])
    (case,) = comparison.cases
    assert case.verdict.verdict is Verdict.PASS
    assert (
        case.timing_note == "the baseline was measured on another host (cpu_model 'AMD EPYC' -> 'Intel Xeon')"
    )
    same_cpu = compare([a], [result(gpu_class="cpu", slowdown=2.0)])
    assert same_cpu.cases[0].verdict.verdict is Verdict.REGRESSED  # 10x widened tolerance: 50% < +100%


def test_planted_slowdown_is_noted() -> None:
    b = result(slowdown=2.0)
    b.planted_slowdown = 1.0
    text = render(compare([result()], [b]))
    assert "note: B was measured with a planted slowdown (+100% per step)" in text
    assert "note: A" not in text


def test_rendered_table_reference() -> None:
    a = [result("c1"), result("sft_hf-qwen3_8b-qlora-long-b4", alloc=15.9), result("gone")]
    b = [result("c1"), result("sft_hf-qwen3_8b-qlora-long-b4", slowdown=1.10, alloc=16.5, torch="2.12.0")]
    expected = """\
A: a
B: b
class: h100
environment: no environment change

case                           A step s  B step s  B/A step  95% interval      tok/s ratio  peak alloc A->B  verdict
-----------------------------  --------  --------  --------  ----------------  -----------  ---------------  ---------
c1                             0.520     0.520     +0.0%     -                 +0.0%        16.4 -> 16.4     pass
sft_hf-qwen3_8b-qlora-long-b4  0.520     0.572     +10.0%    [+10.0%, +10.0%]  -9.1%        15.9 -> 16.5     regressed
A/B step s: each side's median step; B/A step: the median of per-step ratios, each step of B over the same step of A (paired by step, so it can differ from the ratio of the two medians), with its 95% bootstrap interval (the runs resampled too where each side has several)

sft_hf-qwen3_8b-qlora-long-b4: regressed - regressed: step_time_s +10.0%, peak_allocated_gib +3.8%

only in A: gone

2 cases compared: 1 pass, 1 regressed; 1 failing"""
    assert render(compare(a, b)) == expected


def test_json_has_verdicts_and_environment() -> None:
    comparison = compare(
        [result("c1"), result("c2")], [result("c1"), result("c2", slowdown=1.10, torch="2.12")]
    )
    data = json.loads(json.dumps(comparison.to_dict()))
    verdicts = {c["case_id"]: c["verdict"] for c in data["cases"]}
    assert verdicts == {"c1": "pass", "c2": "regressed"}
    step = next(m for m in data["cases"][1]["metrics"] if m["metric"] == "step_time_s")
    assert step["ratio"] == pytest.approx(1.10) and step["p_value"] < 0.01
    assert step["interval"] == [pytest.approx(1.10), pytest.approx(1.10)]
    assert data["environment_changes"] == []  # taken from the first common case, c1
    assert data["exit_status"] == 1 and data["failed"] == ["c2"]


def test_a_comparison_reads_back_through_an_ab_records_comparison_key_for_key_in_order() -> None:
    """What an A/B study keeps of a comparison (``studies.comparison_record``) writes it as it was
    written here, every key in this writer's order: the study's record is compared key by key."""
    comparison = compare(
        [result("c1", torch="2.11"), result("c2")], [result("c1", torch="2.12"), result("c2", slowdown=1.10)]
    )
    written = json.loads(json.dumps(comparison.to_dict()))
    stored = Comparison.from_dict(written)
    assert stored is not None and stored.run_b == "b" and stored.cases is not None
    assert [case.case_id for case in stored.cases] == ["c1", "c2"]
    assert stored.environment_changes == (EnvironmentChange("torch", "2.11", "2.12"),)
    step = stored.cases[1].metric("step_time_s")
    assert step is not None and step.ratio == pytest.approx(1.10) and step.verdict == "regressed"
    assert json.dumps(stored.to_dict(), indent=1) == json.dumps(written, indent=1)


# -- the command -----------------------------------------------------------------------------


def test_cli_identical_runs_exit_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_run(tmp_path, "a", result("c1"), result("c2"))
    b = write_run(tmp_path, "b", result("c1"), result("c2"))
    code, out, err = run_cli(capsys, str(a), str(b))
    assert code == 0 and err == ""
    assert "environment: no environment change" in out
    assert "2 cases compared: 2 pass; nothing failing" in out


def test_cli_end_to_end_regression(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_run(tmp_path, "a", result("c1"), result("c2"), result("old"))
    b = write_run(
        tmp_path, "b", result("c1", torch="2.12.0+cu130"), result("c2", slowdown=1.10), result("new")
    )
    code, out, err = run_cli(capsys, str(a), str(b))
    assert code == 1 and err == ""
    assert f"A: {a}" in out and f"B: {b}" in out
    assert "environment: torch 2.11.0+cu130 -> 2.12.0+cu130" in out
    row = next(line for line in out.splitlines() if line.startswith("c2 "))
    assert "+10.0%" in row and row.endswith("regressed")
    assert "only in A: old" in out and "only in B: new" in out

    code, out, _ = run_cli(capsys, str(a), str(b), "--json")
    assert code == 1
    data = json.loads(out)
    assert {c["case_id"]: c["verdict"] for c in data["cases"]} == {"c1": "pass", "c2": "regressed"}
    assert data["environment_changes"] == [{"key": "torch", "a": "2.11.0+cu130", "b": "2.12.0+cu130"}]
    assert data["only_in_a"] == ["old"] and data["only_in_b"] == ["new"]


def test_cli_different_classes_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_run(tmp_path, "a", result(gpu_class="h100"))
    b = write_run(tmp_path, "b", result(gpu_class="h200"))
    code, out, err = run_cli(capsys, str(a), str(b))
    assert code == 2 and out == ""
    assert err == f"trainperf: error: {a} is h100, {b} is h200: compare runs of one class\n"


def test_cli_not_a_run_folder_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_run(tmp_path, "a", result())
    (tmp_path / "empty").mkdir()
    code, out, err = run_cli(capsys, str(a), str(tmp_path / "empty"))
    assert code == 2 and out == ""
    assert err.startswith("trainperf: error: ") and "is not a run folder" in err
    assert err.count("\n") == 1


def test_cli_no_common_case_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_run(tmp_path, "a", result("c1"))
    b = write_run(tmp_path, "b", result("c2"))
    code, out, err = run_cli(capsys, str(a), str(b))
    assert code == 2 and out == ""
    assert err == f"trainperf: error: {a} (1 cases) and {b} (1 cases) have no case in common\n"


def test_cli_empty_results_folder_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_run(tmp_path, "a", result())
    b = write_run(tmp_path, "b")
    code, _, err = run_cli(capsys, str(a), str(b))
    assert code == 2 and err == f"trainperf: error: {b} has no result files (results/ is empty)\n"


def test_a_contaminated_run_on_either_side_is_not_judged_on_its_timing() -> None:
    """A 2x slower B whose rounds (or A's) shared the host with a busy neighbour: contaminated, its
    timing shown, not gated, and nothing failing but under --strict; memory from the case's own
    allocator still gates. The same rule as a nightly run's (judge.contamination)."""
    import dataclasses

    busy = RunRecord(contamination=RunContamination(("host CPU: other processes used 1.6 of 2 cores",)))
    for side in ("a", "b"):
        a, b = result(), result(slowdown=2.0)
        if side == "a":
            a = dataclasses.replace(a, runs=[busy])
        else:
            b = dataclasses.replace(b, runs=[busy])
        case = compare([a], [b]).cases[0]
        assert case.verdict.verdict is Verdict.CONTAMINATED and not case.fails, side
        assert "host CPU: other processes used 1.6 of 2 cores" in case.timing_note
        step = case.metric("step_time_s")
        assert step is not None and not step.gated and step.ratio == pytest.approx(2.0)
        assert compare([a], [b], strict=True).cases[0].fails
    grown = compare([result()], [dataclasses.replace(result(alloc=20.0), runs=[busy])]).cases[0]
    assert grown.verdict.verdict is Verdict.REGRESSED and grown.fails  # the case's own memory stands


def test_a_step_that_idles_on_the_host_regresses_its_busy_share() -> None:
    """The busy and host-side shares of profiled steps gate like other figures: the device busy
    90% of a step before, 45% after (the host now bounds it), on one H100 host."""
    import dataclasses

    def profiled(busy: float) -> CaseResult:
        base = result()
        shares = {"busy_pct": MetricValue(busy, "%"), "host_side_pct": MetricValue(100 - busy - 2, "%")}
        return dataclasses.replace(base, metrics={**base.metrics, **shares})

    case = compare([profiled(90.0)], [profiled(45.0)]).cases[0]
    assert case.verdict.verdict is Verdict.REGRESSED and case.fails
    assert {m.metric for m in case.verdict.metrics if m.verdict is Verdict.REGRESSED} == {
        "busy_pct",
        "host_side_pct",
    }
    assert compare([profiled(90.0)], [profiled(89.0)]).cases[0].verdict.verdict is Verdict.PASS
