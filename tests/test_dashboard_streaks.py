"""The first page's size of a red streak: the streak's level against the good runs before it, so a
noisy run at the end of a streak never reads a slowdown as a speed-up."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

from store_data import make_result, nightly

from trainperf.recording.ingest import ingest
from trainperf.report.dashboard import build_site
from trainperf.report.trend_model import build_trends, red_streaks
from trainperf.store.db import open_store
from trainperf.store.records import StoredRun

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
CASE = "sft_hf-qwen3_8b-lora-short-b4"


def _synthetic_history() -> ModuleType:
    spec = importlib.util.spec_from_file_location("synthetic_history", BENCHMARKS / "synthetic_history.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _synthetic_site(tmp_path: Path, nights: int, cases: int, before_the_step: int) -> str:
    """The front page of a site built from synthetic nights that start ``before_the_step`` nights
    before the planted slowdown."""
    history = _synthetic_history()
    history.write_nights(
        tmp_path / "runs", nights, cases, first_night=history.SLOWER_FROM_NIGHT - before_the_step
    )
    store = open_store(str(tmp_path / "h.sqlite"))
    try:
        ingest(store, [tmp_path / "runs"], say=lambda _: None)
        build_site(store, tmp_path / "site")
    finally:
        store.close()
    return (tmp_path / "site" / "index.html").read_text()


def _stored(day: int, step_s: float, verdict: str) -> StoredRun:
    result = make_result(CASE, nightly(day), step_s, verdict=verdict)
    values = {name: value.value for name, value in result.metrics.items()}
    return StoredRun(
        run_key=f"night-{day}", started=nightly(day), runner="h100-a", runner_env="h100-a", case_id=CASE,
        created=nightly(day), outcome="ok", verdict=verdict, run_dir=None, fingerprint={}, steps=12,
        values=values,
    )  # fmt: skip


def test_a_streak_whose_latest_run_reads_fast_by_noise_keeps_its_adverse_size() -> None:
    good = [_stored(day, 0.500 * (1 + 0.01 * (-1) ** day), "pass") for day in range(12)]
    slower = [0.515, 0.520, 0.512, 0.518, 0.495]  # +3%, the last run 1% fast by noise
    streak = [_stored(12 + k, value, "regressed") for k, value in enumerate(slower)]
    (finding,) = red_streaks(build_trends([*good, *streak], ["step_time_s"]))
    assert finding.since == 12 and finding.run == 16
    assert finding.changes[0][0] == "step_time_s" and 0.025 < finding.changes[0][1] < 0.04


def test_a_streak_of_a_contaminated_run_alone_is_sized_by_what_it_measured() -> None:
    good = [_stored(day, 0.5, "pass") for day in range(12)]
    (finding,) = red_streaks(build_trends([*good, _stored(12, 0.6, "contaminated")], ["step_time_s"]))
    assert abs(finding.changes[0][1] - 0.2) < 1e-6


def test_every_planted_step_of_a_synthetic_history_is_red_with_its_adverse_size(tmp_path: Path) -> None:
    """A month around the night a fifth of the cases became 3% slower, 18 nights after it (seeded:
    sized by the latest run alone, 5 of the 14 read green, -1.1% to -1.7%)."""
    index = _synthetic_site(tmp_path, nights=30, cases=70, before_the_step=12)
    red = index[index.index("Not a pass on the latest run") : index.index("Change points from")]
    sizes = re.findall(r"<td class='size (\w+)'>([+-][\d.]+)% <small>([^<]+)", red)
    assert len(sizes) == 14, sizes
    assert all(tone == "bad" and float(size) > 0 for tone, size, _ in sizes), sizes
    # The planted work is the GPU's: kernel time, to within 0.1% a run, sizes it on every case, the
    # host-bound ones too (their step times spread 2-8%).
    assert {metric for *_, metric in sizes} == {"GPU kernel time per step (ms)"}
    assert "the median of its runs since its last good one" in index


def test_a_synthetic_history_lists_its_planted_steps_by_kernel_time_and_no_step_inside_a_tolerance(
    tmp_path: Path,
) -> None:
    """Forty nights of ten cases around the night two of them (one GPU-bound, one host-bound) became
    3% slower: the change points are those two, both seen in kernel time; host memory's wander (a
    real step to the detector over a long quiet series) is inside its tolerance and not listed."""
    index = _synthetic_site(tmp_path, nights=40, cases=10, before_the_step=20)
    changes = index[index.index("Change points from") : index.index("All cases")]
    listed = re.findall(r"([+-][\d.]+)% <small>([^<]+)</small>.*?>(sft_hf-synthetic_\d+[\w-]+)<", changes)
    assert sorted(case for *_, case in listed) == [
        "sft_hf-synthetic_00-lora-maxlen-b4",
        "sft_hf-synthetic_05-lora-short-b4",
    ], listed
    assert all(
        metric == "GPU kernel time per step (ms)" and 2.5 < float(size) < 3.5 for size, metric, _ in listed
    )
    every = index[index.index("All cases") :]
    assert "<th>kernel time, % of reference</th>" in every
    assert every.count("<svg class='spark'") == 20  # step time and kernel time for each of the ten


def test_a_skipped_run_is_drawn_as_skipped_not_failed_and_its_reason_said_once(tmp_path: Path) -> None:
    import json

    from trainperf.report.dashboard import _cause
    from trainperf.report.dashboard_case import kind_chip
    from trainperf.report.trend_model import Finding, kind_of

    why = "environment 'verl-sglang' does not exist: create it with `trainperf env create verl-sglang`"
    skipped = _stored(3, 0.5, "not-compared")
    skipped.outcome, skipped.message, skipped.values = "skipped", why, {}
    assert kind_of(skipped) == "skipped"
    assert ">skipped<" in kind_chip(skipped) and "failed" not in kind_chip(skipped)
    crashed = _stored(4, 0.5, "outcome-changed")
    crashed.outcome = "crash"
    assert kind_of(crashed) == "failed"
    # The run folder's verdict gives the same reason the store kept as the message: said once.
    result = tmp_path / "result.json"
    result.write_text(json.dumps({"verdict": {"verdict": "not-compared", "reason": why}}))
    skipped.result_path = str(result)
    trend = build_trends([_stored(day, 0.5, "pass") for day in range(3)] + [skipped], ["step_time_s"])[0]
    cause = _cause(Finding(trend=trend, run=len(trend.runs) - 1, changes=[]), None)
    assert cause.count(why) == 1, cause
