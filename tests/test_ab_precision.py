"""An A/B's rounds until its step-time interval is narrow enough, and a study resumed from its
measured rounds: the loop runs real statistics over synthetic run folders (one per side and round,
each run a little off the others, as runs on a GPU are), only the pytest child is left out."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from store_data import make_result, write_run_folder

from trainperf.cli.ab import verdicts_of
from trainperf.cli.compare import comparison_of
from trainperf.errors import TrainperfError
from trainperf.judge.compare import CaseVerdict, Verdict
from trainperf.run_checks_record import RunContamination
from trainperf.run_record import RunRecord
from trainperf.studies import ab
from trainperf.studies.ab import RoundPlan, completed_rounds, measure_rounds, pooled_sides
from trainperf.studies.precision import Precision, least_precise, more_rounds, precision_line, rounds_for

CASE = "sft_hf-qwen3_8b-lora-maxlen-b4"
RUN_SPREAD = 0.012
"""Each run's level off the side's, as a fraction: the spread that sets a GPU-bound case's interval."""


def _fake_rounds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """``run_round`` replaced by one writing a run folder a side (B as fast as A, each run off by
    its own draw); the rounds it ran."""
    ran: list[int] = []

    def run_round(
        index: int, planned: int, env_a: str, env_b: str, args: list[str], output: Path
    ) -> dict[str, Path]:
        ran.append(index)
        folders = {}
        for side in ("A", "B"):
            step = 1.0 * (1 + random.Random(f"{side}{index}").gauss(0, RUN_SPREAD))
            result = make_result(CASE, f"2026-11-27T03:{index:02d}:00+00:00", step, seed=index)
            folders[side] = write_run_folder(
                ab.round_dir(output, index, side) / "run", "2026-11-27T03:00", [result]
            )
        return folders

    monkeypatch.setattr(ab, "run_round", run_round)
    return ran


def _judge(folders_a: list[Path], folders_b: list[Path]) -> dict[str, CaseVerdict] | None:
    return verdicts_of(comparison_of(*pooled_sides(folders_a, folders_b), "A", "B", strict=False))


def test_rounds_are_added_in_pairs_until_the_interval_is_narrow_enough(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ran = _fake_rounds(monkeypatch)
    plan = RoundPlan(rounds=2, max_rounds=12, within_pct=1.0)
    folders_a, _ = measure_rounds("a/python", "b/python", plan, [], tmp_path, _judge)
    widths = []
    for rounds in range(2, len(folders_a) + 1):
        precision = least_precise(_judge(folders_a[:rounds], _folders(tmp_path, "B", rounds)))
        assert precision is not None
        widths.append(precision.half_width_pct)
    assert ran == list(range(1, len(folders_a) + 1))
    assert widths[0] > 1.0, "two rounds already precise: the test measures nothing"
    assert widths[-1] <= 1.0 < max(widths[:-1]) and len(folders_a) < plan.max_rounds
    assert (len(folders_a) - 2) % 2 == 0 or len(folders_a) == plan.max_rounds  # pairs keep A B / B A balanced


def _folders(output: Path, side: str, rounds: int) -> list[Path]:
    return [ab.round_dir(output, index, side) / "run" for index in range(1, rounds + 1)]


def test_the_round_limit_stops_a_study_that_stays_imprecise(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ran = _fake_rounds(monkeypatch)
    measure_rounds("a", "b", RoundPlan(rounds=2, max_rounds=3, within_pct=0.01), [], tmp_path, _judge)
    assert ran == [1, 2, 3]
    with pytest.raises(TrainperfError, match="--max-rounds at least --rounds"):
        measure_rounds("a", "b", RoundPlan(rounds=4, max_rounds=3), [], tmp_path, _judge)


def test_a_resumed_study_keeps_its_measured_rounds_and_measures_a_round_cut_short_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _fake_rounds(monkeypatch)
    measure_rounds("a", "b", RoundPlan(rounds=2, max_rounds=2), [], tmp_path, _judge)
    # Round 3 was cut short after A: its B side never ran.
    write_run_folder(
        tmp_path / "round3-A" / "run", "2026-11-27T03:00", [make_result(CASE, "2026-11-27", 1.0)]
    )
    kept = completed_rounds(tmp_path)
    assert kept == (_folders(tmp_path, "A", 2), _folders(tmp_path, "B", 2))
    ran = _fake_rounds(monkeypatch)
    folders_a, folders_b = measure_rounds(
        "a", "b", RoundPlan(rounds=4, max_rounds=4), [], tmp_path, _judge, kept
    )
    assert (
        ran == [3, 4] and folders_a == _folders(tmp_path, "A", 4) and folders_b == _folders(tmp_path, "B", 4)
    )


def test_the_projection_scales_the_rounds_with_the_square_of_the_width() -> None:
    after_three = Precision(CASE, 1.35)
    assert rounds_for(after_three, 3, 1.0) == 6  # 3 x 1.35^2 = 5.5
    assert rounds_for(Precision(CASE, 0.8), 3, 1.0) == 3
    assert more_rounds(after_three, 3, 1.0, max_rounds=8) == 2
    assert more_rounds(Precision(CASE, 1.05), 4, 1.0, max_rounds=8) == 1  # 4 x 1.1 = 4.4: one more
    assert more_rounds(after_three, 7, 1.0, max_rounds=8) == 1
    assert more_rounds(after_three, 8, 1.0, max_rounds=8) == 0
    assert more_rounds(None, 3, 1.0, max_rounds=8) == 0  # nothing judged: more rounds cannot help
    line = precision_line(after_three, 3, 1.0)
    assert (
        line == f"precision: step time within ±1.4% after 3 round(s) ({CASE}); ±1% would take about 6 rounds"
    )
    assert precision_line(None, 2, None) == "precision: no case's step time was judged after 2 round(s)"


def test_a_contaminated_case_sets_no_precision(tmp_path: Path) -> None:
    """A busy host's timing is not judged: it must not keep a study adding rounds."""
    clean = _judge([_run(tmp_path / "a", seed=1)], [_run(tmp_path / "b", seed=2)])
    assert least_precise(clean) is not None
    busy = make_result(CASE, "2026-11-27", 1.0, seed=2)
    busy.runs = [
        RunRecord(
            contamination=RunContamination(("host CPU: 1.5 cores of other work",), foreign_process=False)
        )
    ]
    contaminated = _judge(
        [_run(tmp_path / "c", seed=1)], [write_run_folder(tmp_path / "d", "2026-11-27", [busy])]
    )
    assert contaminated is not None and contaminated[CASE].verdict is Verdict.CONTAMINATED
    assert least_precise(contaminated) is None


def _run(folder: Path, seed: int) -> Path:
    return write_run_folder(folder, "2026-11-27T03:00", [make_result(CASE, "2026-11-27", 1.0, seed=seed)])
