"""The fidelity benchmark's statistics and its run-folder analysis, on synthetic children."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from trainperf.errors import TrainperfError
from trainperf.measure import fidelity_stats as fidelity
from trainperf.measure.measurement import measure_run
from trainperf.studies.fidelity import STATE_FILE, Plan, analyse, render
from trainperf.studies.fidelity_render import _unsteady_phrase
from trainperf.workloads.protocol import BARE_WINDOW_START

TOKENS = [3534, 2418, 4447, 2183, 1226, 4246, 4690, 2933, 4595, 3038, 3490, 2395, 1620, 1995, 4424, 4749]


def _steps(seed: int, slowdown: float = 0.0) -> list[dict[str, float]]:
    """16 steps shaped like Qwen3-8B LoRA long on an H100: long batches GPU-bound and steady,
    short ones host-bound and noisy; a slow first step."""
    rng = random.Random(seed)
    steps, t = [], 1000.0 + seed * 100
    for index, tokens in enumerate(TOKENS, 1):
        if index == 1:
            duration = 6.0
        elif tokens > 4000:
            duration = tokens / 3100 * (1 + rng.uniform(-0.004, 0.004))
        else:
            duration = tokens / 2600 * (1 + rng.uniform(-0.3, 0.3))
        duration *= 1 + slowdown
        t += duration
        steps.append({"step": index, "t_end": t, "duration_s": duration, "tokens": tokens})
    return steps


def _measured(seed: int, slowdown: float = 0.0) -> fidelity.RunMeasurement:
    return measure_run({"steps": _steps(seed, slowdown)}, [], samples_per_step=4, idle_mem_b=None)


def test_cv() -> None:
    assert fidelity.cv([1.0, 1.0, 1.0]) == 0.0
    assert fidelity.cv([1.0]) is None
    assert fidelity.cv([0.9, 1.1]) == pytest.approx(0.1414, abs=1e-3)


def test_overhead_is_the_harness_shortfall_against_bare() -> None:
    over = fidelity.overhead([990.0, 995.0, 985.0], [1000.0, 1002.0])
    assert over.slowdown == pytest.approx(1 - 990 / 1001)
    assert over.interval is not None and over.interval[0] <= over.slowdown <= over.interval[1]
    assert fidelity.overhead([], [1.0]).slowdown is None


def test_paired_overhead_cancels_a_drift_that_the_pooled_medians_take_for_overhead() -> None:
    """As on the H100 (2026-11-22): the last rounds ran bare only and the GPU had slowed, so the
    pooled medians made the harness 4% *faster*; round by round it is level."""
    drift = [1.0, 0.99, 0.98, 0.95, 0.94]
    rounds = [([2000 * d, 2000 * d], 2000 * d) for d in drift[:3]]
    bare_only = [2000 * d for d in drift[3:]]
    pooled = fidelity.overhead([t for h, _ in rounds for t in h], [b for _, b in rounds] + bare_only)
    assert pooled.slowdown is not None and pooled.slowdown < -0.005
    paired = fidelity.paired_overhead(rounds + [([], b) for b in bare_only])
    assert paired.rounds == 3 and paired.slowdown == pytest.approx(0.0, abs=1e-12)
    slower = fidelity.paired_overhead([([990.0], 1000.0), ([985.0, 995.0], 1000.0), ([980.0], 1000.0)])
    assert slower.slowdown == pytest.approx(0.01) and slower.interval is not None
    assert slower.per_round == pytest.approx([0.01, 0.01, 0.02])  # launch order, for a trend
    assert fidelity.paired_overhead([([990.0], 1000.0)] * 2).slowdown is None  # too few rounds


def test_window_throughput_counts_only_steps_after_the_window_start() -> None:
    steps = [{"step": i, "duration_s": 1.0, "tokens": 100 * i} for i in range(1, 6)]
    assert fidelity.window_tokens_per_s(steps, 3) == pytest.approx((400 + 500) / 2)


def test_window_noise_names_the_steps_that_vary_from_child_to_child() -> None:
    runs = [_steps(seed) for seed in range(6)]
    noise = fidelity.window_noise(runs, BARE_WINDOW_START)
    steady = [i for i, tokens in enumerate(TOKENS, 1) if tokens > 4000 and i > BARE_WINDOW_START]
    assert noise.runs == 6 and sorted(noise.step_cv) == list(range(BARE_WINDOW_START + 1, len(TOKENS) + 1))
    assert all(step not in noise.unsteady_steps for step in steady)  # +-0.4%: well under 2%
    assert set(noise.unsteady_steps) <= {i for i, tokens in enumerate(TOKENS, 1) if tokens <= 4000}
    assert len(noise.unsteady_steps) >= 5  # +-30% host-bound steps are caught (a few may land close)
    assert noise.unsteady_time_share is not None and 0.3 < noise.unsteady_time_share < 0.8
    assert noise.tokens_per_s_cv is not None and noise.tokens_per_s_cv > 0.01
    # A step a run lacks (cut short) is left out rather than compared over fewer runs.
    assert len(TOKENS) not in fidelity.window_noise([*runs[:5], runs[5][:-1]], BARE_WINDOW_START).step_cv


def test_aa_passes_and_a_planted_five_percent_is_caught_at_three_percent_tolerance() -> None:
    groups = {
        fidelity.AA_BASE: [_measured(seed) for seed in range(5)],
        fidelity.AA_OTHER: [_measured(seed) for seed in range(5, 10)],
        fidelity.planted_label(0.05): [_measured(seed, 0.05) for seed in range(10, 12)],
    }
    summary = fidelity.detection_summary(fidelity.detection(groups, [0.03]))
    rows = {row["series"]: row for row in summary}
    assert rows["A2"]["pooled"] == "pass" and rows["A2"]["single_flagged"] == 0
    assert rows["plant0.05"]["pooled"] == "regressed" and rows["plant0.05"]["single_flagged"] == 2
    assert fidelity.smallest_detected(summary, 0.03) == 0.05


def test_plan_interleaves_and_validates() -> None:
    plan = Plan("c", 16, 2, 1, (0.05,), 1)
    assert plan.schedule() == ["A", "bare", "A2", "plant0.05", "A", "A2"]
    assert [r for r, _label in plan.rounds()] == [0, 0, 0, 0, 1, 1]
    with pytest.raises(TrainperfError, match="--aa"):
        Plan("c", 16, 1, 1, (), 1)
    with pytest.raises(TrainperfError, match="--plant"):
        Plan("c", 16, 2, 1, (1.5,), 1)
    assert Plan("c", 40, 2, 1, (), 0, window_after=16).window_after == 16
    with pytest.raises(
        TrainperfError, match=r"--steps must be more than 20: the window starts after step 16"
    ):
        Plan("c", 20, 2, 1, (), 0, window_after=16)
    with pytest.raises(TrainperfError, match="--window-after"):
        Plan("c", 16, 2, 1, (), 0, window_after=0)


def _child(
    folder: Path,
    steps: list[dict[str, float]] | None = None,
    bare: float | None = None,
    after: int = BARE_WINDOW_START,
) -> None:
    folder.mkdir(parents=True)
    result: dict[str, object] = {"outcome": "ok", "steps": steps or []}
    if bare is not None:
        result["bare_window"] = {"after_step": after, "steps": 16 - after, "seconds": bare, "tokens": 41584}
    (folder / "result.json").write_text(json.dumps(result))
    (folder / "spec.json").write_text(
        json.dumps(
            {"case": {"family": "sft_hf", "model": "m", "method": "lora", "profile": "long", "batch_size": 4}}
        )
    )


def _write_run(tmp_path: Path, plan: Plan, bare_after: int = BARE_WINDOW_START) -> None:
    """A finished run folder of ``plan``: synthetic children, planted ones 5% slower per step."""
    children = []
    for index, label in enumerate(plan.schedule()):
        relative = f"cases/c/r{index + 1}"
        if label == "bare":
            _child(tmp_path / relative, bare=13.0, after=bare_after)
        else:
            _child(tmp_path / relative, _steps(index, 0.05 if label.startswith("plant") else 0.0))
        children.append({"label": label, "dir": relative, "outcome": "ok", "message": ""})
    (tmp_path / STATE_FILE).write_text(json.dumps({"plan": _plan(plan), "children": children}))
    (tmp_path / "run.json").write_text(
        json.dumps({"sessions": [{"idle_mem_b": None, "fingerprint": {"gpu_name": "X"}}]})
    )


def test_analyse_a_run_folder_from_its_files(tmp_path: Path) -> None:
    plan = Plan("sft_hf-m-lora-long-b4", 16, 2, 1, (0.05,), 1)
    _write_run(tmp_path, plan)
    report = analyse(tmp_path, tmp_path)
    assert report.children_done == 6
    assert report.overhead.bare_tokens_per_s == [pytest.approx(41584 / 13.0)]
    assert report.noise.runs == 4
    assert report.overhead_paired.rounds == 1 and report.overhead_paired.slowdown is None
    assert "fidelity of sft_hf-m-lora-long-b4" in render(report)
    assert report.window_noise.runs == 4  # the A/A harness runs, not the planted ones
    assert "window tokens/s (steps after 3) varies" in render(report)
    assert (tmp_path / "fidelity-report.json").is_file()


def test_a_later_window_times_the_harness_over_the_same_steps_as_the_bare_runs(tmp_path: Path) -> None:
    plan = Plan("sft_hf-m-lora-long-b4", 16, 2, 1, (), 0, window_after=10)
    _write_run(tmp_path, plan, bare_after=10)
    report = analyse(tmp_path, tmp_path)
    first_harness = _steps(0)
    assert report.overhead.harness_tokens_per_s[0] == pytest.approx(
        fidelity.window_tokens_per_s(first_harness, 10)
    )
    assert report.overhead.harness_tokens_per_s[0] != pytest.approx(
        fidelity.window_tokens_per_s(first_harness, 3)
    )
    assert "overhead and power after step 10" in render(report)


def test_a_bare_run_timed_over_another_window_is_refused(tmp_path: Path) -> None:
    _write_run(tmp_path, Plan("sft_hf-m-lora-long-b4", 16, 2, 1, (), 0, window_after=10), bare_after=3)
    with pytest.raises(TrainperfError, match="timed after step 3, the plan says 10"):
        analyse(tmp_path, tmp_path)


def _plan(plan: Plan) -> dict[str, object]:
    from dataclasses import asdict

    return asdict(plan)


def test_analyse_needs_a_fidelity_run(tmp_path: Path) -> None:
    with pytest.raises(TrainperfError, match="no fidelity.json"):
        analyse(tmp_path, tmp_path)


@pytest.mark.parametrize("after", [None, 5])
def test_bare_child_times_only_its_window(tmp_path: Path, after: int | None) -> None:
    """A real bare child on the CPU: no per-step records, one window after step BARE_WINDOW_START
    (or the plan's --window-after) with the Trainer's token count."""
    from child_run import run_child_spec

    from trainperf.case import Case

    case = Case(
        family="sft_hf",
        model="qwen3_tiny",
        method="lora",
        profile="short",
        batch_size=4,
        gpu_classes=("cpu",),
    )
    start = BARE_WINDOW_START if after is None else after
    spec = {"case": case.to_dict(), "steps": start + 3, "device": "cpu", "seed": 0, "bare": True}
    if after is not None:
        spec["bare_window_after"] = after
    result = run_child_spec(tmp_path, spec)
    assert result["steps"] == []
    window = result["bare_window"]
    assert window["after_step"] == start and window["steps"] == 3
    assert window["seconds"] > 0 and window["tokens"] > 0


def test_a_run_folders_saved_plan_is_read_back_and_a_broken_one_named(tmp_path: Path) -> None:
    """On the H100 a resume without repeating every option was refused; --resume now takes the
    folder's plan (read here), and run_fidelity still refuses an option given differently."""
    from trainperf.studies.fidelity import load_state

    plan = Plan("sft_hf-m-lora-long-b4", 12, 3, 5, (0.05,), 0)
    (tmp_path / STATE_FILE).write_text(json.dumps({"plan": _plan(plan), "children": []}))
    assert load_state(tmp_path)[0] == plan
    saved_before_the_window_option = {k: v for k, v in _plan(plan).items() if k != "window_after"}
    (tmp_path / STATE_FILE).write_text(json.dumps({"plan": saved_before_the_window_option, "children": []}))
    assert load_state(tmp_path)[0] == plan  # the committed H100 runs resume and analyse as they were
    (tmp_path / STATE_FILE).write_text("{not json")
    with pytest.raises(TrainperfError, match="not a fidelity plan"):
        load_state(tmp_path)
    with pytest.raises(TrainperfError, match="no fidelity.json"):
        load_state(tmp_path / "missing")


@pytest.mark.parametrize(
    ("unsteady", "expected"),
    [
        ([], "every step repeats from child to child within 0.50%"),
        (
            [15],
            "step 15 varies 2.9% from child to child (8.00% of the window's time), the other 2 at most 1.20%",
        ),
        (
            [4, 15],
            (
                "steps 4, 15 vary 1.2%-2.9% from child to child (8.00% of the window's time), the other 1 at "
                "most 0.50%"
            ),
        ),
    ],
)
def test_the_window_line_words_the_unsteady_steps_by_their_count(unsteady: list[int], expected: str) -> None:
    # With no unsteady step, only the steady one is in the window.
    cvs = {4: 0.012, 5: 0.005, 15: 0.029} if unsteady else {5: 0.005}
    window = fidelity.WindowNoise(3, 4, 0.01, step_cv=cvs, unsteady_steps=unsteady, unsteady_time_share=0.08)
    assert _unsteady_phrase(window) == expected


def test_the_paired_line_lists_each_round_in_launch_order(tmp_path: Path) -> None:
    _write_run(tmp_path, Plan("sft_hf-m-lora-long-b4", 16, 3, 3, (), 0))
    report = analyse(tmp_path, tmp_path)
    assert len(report.overhead_paired.per_round) == 3
    assert "; round by round " in render(report)
