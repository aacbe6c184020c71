"""A nightly's GPU-minutes from recorded wall times (``trainperf cost``): every launch of a run
folder counted (confirmations, a diagnosis run, a cliff's probes), a baselines folder as one run per
case, k-GPU cases counted k times, the spread over more GPUs by the shard split, and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainperf.cli import main
from trainperf.fleet.cost import case_cost, cost_lines, nightly_cost
from trainperf.result import CaseResult
from trainperf.store.results import save_result


def result(case_id: str, walls: list[float], *, gpus: int = 1, **extra: object) -> CaseResult:
    family = case_id.split("-")[0]
    runs = [
        {"wall_s": wall, "purpose": "measurement" if i == 0 else "confirmation"}
        for i, wall in enumerate(walls)
    ]
    return CaseResult(case_id, {"family": family, "gpus": gpus}, "h100", "ok", runs=runs, **extra)  # type: ignore[arg-type]


CLIFF = {
    "probes": [
        {"value": 1, "outcome": "ok", "wall_s": 40.0},
        {"value": 257, "outcome": "skipped-by-estimate"},  # ruled out: no launch
        {"value": 65, "outcome": "oom", "wall_s": 30.0},
    ],
    "confirmation": [{"value": 64, "outcome": "ok", "wall_s": 50.0}],
}


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
    old_cliff = {"probes": [{"value": 1, "outcome": "ok"}, {"value": 2, "outcome": "oom"}]}
    refused = CaseResult("rl_verl-mb64", {"family": "rl_verl"}, "h100", "config_error")
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
