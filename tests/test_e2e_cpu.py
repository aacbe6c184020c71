"""End to end on the CPU: real TRL training steps on a tiny model through the pytest plugin.

Each test drives a throw-away catalogue with pytester, so the gate is exercised exactly as a
user meets it: baselines written, a second run judged, a planted slowdown failing by name.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from crowded import crowding, planted_verdict, result_of, written_baseline

CASE_ID = "sft_hf-qwen3_tiny-lora-short-b4"
CATALOGUE = """
import pytest
from trainperf.case import Case
from trainperf.ground.catalogue import params

CASES = [
    Case(family="sft_hf", model="qwen3_tiny", method="lora", profile="short", batch_size=4,
         gpu_classes=("cpu",), {extra}),
]

@pytest.mark.parametrize("case", params(CASES))
def test_case(case, trainperf):
    trainperf(case)
"""


def write_catalogue(pytester: pytest.Pytester, extra: str = "") -> None:
    pytester.makepyfile(test_catalogue=CATALOGUE.format(extra=extra))
    pytester.mkdir("baselines")  # empty: its cases read `new` (a missing folder is refused as a typo)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-m",
        "cpu",
        "--perf-steps",
        "12",
        "--perf-baselines",
        "baselines",
        "--perf-output",
        "reports",
        *args,
        timeout=300,
    )


def latest_run(pytester: pytest.Pytester) -> Path:
    return max((pytester.path / "reports").iterdir())


def test_baseline_then_pass_then_planted_slowdown_fails(pytester: pytest.Pytester) -> None:
    write_catalogue(pytester)
    first = run(pytester, "--perf-update-baselines", "--perf-baseline-repeats", "1")
    first.assert_outcomes(passed=1)
    baseline = pytester.path / "baselines" / "cpu" / f"{CASE_ID}.json"
    stored = written_baseline(pytester.path / "baselines", latest_run(pytester), CASE_ID)
    assert stored["outcome"] == "ok"
    assert stored["effective_config"]["lora_layers"] == 14  # 7 projections x 2 layers
    assert stored["effective_config"]["gradient_checkpointing"] is True
    # Every steady step's sample is kept for the paired statistics. How many depends on the warm-up
    # this host showed (at most half of the run), not on a fixed count.
    (only_run,) = stored["runs"]
    steady, warmup = only_run["steady_steps"], only_run["warmup_steps"]
    assert len(stored["metrics"]["step_time_s"]["samples"]) == steady >= (steady + warmup) // 2

    second = run(pytester)
    second.assert_outcomes(passed=1)
    assert CASE_ID in second.stdout.str()
    # A serial session says its progress too: its cases at the start, each as it ends.
    assert "[trainperf] session: 1 case(s) to run" in second.stdout.str()
    assert f"[trainperf] case 1/1 done: {CASE_ID} passed (" in second.stdout.str()

    # 6x: far beyond what a noisy shared CPU does to a run (back-to-back runs moved by up to 27%).
    # Where the host CPU watch saw another job crowd the run, it is `contaminated` and passes: its
    # slowdown is shown, never judged (crowded.py); otherwise it is `regressed` and fails.
    slowed = run(pytester, "--perf-plant-slowdown", "5.0", "--perf-confirm", "1")
    output = slowed.stdout.str()
    if planted_verdict(slowed, latest_run(pytester), CASE_ID) == "regressed":
        assert "regressed" in output and "step_time_s" in output
        # A timing regression is confirmed by a fresh child before it fails the build.
        assert "confirmed by 1 more fresh run(s)" in output and "not confirmed" not in output
    else:
        assert f"{CASE_ID}: contaminated" in output and "host CPU:" in output, output[-3000:]
    # A planted run never becomes a baseline.
    assert json.loads(baseline.read_text())["created"] == stored["created"]
    # Results name paths relative to their run folder or the project, nothing of this machine's.
    written = [
        baseline,
        *(pytester.path / "reports").rglob("*.json"),
        *(pytester.path / "reports").rglob("*.md"),
    ]
    assert [p for p in written if str(pytester.path) in p.read_text()] == []


def test_corrupt_baseline_is_one_line_and_the_run_goes_on(pytester: pytest.Pytester) -> None:
    write_catalogue(pytester)
    broken = pytester.path / "baselines" / "cpu" / "sft_hf-qwen3_tiny-lora-short-b4.json"
    broken.parent.mkdir(parents=True)
    broken.write_text("{ not json")
    result = run(pytester)
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert "is corrupt" in output and "--perf-update-baselines" in output
    assert "Traceback" not in output


def test_gpu_selection_on_a_cpu_machine_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_catalogue=CATALOGUE.format(extra="").replace('("cpu",)', '("h100",)'))
    result = pytester.runpytest_subprocess("-m", "h100", "--perf-output", "reports")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    error = result.stderr.str()
    assert "class h100" in error and "--perf-gpu-class" in error


def test_missing_model_config_fails_in_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_catalogue=CATALOGUE.format(extra="").replace("qwen3_tiny", "no_such_model"))
    pytester.mkdir("baselines")
    result = run(pytester)
    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert "model config 'no_such_model' is missing" in output
    assert "Traceback" not in output


def test_local_checkpoint_and_local_dataset(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """The real loading path: a checkpoint folder and a JSONL dataset on disk replace the synthetic ones."""
    checkpoint = tmp_path / "ckpt"
    script = textwrap.dedent(
        f"""
        import torch
        from trainperf.synth.random_model import build_random_model, hf_config
        from trainperf.synth.tokenizer import build_tokenizer
        config = hf_config("qwen3_tiny", torch.float32, "sdpa")
        model, _ = build_random_model(
            config, device=torch.device("cpu"), dtype=torch.float32, quantize_4bit=False
        )
        model.save_pretrained("{checkpoint}")
        build_tokenizer(config.vocab_size).save_pretrained("{checkpoint}")
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    data = tmp_path / "alpaca.jsonl"
    rows = [
        {
            "instruction": f"w{10 + i} w{20 + i}",
            "input": "",
            "output": " ".join(f"w{j}" for j in range(5, 40 + i)),
        }
        for i in range(64)
    ]
    data.write_text("\n".join(json.dumps(row) for row in rows))
    write_catalogue(pytester, extra=f'model_path="{checkpoint}", dataset_path="{data}"')
    result = run(pytester, "--perf-update-baselines", "--perf-baseline-repeats", "1")
    result.assert_outcomes(passed=1)
    case_id = f"{CASE_ID}-localmodel-localdata"
    stored = written_baseline(pytester.path / "baselines", latest_run(pytester), case_id)
    assert stored["effective_config"]["model_source"] == f"local:{checkpoint}"
    assert stored["effective_config"]["dataset_source"] == str(data)
    assert stored["metrics"]["tokens_per_s"]["value"] > 0


def test_missing_optional_dependency_skips_with_the_fix(tmp_path: Path) -> None:
    """bitsandbytes absent: the QLoRA child reports a skip naming the package and the install command."""
    spec = {
        "case": {
            "family": "sft_hf",
            "model": "qwen3_tiny",
            "method": "qlora",
            "profile": "short",
            "batch_size": 2,
        },
        "steps": 2,
        "device": "cpu",
        "out_dir": str(tmp_path),
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    code = (
        "import sys; sys.modules['bitsandbytes'] = None\n"
        "from trainperf.workloads.child import main\n"
        f"main([{str(tmp_path / 'spec.json')!r}])\n"
    )
    completed = subprocess.run([sys.executable, "-c", code], check=False, timeout=120)
    assert completed.returncode == 4
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["outcome"] == "skipped"
    assert "bitsandbytes is not installed" in result["message"] and "trainperf[qlora]" in result["message"]


def test_keyword_filter_deselects_other_classes_instead_of_failing(pytester: pytest.Pytester) -> None:
    mixed = CATALOGUE.format(extra="").replace(
        "    Case(",
        '    Case(family="sft_hf", model="qwen3_8b", method="lora", profile="short", batch_size=4,\n'
        '         gpu_classes=("h100",)),\n    Case(',
        1,
    )
    pytester.makepyfile(test_catalogue=mixed)
    result = pytester.runpytest_subprocess("-k", "lora", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    output = result.stdout.str()
    assert "qwen3_tiny" in output and "1 case(s) of other GPU classes deselected" in output


def test_baselines_pool_several_runs_and_progress_is_live(pytester: pytest.Pytester) -> None:
    write_catalogue(pytester)
    result = run(
        pytester, "--perf-update-baselines", "--perf-baseline-repeats", "2", "--perf-progress-interval", "1"
    )
    result.assert_outcomes(passed=1)
    pooled = result_of(latest_run(pytester), CASE_ID)
    assert [run["purpose"] for run in pooled["runs"]] == ["measurement", "measurement"]
    assert len(pooled["metrics"]["step_time_s"]["per_run"]) == 2
    # Stored as the baseline, unless the host CPU watch found the host crowded (crowded.py).
    baseline = pytester.path / "baselines" / "cpu" / f"{CASE_ID}.json"
    if crowding(pooled) is None:
        stored = json.loads(baseline.read_text())
        assert stored["metrics"]["step_time_s"]["per_run"] == pooled["metrics"]["step_time_s"]["per_run"]
    else:
        assert not baseline.exists()
    output = result.stdout.str()
    # Progress is written past pytest's capture, before the test's own outcome line.
    assert "run 2/2: started" in output
    assert "Captured stdout call" not in output
