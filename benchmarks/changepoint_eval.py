"""Which change-point detector finds a step in a nightly series, and how often does it cry wolf?

Synthetic series at two noise levels, 60 runs each: 0.3% run-to-run CV of the step time, as measured
on the GPU-bound maxlen case (0.36% over 10 children, docs/measurements/2026-11-22-h100-maxlen), and
2-8%, a range assumed for host-bound short cases (on cloud H100s their spread was larger still:
QLoRA short read 0.75-1.28 s/step across runs, kernel-spread.txt in the raw.tar.xz of
docs/measurements/2026-11-27-h100-kernel-time/, which is why their kernel time is judged instead):
  - 200 series per noise level and step size (2%, 3%, 5%) with one step planted at a random run
    in [15, 45]: detected when a change point lies within 2 runs of the planted one;
  - 100 A/A series per noise level: every change point is a false alarm.
A run-level value carries the harness's occasional host stall: 2% of runs are 5-20% slower.

The libraries pin incompatible numpy versions (signal-processing-algorithms < 2, apache-otava
== 2.2.0), so each runs in an interpreter of its own: the series go to it as JSON.

    python benchmarks/changepoint_eval.py --otava-python /tmp/eval-otava/bin/python \\
        --spa-python /tmp/eval-spa/bin/python --output docs/measurements/DATE-cpu-changepoints
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RUNS = 60
STEP_SERIES = 200
AA_SERIES = 100
NOISE_CVS = (0.003, 0.02, 0.05, 0.08)
STEPS = (0.02, 0.03, 0.05)
TOLERANCE_RUNS = 2
STALL_RATE = 0.02
DETECTORS = ("otava", "spa-edivisive", "ruptures-pelt", "trainperf")


def make_series(seed: int = 20) -> list[dict[str, Any]]:
    import numpy as np

    rng = np.random.default_rng(seed)
    series = []
    for cv in NOISE_CVS:
        for step in (0.0, *STEPS):
            for index in range(AA_SERIES if step == 0 else STEP_SERIES):
                where = int(rng.integers(15, 46)) if step else None
                level = np.ones(RUNS)
                if where is not None:
                    level[where:] *= 1 + step
                values = level * (1 + rng.normal(0, cv, RUNS))
                stalls = rng.random(RUNS) < STALL_RATE
                values[stalls] *= 1 + rng.uniform(0.05, 0.20, int(stalls.sum()))
                series.append(
                    {"cv": cv, "step": step, "where": where, "index": index, "values": values.tolist()}
                )
    return series


def detect(name: str, values: list[float]) -> list[int]:
    """Change point indices (first run of the new level) by one library with its documented defaults."""
    if name == "otava":
        from otava.analysis import compute_change_points

        found, _weak = compute_change_points(values, window_len=30, max_pvalue=0.001)
        return [int(cp.index) for cp in found]
    if name == "spa-edivisive":
        import numpy as np
        from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive

        return sorted(e_divisive(np.array(values), pvalue=0.01, permutations=100))
    if name == "ruptures-pelt":
        import numpy as np
        import ruptures

        signal = np.array(values)
        scale = _robust_sigma(signal)
        breaks = (
            ruptures.Pelt(model="l2", min_size=3, jump=1)
            .fit(signal / scale)
            .predict(pen=3 * np.log(len(signal)))
        )
        return breaks[:-1]
    if name == "trainperf":
        from trainperf.judge.changepoints import change_points

        return [cp.index for cp in change_points(values)]
    raise ValueError(name)


def _robust_sigma(signal: Any) -> float:
    import numpy as np

    diffs = np.diff(signal)
    sigma = 1.4826 * float(np.median(np.abs(diffs - np.median(diffs)))) / np.sqrt(2)
    return sigma if sigma > 0 else 1.0


def worker(name: str, series_path: Path, out_path: Path) -> None:
    series = json.loads(series_path.read_text())
    start = time.perf_counter()
    found = [detect(name, s["values"]) for s in series]
    out_path.write_text(json.dumps({"found": found, "seconds": time.perf_counter() - start}))


def score(
    series: list[dict[str, Any]], found: list[list[int]]
) -> dict[tuple[float, float], dict[str, float]]:
    table: dict[tuple[float, float], dict[str, float]] = {}
    for item, points in zip(series, found):
        cell = table.setdefault((item["cv"], item["step"]), {"series": 0, "hits": 0, "false": 0})
        cell["series"] += 1
        if item["step"] == 0:
            cell["false"] += len(points)
        elif any(abs(p - item["where"]) <= TOLERANCE_RUNS for p in points):
            cell["hits"] += 1
    return table


def render(results: dict[str, dict[str, Any]], series: list[dict[str, Any]]) -> str:
    lines = [
        (
            f"change points on synthetic nightly series: {RUNS} runs, {STEP_SERIES} series per step, "
            f"{AA_SERIES} A/A series per noise level, {STALL_RATE:.0%} of runs with a 5-20% host stall; "
            f"a hit is within {TOLERANCE_RUNS} runs"
        ),
        f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}",
        "",
        (
            f"{'detector':15s} {'noise CV':>8s} "
            + " ".join(f"{'step ' + format(s, '.0%'):>9s}" for s in STEPS)
            + f" {'false/100 A/A':>14s} {'seconds':>8s}"
        ),
    ]
    for name, result in results.items():
        if "error" in result:
            lines.append(f"{name:15s} unavailable: {result['error']}")
            continue
        table = score(series, result["found"])
        for cv in NOISE_CVS:
            hits = " ".join(f"{table[(cv, s)]['hits'] / table[(cv, s)]['series']:>9.1%}" for s in STEPS)
            aa = table[(cv, 0.0)]
            false_rate = 100 * aa["false"] / aa["series"]
            lines.append(f"{name:15s} {cv:>8.1%} {hits} {false_rate:>14.1f} {result['seconds']:>8.1f}")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", nargs=3, metavar=("DETECTOR", "SERIES", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--otava-python", default=sys.executable)
    parser.add_argument("--spa-python", default=sys.executable)
    parser.add_argument(
        "--only", nargs="*", default=list(DETECTORS), choices=DETECTORS, help="detectors to run"
    )
    parser.add_argument("--output", type=Path, help="folder for table.txt and results.json")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker[0], Path(args.worker[1]), Path(args.worker[2]))
        return 0
    series = make_series()
    pythons = {"otava": args.otava_python, "spa-edivisive": args.spa_python}
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        series_path = Path(tmp) / "series.json"
        series_path.write_text(json.dumps(series))
        for name in args.only:
            out = Path(tmp) / f"{name}.json"
            done = subprocess.run(
                [pythons.get(name, sys.executable), __file__, "--worker", name, str(series_path), str(out)],
                capture_output=True,
                text=True,
                check=False,
            )
            results[name] = (
                json.loads(out.read_text())
                if done.returncode == 0
                else {"error": done.stderr.strip().splitlines()[-1:]}
            )
    table = render(results, series)
    print(table, end="")
    if args.output:
        args.output.mkdir(parents=True, exist_ok=True)
        (args.output / "table.txt").write_text(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
