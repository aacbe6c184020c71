"""A case cut in its third run keeps the two that ended: the summary and the merge list it as
interrupted with them, and --perf-resume runs only the missing one (children replaced by a recorder)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trainperf.case import Case, Outcome
from trainperf.case_record import CaseRecord
from trainperf.fleet.merge import ShardRun, unjudged_cases
from trainperf.ground.folder import RunFolder
from trainperf.ground.settings import Shard, resolve
from trainperf.judge.metrics import STEP_TIME
from trainperf.launch import interruption
from trainperf.launch.launcher import ChildRun
from trainperf.measure.detection import Detection
from trainperf.measure.hardware import load_classes
from trainperf.measure.measurement import RunMeasurement
from trainperf.report.headline import headline
from trainperf.result import CaseResult
from trainperf.run import finished_runs
from trainperf.run.case_runner import CaseRunner
from trainperf.run.context import RunContext, open_run
from trainperf.run_record import RunRecord

CASE = Case(
    family="sft_hf", model="qwen3_tiny", method="lora", profile="short", batch_size=4, gpu_classes=("cpu",)
)


class Children:
    """Stands in for the launcher: run ``repeat`` ends well with steps of (1 + repeat/10) s, except
    those named in ``cut``, which raise KeyboardInterrupt as a Ctrl-C in the child's wait does."""

    def __init__(self, cut: tuple[int, ...] = ()) -> None:
        self.cut = cut
        self.started: list[tuple[int, int]] = []

    def run(self, case: Case, steps: int, *, repeat: int, total: int, **_kw: Any) -> ChildRun:
        self.started.append((repeat, steps))
        if repeat in self.cut:
            raise KeyboardInterrupt
        step_s = 1.0 + repeat / 10
        measurement = RunMeasurement({STEP_TIME: step_s}, [step_s] * 4, [100.0] * 4)
        info = RunRecord(dir=f"cases/{case.id}/r{repeat + 1}", steps=steps)
        return ChildRun(Outcome.OK, "", {}, measurement, info)


def _runner(tmp_path: Path, children: Children, **options: str) -> tuple[RunContext, CaseRunner]:
    cli = {"output": str(tmp_path / "reports"), "baselines": str(tmp_path / "baselines"), "repeats": "3"}
    settings = resolve({**cli, **options}, lambda _n: None, tmp_path)
    context = open_run(settings, Detection(load_classes()["cpu"], None, None, False), tmp_path)
    context.say = lambda _line: None
    runner = CaseRunner(context)
    runner.launcher = children  # type: ignore[assignment]
    return context, runner


def test_a_cut_case_keeps_its_finished_runs_and_a_resumed_run_adds_only_the_missing_one(
    tmp_path: Path,
) -> None:
    context, runner = _runner(tmp_path, Children(cut=(2,)), steps="12")
    with pytest.raises(KeyboardInterrupt):
        runner.run(CASE)
    folder = RunFolder(context.run_dir)
    assert not folder.has_result(CASE.id) and folder.finished_run_count(CASE.id) == 2
    cut = interruption.Interruption(CASE.id, f"{CASE.id} run 3/3", f"cases/{CASE.id}/r3", 5, 12)
    interruption.record(context.run_dir, cut)
    assert f"{CASE.id} keeps its 2 finished run(s) and goes on from them" in interruption.describe(
        context.run_dir, cut
    )

    resumed = Children()
    _, runner = _runner(tmp_path, resumed, steps="12", resume=str(context.run_dir))
    report = runner.run(CASE)
    assert resumed.started == [(2, 12)]  # the third run only, numbered after the kept two
    assert [run.dir for run in report.result.runs] == [f"cases/{CASE.id}/r{n}" for n in (1, 2, 3)]
    assert sorted(set(report.result.metrics[STEP_TIME].samples or [])) == [1.0, 1.1, 1.2]
    assert "resumed: 2 run(s) finished before the cut kept, the rest run now" in report.notes
    assert folder.has_result(CASE.id) and not folder.finished_runs_path(CASE.id).exists()
    assert interruption.pending(context.run_dir) is None


def test_kept_runs_of_another_step_count_are_run_again_and_said_so(tmp_path: Path) -> None:
    context, runner = _runner(tmp_path, Children(cut=(1,)), steps="12")
    with pytest.raises(KeyboardInterrupt):
        runner.run(CASE)
    again = Children()
    _, runner = _runner(tmp_path, again, steps="20", resume=str(context.run_dir))
    report = runner.run(CASE)
    assert again.started == [(0, 20), (1, 20), (2, 20)]
    assert "its kept runs ran 12 steps, this run asks 20; running them again" in report.notes


def test_an_unreadable_record_of_kept_runs_is_said_and_the_case_runs_whole(tmp_path: Path) -> None:
    context, runner = _runner(tmp_path, Children(cut=(1,)), steps="12")
    with pytest.raises(KeyboardInterrupt):
        runner.run(CASE)
    RunFolder(context.run_dir).finished_runs_path(CASE.id).write_text('{"steps": 12, "result": {')
    again = Children()
    _, runner = _runner(tmp_path, again, steps="12", resume=str(context.run_dir))
    report = runner.run(CASE)
    assert len(again.started) == 3 and any("are unreadable" in note for note in report.notes)


def test_the_merge_lists_a_cut_case_with_its_kept_runs_not_as_never_run(tmp_path: Path) -> None:
    folder = RunFolder(tmp_path / "shard-2")
    kept = CaseResult(
        case_id="cut", case=CaseRecord(), gpu_class="cpu", outcome="ok", runs=[RunRecord(), RunRecord()]
    )
    measurement = RunMeasurement({STEP_TIME: 1.0}, [1.0], [1.0])
    finished_runs.keep(folder, finished_runs.FinishedRuns(12, kept, [measurement, measurement]))
    split = {"cut": 2, "never": 1, "done": 1}
    shards = [
        ShardRun(
            tmp_path / "shard-1",
            Shard(1, 2),
            "cpu",
            "c",
            split,
            [],
            [CaseResult("done", CaseRecord(), "cpu", "ok")],
        ),
        ShardRun(folder.root, Shard(2, 2), "cpu", "c", split, [], []),
    ]
    cut = f"cut: interrupted in shard 2/2 with 2 finished run(s) kept; --perf-resume={folder.root}"
    assert [f"{case.case_id}: {case.why}" for case in unjudged_cases(shards)] == [
        f"{cut} goes on",
        "never: not run: shard 1/2 recorded no end (killed, or written by a trainperf that did "
        + "not record one)",
    ]


def test_the_merge_says_how_each_shard_ended_for_the_cases_it_did_not_reach(tmp_path: Path) -> None:
    """A time limit's SIGINT ends a shard's session with its end recorded (``RunContext.record_end``):
    its unreached cases read "interrupted after 500 s"; a shard that finished read "ended without"
    them; the case a shard was cut in reads interrupted even with no run kept."""
    split = {"a": 1, "b": 1, "c": 2, "d": 3}
    sessions = [{"started": "t", "ended": "t2", "elapsed_s": 500.2, "interrupted": True}]
    third = RunFolder(tmp_path / "shard-3")
    third.root.mkdir()
    interruption.record(third.root, interruption.Interruption("d", "d run 1/1", "cases/d/r1", 32, 40))
    shards = [
        ShardRun(tmp_path / "shard-1", Shard(1, 3), "cpu", "c", split, sessions, []),
        ShardRun(tmp_path / "shard-2", Shard(2, 3), "cpu", "c", split, [{"ended": "t", "elapsed_s": 9}], []),
        ShardRun(third.root, Shard(3, 3), "cpu", "c", split, [{"started": "t"}], []),
    ]
    found = unjudged_cases(shards)
    assert [(case.case_id, case.state, case.cause) for case in found] == [
        ("a", "not run", "in an interrupted shard"),
        ("b", "not run", "in an interrupted shard"),
        ("c", "not run", "in shards that ended without them"),
        ("d", "interrupted", "in an interrupted shard"),
    ]
    assert found[0].why == "not run: shard 1/3 was interrupted after 500 s, before it"
    assert found[2].why == "not run: shard 2/3 ended after 9 s without running it (deselected or skipped)"
    assert found[3].why.startswith("interrupted in shard 3/3 during d run 1/1 after 32/40 steps with no ")
    assert headline([], found) == (
        "4 case(s): 0 judged, 1 interrupted, 3 not run (2 in an interrupted shard, 1 in shards that ended "
        "without them)"
    )


def test_a_child_that_could_not_write_its_files_is_a_harness_fault_never_the_workloads_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainperf.errors import TrainperfError
    from trainperf.launch import process

    def full_disk(command: list[str], *, log_dir: Path, **_kw: Any) -> process.Exit:
        tail = "  File \"protocol.py\"\nOSError: [Errno 28] No space left on device: 'result.json'"
        return process.Exit(returncode=1, timed_out=False, wall_s=3.0, stderr_tail=tail)

    cli = {"output": str(tmp_path / "reports"), "baselines": str(tmp_path / "baselines"), "steps": "4"}
    settings = resolve(
        {**cli, "store": f"sqlite:///{tmp_path / 'history.sqlite'}"}, lambda _n: None, tmp_path
    )
    context = open_run(settings, Detection(load_classes()["cpu"], None, None, False), tmp_path)
    context.say = lambda _line: None
    monkeypatch.setattr("trainperf.launch.process.run_child", full_disk)
    with pytest.raises(TrainperfError, match="No space left on device") as raised:
        CaseRunner(context).run(CASE)
    assert f"--perf-resume={context.run_dir}" in str(raised.value)
    assert not RunFolder(context.run_dir).has_result(CASE.id)  # no `crash` result to judge or record
    assert context.history is not None and context.history.recorded == 0


def test_a_rebuilt_merged_page_counts_what_the_merge_found_unjudged(tmp_path: Path) -> None:
    """``trainperf report`` on a merged night reads the merge's record of the cases no shard judged:
    a rebuilt page leads with the same headline as the merge's, not with the judged cases alone."""
    import json

    from trainperf.report.terminal import run_folder_lines
    from trainperf.result import NOT_RUN, Unjudged

    never = Unjudged("b", NOT_RUN, "not run: shard 1/2 was interrupted after 500 s, before it", "in an x")
    (tmp_path / "run.json").write_text(
        json.dumps({"sessions": [], "merged": {"unjudged": [never.to_dict(), {"case_id": "junk"}]}})
    )
    lines, unjudged = run_folder_lines(tmp_path, [])
    assert unjudged == [never] and lines[-1] == f"b: {never.why}"
    assert headline([], unjudged) == "1 case(s): 0 judged, 1 not run (1 in an x)"


def test_a_sessions_selection_names_each_item_as_its_result_will_be_stored() -> None:
    """A cliff search's result is stored under its own id: recorded as the case's, the finished search
    read as a case never reached (seen on `make cpu`)."""
    from types import SimpleNamespace

    from trainperf.run.session import runnable_case_ids

    def item(params: dict[str, Any], skipped: bool = False) -> Any:
        return SimpleNamespace(
            callspec=SimpleNamespace(params=params), get_closest_marker=lambda name: skipped or None
        )

    items = [item({"case": CASE}), item({"case": CASE, "axis": "batch_size"}), item({"case": CASE}, True)]
    assert runnable_case_ids(items) == [CASE.id, f"{CASE.id}-cliff-batch_size"]


def test_a_case_skipped_at_the_start_is_on_the_page_with_why(tmp_path: Path) -> None:
    """Seen on a 4-GPU night: an 8-GPU case was skipped before any ran, and neither the headline, the
    summary nor the JUnit file named it. Each worker records it with why; the page counts it once."""
    import json

    from trainperf.report.junit import junit_xml
    from trainperf.report.terminal import run_folder_lines
    from trainperf.result import SKIPPED_AT_START

    why = "needs 8 GPUs; this session sees 4"
    sessions = [{"started": "1", "selected": ["a"], "unplaced": {"big": why}, "ended": "2"}]
    for worker in ("gw0", "gw1"):
        (tmp_path / f"run.{worker}.json").write_text(json.dumps({"sessions": sessions}))
    judged = CaseResult("a", CaseRecord(), "h200", "ok")
    lines, unjudged = run_folder_lines(tmp_path, [judged])
    assert [(case.case_id, case.state, case.why) for case in unjudged] == [("big", SKIPPED_AT_START, why)]
    assert f"skipped: big: {why}" in lines
    assert headline([judged], unjudged) == "2 case(s): 1 judged (1 ok), 1 skipped (1 needs 8 GPUs)"
    assert f'message="skipped: {why}"' in junit_xml([judged], "night", unjudged)
    ran = CaseResult("big", CaseRecord(), "h200", "ok")  # a later session on a larger host ran it
    assert run_folder_lines(tmp_path, [judged, ran])[1] == []


def test_the_merge_lists_a_case_its_shard_skipped_at_the_start_as_skipped_with_why(tmp_path: Path) -> None:
    """The issue's night: shard 3 skipped two 2-GPU cases on a 4-GPU host ("needs 2 GPUs; this session
    sees 1") and the merged report named neither."""
    why = "needs 2 GPUs; this session sees 1"
    split = {"wide": 2, "done": 1}
    shards = [
        ShardRun(
            tmp_path / "s1",
            Shard(1, 2),
            "h100",
            "c",
            split,
            [],
            [CaseResult("done", CaseRecord(), "h100", "ok")],
        ),
        ShardRun(
            tmp_path / "s2", Shard(2, 2), "h100", "c", split, [{"ended": "t", "unplaced": {"wide": why}}], []
        ),
    ]
    found = unjudged_cases(shards)
    assert [(case.case_id, case.state, case.why) for case in found] == [
        ("wide", "skipped", f"skipped in shard 2/2: {why}")
    ]
    assert headline([CaseResult("done", CaseRecord(), "h100", "ok")], found).endswith(
        "1 skipped (1 needs 2 GPUs)"
    )
