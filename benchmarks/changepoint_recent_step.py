"""How many runs after a step does `trainperf history` need to find it?

Series of 30 runs at one level then K runs 10% (or 5%) slower, with the per-run noise measured on
the runners (CV 0.3% GPU-bound, 2% and 5% host-bound) and the harness's occasional host stall
(2% of runs 5-20% slower): found when a change point lies within 1 run of the step. A/A series of
33 runs count the false alarms. ``--approx`` takes the rank test's normal approximation
everywhere (the detector before the exact test), for comparison.

    python benchmarks/changepoint_recent_step.py [--approx] [--series 50]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import time

from trainperf.judge import changepoints

BEFORE = 30
STALL_RATE = 0.02


def series(rng: random.Random, cv: float, step: float, after: int) -> list[float]:
    values = [(1 + (step if i >= BEFORE else 0.0)) * (1 + rng.gauss(0, cv)) for i in range(BEFORE + after)]
    return [v * (1 + rng.uniform(0.05, 0.20)) if rng.random() < STALL_RATE else v for v in values]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--approx", action="store_true", help="normal approximation only (the old test)")
    parser.add_argument("--series", type=int, default=50)
    args = parser.parse_args()
    if args.approx:
        changepoints.EXACT_UP_TO = 0
    rng = random.Random(20261125)
    rows = []
    started = time.perf_counter()
    for cv in (0.003, 0.02, 0.05):
        for step in (0.10, 0.05):
            for after in (2, 3, 4, 5, 8):
                found = 0
                for _ in range(args.series):
                    cps = changepoints.change_points(series(rng, cv, step, after))
                    found += any(abs(cp.index - BEFORE) <= 1 for cp in cps)
                rows.append({"cv": cv, "step": step, "runs_after": after, "found": found, "of": args.series})
        false = sum(len(changepoints.change_points(series(rng, cv, 0.0, 3))) for _ in range(2 * args.series))
        rows.append({"cv": cv, "step": 0.0, "false_change_points": false, "of": 2 * args.series})
    print(
        json.dumps(
            {
                "test": "normal approximation"
                if args.approx
                else f"exact up to {changepoints.EXACT_UP_TO} runs a side",
                "python": platform.python_version(),
                "seconds": round(time.perf_counter() - started, 1),
                "rows": rows,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
