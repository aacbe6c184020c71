"""pytest -n 2 gives the same results as a serial run, in one run folder with one summary.

The children are a fake interpreter (``--perf-python``) that writes the child's files at once,
so the test exercises the plugin's xdist wiring, not TRL (the real tiny cases take ~10-50 s each
on two shared cores).
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest
import required
from crowded import crowding, result_of

required.module("xdist", "pip install -e '.[dev]' (pytest-xdist)")

CATALOGUE = """
import pytest
from trainperf.case import Case
from trainperf.ground.catalogue import params

CASES = [
    Case(family="sft_hf", model="qwen3_tiny", method=m, profile=p, batch_size=4, gpu_classes=("cpu",))
    for m in ("lora", "full") for p in ("short", "long")
]

@pytest.mark.parametrize("case", params(CASES))
def test_case(case, trainperf):
    trainperf(case)
"""

# Stands in for `python -m trainperf.workloads SPEC`: steady steps, an ok result, its own pid.
FAKE_CHILD = """#!{python}
import json, os, sys, time
spec = json.load(open(sys.argv[-1]))
out = spec["out_dir"]
steps, now = [], time.time()
for k in range(spec["steps"]):
    steps.append({{"step": k + 1, "t_end": now + 0.1 * k, "duration_s": 0.1 + 0.001 * (k % 3), "tokens": 400}})
with open(os.path.join(out, "steps.jsonl"), "w") as handle:
    handle.writelines(json.dumps(s) + "\\n" for s in steps)
result = {{"outcome": "ok", "steps": steps, "memory": {{"host_peak_rss_b": 2**28}}, "pid": os.getpid(),
          "effective_config": {{"method": spec["case"]["method"]}}}}
json.dump(result, open(os.path.join(out, "result.json"), "w"))
"""


def fake_python(path: Path) -> Path:
    script = path / "fake-python"
    script.write_text(FAKE_CHILD.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def run(pytester: pytest.Pytester, output: str, *args: str) -> tuple[pytest.RunResult, list[Path]]:
    python = fake_python(pytester.path)
    (pytester.path / "baselines").mkdir(exist_ok=True)
    result = pytester.runpytest_subprocess(
        "-m",
        "cpu",
        "--perf-steps",
        "6",
        "--perf-python",
        str(python),
        "--perf-output",
        output,
        "--perf-baselines",
        "baselines",
        "-p",
        "no:randomly",
        *args,
        timeout=120,
    )
    return result, sorted((pytester.path / output).iterdir())


def outcomes(run_dir: Path) -> dict[str, tuple[str, str]]:
    found = {}
    for path in (run_dir / "results").glob("*.json"):
        data = json.loads(path.read_text())
        found[data["case_id"]] = (data["outcome"], data["verdict"]["verdict"])
    return found


def test_two_workers_give_the_serial_results_in_one_folder(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_catalogue=CATALOGUE)
    serial, serial_dirs = run(pytester, "serial")
    serial.assert_outcomes(passed=4)
    parallel, parallel_dirs = run(pytester, "parallel", "-n", "2")
    parallel.assert_outcomes(passed=4)

    assert len(serial_dirs) == 1 and len(parallel_dirs) == 1, (
        parallel_dirs
    )  # one run folder, not one per worker
    run_dir = parallel_dirs[0]
    assert len(outcomes(run_dir)) == 4
    # The same cases with the same outcomes; each verdict `new` (no baselines here), or
    # `contaminated` for a run the host CPU watch found crowded by another job (crowded.py).
    for folder in (serial_dirs[0], run_dir):
        for case, (outcome, verdict) in outcomes(folder).items():
            crowded = crowding(result_of(folder, case)) is not None
            assert (outcome, verdict) == ("ok", "contaminated" if crowded else "new"), (folder.name, case)
    assert outcomes(run_dir).keys() == outcomes(serial_dirs[0]).keys()
    # Both workers worked, each leaving its own session record beside the shared results.
    assert sorted(p.name for p in run_dir.glob("run.*.json")) == ["run.gw0.json", "run.gw1.json"]
    pids = {json.loads((d / "result.json").read_text())["pid"] for d in run_dir.glob("cases/*/r1")}
    assert len(pids) == 4
    # One summary, written by the controller from every worker's result file.
    summary = (run_dir / "summary.md").read_text()
    assert all(case in summary for case in outcomes(run_dir))
    text = parallel.stdout.str()
    assert "trainperf: cpu (4 cases)" in text and str(run_dir) in text


def test_baselines_written_by_workers_are_listed_by_the_controller(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_catalogue=CATALOGUE)
    result, (run_dir,) = run(
        pytester, "reports", "-n", "2", "--perf-update-baselines", "--perf-baseline-repeats", "1"
    )
    result.assert_outcomes(passed=4)
    # Every case's baseline, except where the host CPU watch found the run crowded by another job:
    # a contaminated run is never a baseline (crowded.py).
    crowded = {case for case in outcomes(run_dir) if crowding(result_of(run_dir, case)) is not None}
    written = {path.stem for path in (pytester.path / "baselines" / "cpu").glob("*.json")}
    assert len(outcomes(run_dir)) == 4 and written == set(outcomes(run_dir)) - crowded
    assert result.stdout.str().count("baseline written to") == len(written)
