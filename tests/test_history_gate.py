"""A case judged against its runner's history (``--perf-baseline``), through the case runner."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from store_data import make_result

from trainperf.case import Case
from trainperf.ground.settings import resolve
from trainperf.judge.compare import Verdict
from trainperf.measure.detection import Detection
from trainperf.measure.hardware import load_classes
from trainperf.result import CaseResult
from trainperf.run.case_runner import CaseRunner
from trainperf.run.context import RunContext, open_run
from trainperf.store.results import save_result

CASE = Case(
    family="sft_hf", model="qwen3_tiny", method="lora", profile="short", batch_size=4, gpu_classes=("cpu",)
)


def _context(tmp_path: Path, learns: bool = False, **options: Any) -> RunContext:
    """A cpu run; ``learns``: as if the class narrowed timing tolerances from history (a GPU class
    does; the shipped cpu class does not)."""
    cli = {"output": str(tmp_path / "reports"), "baselines": str(tmp_path / "baselines"), **options}
    gpu_class = dataclasses.replace(load_classes()["cpu"], learns_timing_tolerances=learns)
    context = open_run(
        resolve(cli, lambda _n: None, tmp_path), Detection(gpu_class, None, None, False), tmp_path
    )
    context.say = lambda _line: None
    return context


def _result(context: RunContext, step_s: float, created: str, seed: int) -> CaseResult:
    result = make_result(CASE.id, created, step_s, fingerprint=context.fingerprint, seed=seed, steps=16)
    result.gpu_class = "cpu"
    return result


def _fill_history(context: RunContext, runs: int) -> None:
    assert context.history is not None
    for night in range(runs):
        context.history.record(
            _result(context, 1.0, f"2026-11-{night + 1:02d}T02:00:00+00:00", seed=night), None
        )


def test_ten_quiet_runs_catch_a_two_percent_slowdown_that_the_class_tolerance_passes(tmp_path: Path) -> None:
    context = _context(tmp_path, learns=True)
    _fill_history(context, 10)
    runner = CaseRunner(context)
    baseline, judged_against = runner.baseline_of(CASE.id)
    assert baseline is not None and judged_against.startswith("the last 10 accepted runs on runner ")
    assert "step_time_s tolerance 90.0% -> " in judged_against  # the cpu class's widened 90%, narrowed
    slow = runner.judge(CASE, _result(context, 1.02, "2026-11-20T02:00:00+00:00", seed=99), baseline)
    same = runner.judge(CASE, _result(context, 1.0, "2026-11-20T02:00:00+00:00", seed=98), baseline)
    assert slow.verdict is Verdict.REGRESSED and same.verdict is Verdict.PASS


def test_the_cpu_class_judges_its_history_at_its_configured_tolerance(tmp_path: Path) -> None:
    context = _context(tmp_path, learns=load_classes()["cpu"].learns_timing_tolerances)
    _fill_history(context, 10)
    runner = CaseRunner(context)
    baseline, judged_against = runner.baseline_of(CASE.id)
    assert baseline is not None and judged_against.endswith("; timing tolerances as configured for cpu")
    # A 12% slower stretch of a shared host passes; a gross slowdown still fails.
    for slower, verdict in ((1.12, Verdict.PASS), (3.0, Verdict.REGRESSED)):
        judged = runner.judge(CASE, _result(context, slower, "2026-11-20T02:00:00+00:00", seed=97), baseline)
        assert judged.verdict is verdict, (slower, judged.reason)


def test_auto_takes_the_file_until_the_runner_has_enough_runs(tmp_path: Path) -> None:
    context = _context(tmp_path)
    on_file = _result(context, 1.0, "2026-10-01T02:00:00+00:00", seed=1)
    on_file.source = "a run of 2026-10-01"
    save_result(tmp_path / "baselines" / "cpu" / f"{CASE.id}.json", on_file)
    _fill_history(context, 3)
    baseline, judged_against = CaseRunner(context).baseline_of(CASE.id)
    assert baseline is not None and baseline.source == "a run of 2026-10-01"
    assert "has 3 accepted runs on runner" in judged_against and "needs 10" in judged_against
    history_now = _context(tmp_path, baseline="history")
    baseline, judged_against = CaseRunner(history_now).baseline_of(CASE.id)
    assert judged_against.startswith("the last 3 accepted runs")


def test_file_mode_never_reads_the_history(tmp_path: Path) -> None:
    context = _context(tmp_path, baseline="file")
    _fill_history(context, 10)
    baseline, judged_against = CaseRunner(context).baseline_of(CASE.id)
    assert baseline is None and judged_against == "no baseline"


def test_a_store_out_of_reach_leaves_the_run_on_its_files_with_one_line(tmp_path: Path) -> None:
    # (A URL that does not parse, or names another database, is refused at start:
    # tests/test_unit_settings.py::test_values_refused_at_start_say_what_is_valid.)
    context = _context(tmp_path, store="postgresql://nobody@127.0.0.1:9/trainperf")
    assert context.history is not None and context.history.store is None
    (line,) = context.history.lines
    assert "trainperf ingest" in line and "\n" not in line
    baseline, judged_against = CaseRunner(context).baseline_of(CASE.id)
    assert baseline is None and "history not read" in judged_against


def test_store_off_records_nothing_and_says_nothing(tmp_path: Path) -> None:
    context = _context(tmp_path, store="off")
    assert context.history is not None and context.history.store is None and not context.history.lines


def test_a_family_s_own_tolerances_reach_its_verdict_and_pyproject_s_stand(tmp_path: Path) -> None:
    """The case runner judges a case at its family's tolerances (scaled like the class's: the cpu
    class widens timing 30x), narrowed where its runner's history is quieter; a tolerance set in
    pyproject.toml stands."""
    context = _context(tmp_path)
    _fill_history(context, 10)
    verl = dataclasses.replace(CASE, family="rl_verl")
    slower = _result(context, 2.5, "2026-11-20T02:00:00+00:00", seed=99)
    for case, verdict in ((CASE, Verdict.REGRESSED), (verl, Verdict.PASS)):
        runner = CaseRunner(context)
        baseline, _ = runner.baseline_of(CASE.id, family=case.family)  # one history, two families
        assert runner.judge(case, slower, baseline).verdict is verdict, case.family
    learning = CaseRunner(_context(tmp_path, learns=True))
    baseline, judged_against = learning.baseline_of(CASE.id, family=verl.family)
    assert "step_time_s tolerance 750.0% -> " in judged_against
    (tmp_path / "pyproject.toml").write_text("[tool.trainperf.tolerances]\nstep_time_s = 0.01\n")
    configured = CaseRunner(_context(tmp_path))
    baseline, _ = configured.baseline_of(CASE.id, family=verl.family)
    assert configured.judge(verl, slower, baseline).verdict is Verdict.REGRESSED
