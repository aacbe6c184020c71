"""A night's GPU time measured against what its plan projected: said under the headline of the page,
the summary and the terminal, so that a night cut short shows how far its plan held."""

from __future__ import annotations

from pathlib import Path

from trainperf.case import gpus_of_case_id
from trainperf.ground.folder import RunFolder
from trainperf.report.build import write_reports
from trainperf.report.gpu_time import gpu_time, gpu_time_line
from trainperf.result import CaseResult
from trainperf.run_record import RunRecord
from trainperf.stored_verdict import StoredVerdict


def _shard(index: int) -> dict[str, object]:
    """A shard's session record as ``fleet.session_plan`` writes it: every case's [shard, s, source]."""
    split = {
        "sft_hf-qwen3_8b-lora-short-b4": [1, 120.0, "baseline"],
        "sft_hf-qwen3_8b-lora-long-b4-gpus2": [2, 300.0, "history"],
        "rl_trl-qwen2_5_3b-full-fixed-b16-p128-c64-g8": [3, 60.0, "default"],
    }
    return {
        "started": "2026-11-28T01:00:00+00:00",
        "settings": {"fleet": {"shard": f"{index}/3", "split": split}},
    }


def _ran(case_id: str, *walls: float) -> CaseResult:
    runs = [RunRecord(wall_s=wall) for wall in walls]
    return CaseResult(case_id, {}, "h100", "ok", runs=runs, verdict=StoredVerdict(verdict="pass"))


RESULTS = [
    _ran("sft_hf-qwen3_8b-lora-short-b4", 70.0, 80.0),
    _ran("sft_hf-qwen3_8b-lora-long-b4-gpus2", 240.0),
]


def test_a_case_takes_the_gpus_its_id_names() -> None:
    assert gpus_of_case_id("sft_hf-qwen3_8b-lora-long-b4-gpus2") == 2
    assert gpus_of_case_id("rl_verl-qwen2_5_0_5b-full-gsm8k-b16-gpus2-alggrpo-dyn8192") == 2
    assert gpus_of_case_id("sft_hf-qwen3_8b-lora-long-b4") == 1


def test_measured_against_projected_counts_each_gpu_of_a_case() -> None:
    """150 s on one GPU and 240 s on two: 630 GPU-s, against 120 + 2 x 300 = 720 projected for them;
    the whole plan 780 GPU-s. The shards' identical splits count once."""
    found = gpu_time(RESULTS, [_shard(1), _shard(2), _shard(3)])
    assert found is not None
    assert (found.measured_s, found.measured_cases) == (630.0, 2)
    assert (found.projected_for_measured_s, found.projected_s) == (720.0, 780.0)
    assert found.line() == (
        "GPU time: 10.5 GPU-min measured for 2 case(s) with runs, projected 12.0 for them (-12%); "
        "the plan's 3 case(s) projected 13.0 GPU-min in all (1 from baseline, 1 from default, 1 from history)"
    )


def test_a_session_without_a_plan_says_nothing_of_it() -> None:
    assert gpu_time_line(RESULTS, [{"started": "2026-11-28T01:00:00+00:00", "settings": {}}]) == ""
    assert gpu_time(RESULTS, []) is None


def test_the_line_stands_under_the_headline_of_the_summary_and_the_page(tmp_path: Path) -> None:
    RunFolder(tmp_path).record_session(_shard(1))
    write_reports(tmp_path, RESULTS, "trainperf h100: night")
    summary = (tmp_path / "summary.md").read_text().splitlines()
    assert summary[2].startswith("**2 case(s)") and summary[4].startswith("GPU time: 10.5 GPU-min measured")
    page = (tmp_path / "index.html").read_text()
    assert (
        page.index('<p class="headline">')
        < page.index('<p class="gpu-time">GPU time: 10.5')
        < page.index("<table")
    )
