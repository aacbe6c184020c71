"""End to end on the CPU: a baseline written with its profile summary, then two planted regressions
of different natures, each diagnosed in the right category at the default settings, with the
``diagnosis:`` line in the terminal, summary.md, index.html and the JUnit properties."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from crowded import crowding, planted_verdict, written_baseline
from required import missing
from test_e2e_cpu import run as e2e_cpu_run
from test_e2e_cpu import write_catalogue

CASE_ID = "sft_hf-qwen3_tiny-lora-short-b4"


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return e2e_cpu_run(pytester, "--perf-store", "off", *args)


def latest_result(pytester: pytest.Pytester) -> tuple[Path, dict[str, Any]]:
    run_dir = max((pytester.path / "reports").iterdir())
    return run_dir, json.loads((run_dir / "results" / f"{CASE_ID}.json").read_text())


def planted(pytester: pytest.Pytester, plant: str, confirm: str) -> tuple[dict[str, Any], str]:
    slowed = run(pytester, "--perf-plant", plant, "--perf-confirm", confirm, "--junitxml", f"{plant}.xml")
    run_dir, result = latest_result(pytester)
    # `regressed` and failed; or, where the host CPU watch saw another job crowd the run,
    # `contaminated`: shown, never judged, so never diagnosed, and nothing here to check (crowded.py).
    if planted_verdict(slowed, run_dir, CASE_ID) == "contaminated":
        missing("the diagnosis checks", f"the host was crowded during the planted run ({crowding(result)})")
    diagnosis = result["verdict"]["diagnosis"]
    assert diagnosis["line"] in slowed.stdout.str()
    if confirm == "0":
        # One extra profiled run, kept in the folder, never pooled into the metrics.
        assert len(result["runs"]) == 1 and (run_dir / "cases" / CASE_ID / "r2" / "steps.jsonl").is_file()
        assert diagnosis["cost"].startswith("one extra profiled run")
    else:
        # The confirmation run was profiled: no extra run at all.
        assert [r["purpose"] for r in result["runs"]] == ["measurement", "confirmation"]
        assert not (run_dir / "cases" / CASE_ID / "r3").exists()
        assert diagnosis["cost"] == f"none: confirmation run cases/{CASE_ID}/r2 was profiled"
    assert f"`{diagnosis['line']}`" in (run_dir / "summary.md").read_text()
    assert "diagnosis: " in (run_dir / "index.html").read_text()
    properties = {  # the suite's properties, named <test name>/<figure>
        prop.get("name", "").rsplit("/", 1)[-1]: prop.get("value")
        for prop in ElementTree.parse(pytester.path / f"{plant}.xml").iter("property")
    }
    assert properties["trainperf_diagnosis"] == diagnosis["line"]
    return result, diagnosis["line"]


def test_a_baseline_profile_then_host_and_attention_regressions_diagnosed(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One thread per child: on a CPU shared with other jobs, a child that sizes its pool to every
    # core can run many times slower than alone, which would swamp the planted regressions.
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    write_catalogue(pytester)
    first = run(pytester, "--perf-update-baselines", "--perf-baseline-repeats", "1")
    first.assert_outcomes(passed=1)
    baseline = written_baseline(pytester.path / "baselines", latest_result(pytester)[0], CASE_ID)
    profile = baseline["profile"]
    assert profile["kind"] == "cpu" and profile["steps"] == 3
    assert profile["device_ms"]["GEMM"] > 0 and profile["device_ms"]["attention"] > 0
    assert 0 < len(profile["top_kernels"]) <= 20 and "n/a" in profile["memory"]
    assert "trace" not in json.dumps(profile)  # the analysed summary, no raw trace

    host, line = planted(pytester, "host:3", confirm="1")
    assert host["verdict"]["diagnosis"]["nature"] == "host", line
    assert line.startswith("diagnosis: host-side delay (time outside any operator): ")

    # 100 extra SDPA passes per attention call: 30 gave +79% on one 2-core host and +200% on
    # another, while the CPU class's step tolerance is 90%; the planted cost must clear it anywhere.
    attention, line = planted(pytester, "attention:100", confirm="0")
    assert attention["verdict"]["diagnosis"]["nature"] == "device", line
    assert line.startswith("diagnosis: extra operator time in attention: attention +")
    # A planted run is never a baseline.
    assert json.loads((pytester.path / "baselines" / "cpu" / f"{CASE_ID}.json").read_text()) == baseline
