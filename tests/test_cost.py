"""A nightly's GPU-minutes from recorded wall times (``trainperf cost``): every launch of a run
folder counted (confirmations, a diagnosis run, a cliff's probes), a baselines folder as one run per
case, k-GPU cases counted k times, the spread over more GPUs by the shard split, and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainperf.case_record import CaseRecord
from trainperf.cli import main
from trainperf.cliff_record import CliffRecord, Probe
from trainperf.fleet.cost import case_cost, cost_lines, nightly_cost
from trainperf.fleet.fresh_runner import inputs_needed
from trainperf.result import CaseResult
from trainperf.run_record import RunRecord
from trainperf.store.results import save_result
from trainperf.workloads.protocol import CACHED_INPUTS, CachedInput


def result(case_id: str, walls: list[float], *, gpus: int = 1, **extra: object) -> CaseResult:
    family = case_id.split("-")[0]
    runs = [
        RunRecord(wall_s=wall, purpose="measurement" if i == 0 else "confirmation")
        for i, wall in enumerate(walls)
    ]
    return CaseResult(case_id, CaseRecord(family=family, gpus=gpus), "h100", "ok", runs=runs, **extra)  # type: ignore[arg-type]


CLIFF = CliffRecord(
    "batch_size",
    1,
    512,
    largest_fit=64,
    smallest_oom=65,
    probes=[
        Probe(1, True, "ok", wall_s=40.0),
        Probe(257, False, "skipped-by-estimate"),  # ruled out: no launch
        Probe(65, False, "oom", wall_s=30.0),
    ],
    confirmation=[Probe(64, True, "ok", wall_s=50.0)],
)


def test_a_run_folder_counts_every_launch_and_a_baseline_one_run() -> None:
    confirmed = case_cost(result("sft_hf-a", [60.0, 62.0, 70.0]), one_run=False)
    assert (confirmed.launches, confirmed.wall_s) == (3, 192.0)
    # A baseline's three runs were repeats of one measurement: a nightly makes one (the median).
    assert case_cost(result("sft_hf-a", [60.0, 62.0, 70.0]), one_run=True).wall_s == 62.0
    cliff = case_cost(result("sft_hf-c", [], cliff=CLIFF), one_run=False)
    assert (cliff.launches, cliff.wall_s) == (3, 120.0)
    two_gpus = case_cost(result("sft_hf-d", [100.0], gpus=2), one_run=False)
    assert two_gpus.gpu_s == 200.0


def test_gpu_minutes_by_family_and_the_spread_over_more_gpus() -> None:
    cases = [(result(f"rl_verl-{i}", [600.0]), False) for i in range(3)] + [
        (result("sft_hf-a", [300.0]), False),
        (result("sft_hf-b", [300.0]), False),
    ]
    cost = nightly_cost(cases, (1, 2))
    assert cost.by_family == {"rl_verl": 30.0, "sft_hf": 10.0} and cost.total_min == 40.0
    # Longest first onto the least-loaded GPU: 600+600 | 600+300+300.
    assert cost.makespan_min == {1: 40.0, 2: 20.0}
    assert (
        "  on 2 GPUs of one host, split as --perf-shard splits: 20.0 min wall (0.500 of one GPU)"
        in cost_lines(cost)
    )


def test_launches_without_a_wall_time_are_named_not_guessed() -> None:
    # Probes of a file written before their wall times were kept.
    old = {"axis": "batch_size", "low": 1, "high": 2, "largest_fit": 1, "smallest_oom": 2}
    old_cliff = CliffRecord.from_dict(
        {
            **old,
            "probes": [
                {"value": 1, "fits": True, "outcome": "ok"},
                {"value": 2, "fits": False, "outcome": "oom"},
            ],
        }
    )
    refused = CaseResult("rl_verl-mb64", CaseRecord(family="rl_verl"), "h100", "config_error")
    cost = nightly_cost([(result("sft_hf-c", [], cliff=old_cliff), True), (refused, True)], (1,))
    lines = cost_lines(cost)
    assert "  incomplete: sft_hf-c: 2 launch(es) recorded no wall time (not counted)" in lines
    assert not any("rl_verl-mb64" in line for line in lines)  # refused by pre-flight: launched nothing


def test_the_command_reads_run_and_baseline_folders_and_refuses_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "reports" / "20261124-010101-h100"
    save_result(run / "results" / "sft_hf-a.json", result("sft_hf-a", [120.0, 60.0]))
    baselines = tmp_path / "baselines" / "h100"
    save_result(baselines / "sft_hf-a.json", result("sft_hf-a", [60.0, 61.0, 62.0]))
    assert main(["cost", str(run)]) == 0
    assert capsys.readouterr().out.startswith("1 case(s), 2 launch(es): 3.0 GPU-minutes")
    assert main(["cost", str(baselines), "--json", "--gpus", "1"]) == 0
    assert '"gpu_minutes": 1.02' in capsys.readouterr().out
    assert main(["cost", str(tmp_path / "nothing")]) == 2
    assert "is neither a run folder" in capsys.readouterr().err
    assert main(["cost", str(run), "--gpus", "0"]) == 2
    assert "--gpus '0': give GPU counts such as 1,2,4" in capsys.readouterr().err


def _with_inputs(case_id: str, *records: dict[str, object]) -> CaseResult:
    runs = [RunRecord(wall_s=300.0, cached_inputs=CachedInput.read_all(list(records)))]
    return CaseResult(case_id, CaseRecord(family="sft_unsloth", gpus=1), "h200", "ok", runs=runs)


BIG = {"kind": "checkpoints", "key": "gpt_oss_120b-15b0", "bytes": 62_100_000_000, "build_s": 99.0}
BIG["hit"] = True
SMALL = {"kind": "checkpoints", "key": "qwen3_32b-9f1", "bytes": 19_000_000_000, "build_s": 63.1}
SMALL["hit"] = False


def test_a_fresh_runner_pays_each_cached_input_once_and_is_told_when_they_do_not_fit() -> None:
    from trainperf.fleet.fresh_runner import fresh_runner_cost, fresh_runner_lines, inputs_needed

    old = {"kind": "models", "key": "qwen2_5_3b-aa", "hit": True}  # written by an older trainperf
    results = [
        _with_inputs("sft_unsloth-gpt_oss_120b-short", BIG),
        _with_inputs("sft_unsloth-gpt_oss_120b-long", {**BIG, "build_s": None}),
        _with_inputs("sft_unsloth-qwen3_32b-short", SMALL, "not a record"),  # type: ignore[arg-type]
        _with_inputs("rl_verl-qwen2_5_3b", old),
    ]
    needs = inputs_needed(results)
    assert [need.name for need in needs] == [
        "checkpoints/gpt_oss_120b-15b0", "checkpoints/qwen3_32b-9f1", "models/qwen2_5_3b-aa",
    ]  # fmt: skip
    assert needs[0].case_ids == ("sft_unsloth-gpt_oss_120b-short", "sft_unsloth-gpt_oss_120b-long")
    assert needs[0].build_s == 99.0  # one run's record without a time does not hide another's
    cost = fresh_runner_cost(needs, {"checkpoints/qwen3_32b-9f1"}, free_b=50_000_000_000)
    lines = fresh_runner_lines(cost, "/cache")
    assert lines[0] == (
        "fresh runner: its first night writes 3 cached input(s), 81.1 GB, written in 2.7 GPU-min "
        "(1 without a recorded size or time) before the cases that use them"
    )
    assert "  models/qwen2_5_3b-aa: size not recorded, time not recorded, for rl_verl-qwen2_5_3b" in lines
    assert lines[-2].startswith("  this runner's cache (/cache) lacks 2 cached input(s), 62.1 GB")
    assert lines[-1].startswith("  they do not fit: 50.0 GB free there; point TRAINPERF_CACHE_DIR at")
    warm = fresh_runner_lines(fresh_runner_cost(needs, {n.name for n in needs}, None), "/cache")
    assert warm[-1] == "  this runner's cache (/cache) holds all of them"
    assert fresh_runner_lines(fresh_runner_cost([], set(), None), "/cache") == []


def test_cost_checks_the_cached_inputs_against_this_runners_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from trainperf.synth.cache import COMPLETE_MARKER

    folder = tmp_path / "baselines" / "h200"
    folder.mkdir(parents=True)
    save_result(folder / "a.json", _with_inputs("sft_unsloth-gpt_oss_120b-short", BIG))
    save_result(folder / "b.json", _with_inputs("sft_unsloth-qwen3_32b-short", SMALL))
    cache = tmp_path / "cache"
    (cache / "checkpoints" / "qwen3_32b-9f1").mkdir(parents=True)
    (cache / "checkpoints" / "qwen3_32b-9f1" / COMPLETE_MARKER).write_text("{}")
    monkeypatch.setenv("TRAINPERF_CACHE_DIR", str(cache))
    assert main(["cost", str(folder)]) == 0
    out = capsys.readouterr().out
    assert f"  this runner's cache ({cache}) lacks 1 cached input(s), 62.1 GB, written in 1.6 GPU-min" in out
    assert main(["cost", "--json", str(folder)]) == 0
    inputs = json.loads(capsys.readouterr().out)["fresh_runner"]["inputs"]
    assert [(i["name"], i["in_this_runners_cache"]) for i in inputs] == [
        ("checkpoints/gpt_oss_120b-15b0", False), ("checkpoints/qwen3_32b-9f1", True),
    ]  # fmt: skip


def test_a_runs_record_keeps_the_cached_inputs_its_child_reported(tmp_path: Path) -> None:
    """The child's list reaches the run's record (``runs``), where ``trainperf cost`` reads it."""
    from types import SimpleNamespace

    from trainperf.case import Outcome
    from trainperf.launch.guard import Watched
    from trainperf.launch.launcher import run_info
    from trainperf.workloads.protocol import CACHED_INPUTS, ChildSpec

    ctx = SimpleNamespace(folder=SimpleNamespace(root=tmp_path, relative=lambda p: p.name))
    launched = SimpleNamespace(
        exit=SimpleNamespace(returncode=0, wall_s=12.0, stderr_tail=""), devices=(), watched=Watched()
    )
    spec = ChildSpec(case={}, steps=4, out_dir=str(tmp_path / "r1"))
    child = {"timeline": {}, CACHED_INPUTS: [BIG]}
    info = run_info(
        ctx, tmp_path / "r1", spec, launched, child, Outcome.OK,  # type: ignore[arg-type]
        SimpleNamespace(path="python3"), "unsloth",  # type: ignore[arg-type]
    )  # fmt: skip
    assert info.cached_inputs == [CachedInput.from_dict(BIG)]
    assert info.to_dict()[CACHED_INPUTS] == [BIG | {"build_in_peak_rss": False}]
    assert CACHED_INPUTS not in run_info(
        ctx, tmp_path / "r1", spec, launched, {"timeline": {}}, Outcome.OK,  # type: ignore[arg-type]
        SimpleNamespace(path="python3"), "hf",  # type: ignore[arg-type]
    ).to_dict()  # fmt: skip


def test_a_night_on_a_fresh_runner_projects_each_write_on_the_first_case_that_makes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainperf.fleet.night import first_writes, load_baselines

    baselines = tmp_path / "baselines"
    for case_id in ("sft_unsloth-gpt_oss_120b-long", "sft_unsloth-gpt_oss_120b-short"):
        save_result(baselines / "h200" / f"{case_id}.json", _with_inputs(case_id, {**BIG, "hit": True}))
    monkeypatch.setenv("TRAINPERF_CACHE_DIR", str(tmp_path / "cache"))
    lines: list[str] = []
    tonight = ["sft_unsloth-gpt_oss_120b-short", "sft_unsloth-gpt_oss_120b-long", "sft_hf-no-baseline"]
    loaded = load_baselines(baselines, "h200", tonight)
    assert loaded["sft_hf-no-baseline"] is None
    assert first_writes(tonight, loaded, lines) == {"sft_unsloth-gpt_oss_120b-short": 99.0}
    assert lines == [
        (
            "trainperf: fresh runner: tonight's cases first write 1 cached input(s), 62.1 GB, written in 1.6 "
            f"GPU-min into {tmp_path / 'cache'} (counted in the night's projection)"
        )
    ]
    # Once the runner's cache holds it, the night is projected as its baselines say.
    entry = tmp_path / "cache" / "checkpoints" / BIG["key"]  # type: ignore[operator]
    entry.mkdir(parents=True)
    (entry / "trainperf-complete.json").write_text("{}")
    lines.clear()
    assert first_writes(tonight, loaded, lines) == {} and lines == []


def test_a_stored_list_with_an_entry_it_cannot_read_still_counts_its_readable_entries() -> None:
    """A hand-edited result: the list is kept aside whole (written back as it was), and the fresh
    runner's inputs are still read from it entry by entry."""
    stored = [BIG | {"build_in_peak_rss": False}, {"kind": 3}]
    run = RunRecord.from_dict({"wall_s": 300.0, CACHED_INPUTS: stored})
    assert run.cached_inputs is None and run.to_dict()[CACHED_INPUTS] == stored
    result = CaseResult("c", CaseRecord(family="sft_unsloth", gpus=1), "h200", "ok", runs=[run])
    assert [need.key for need in inputs_needed([result])] == ["gpt_oss_120b-15b0"]
