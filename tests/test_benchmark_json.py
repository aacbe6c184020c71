"""benchmark.json as pytest-benchmark reads it: its own ``Stats`` gives the same summary, and its
``compare`` command sets a case beside itself across runs."""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest
import required
from store_data import make_result, nightly

from trainperf.report.export import benchmark_json, step_stats

CASES = ("sft_hf-qwen3_8b-lora-maxlen-b4", "sft_hf-qwen3_8b-lora-short-b4")
FIELDS = (
    "min", "max", "mean", "stddev", "rounds", "median", "iqr", "q1", "q3", "iqr_outliers",
    "stddev_outliers", "outliers", "ld15iqr", "hd15iqr", "ops", "total",
)  # fmt: skip


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 20, 37, 40])
def test_the_summary_is_pytest_benchmarks_own(count: int) -> None:
    stats_module = required.module("pytest_benchmark.stats", install="pip install -e '.[dev]'")
    rng = random.Random(count)
    data = [0.5 * (1 + rng.gauss(0, 0.02)) + (0.3 if rng.random() < 0.1 else 0.0) for _ in range(count)]
    theirs = stats_module.Stats()
    for value in data:
        theirs.update(value)
    ours = step_stats(data)
    for name in FIELDS:
        expected = getattr(theirs, name)
        assert ours[name] == (
            pytest.approx(expected, rel=1e-12) if isinstance(expected, float) else expected
        ), name


def _run_file(folder: Path, day: int, slower: float) -> Path:
    results = [
        make_result(case, nightly(day), 0.5 * (i + 1) * slower, seed=day + i) for i, case in enumerate(CASES)
    ]
    folder.mkdir(parents=True)
    path = folder / f"000{day}_run.json"
    path.write_text(json.dumps(benchmark_json(results, {"gpu_class": "h100", "started": nightly(day)})))
    return path


def test_the_default_compare_sets_a_case_beside_itself_across_runs(tmp_path: Path) -> None:
    first = _run_file(tmp_path / "a", 1, 1.0)
    second = _run_file(tmp_path / "b", 2, 1.10)
    assert [b["group"] for b in json.loads(first.read_text())["benchmarks"]] == list(CASES)
    cli = required.program("pytest-benchmark", install="pip install -e '.[dev]'")
    done = subprocess.run(
        [cli, "compare", str(first), str(second), "--columns", "median", "--sort", "name"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    tables = done.stdout.split("benchmark '")[1:]
    assert [block.split("'", 1)[0] for block in tables] == list(CASES)  # one table per case
    for case, block in zip(CASES, tables):
        rows = [line for line in block.splitlines() if line.startswith(f"{case} (")]
        assert len(rows) == 2, block  # the case in each run's file, and nothing else
        # The later run's median is 10% slower than the earlier run of the same case.
        assert "(1.10)" in block or "(1.09)" in block or "(1.11)" in block, block
