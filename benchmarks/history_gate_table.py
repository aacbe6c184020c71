"""One line per run of ``benchmarks/history_gate_gpu.sh``: its verdict against the runner's history,
step time and its move, whether host time gated and over which steps, the host's speed and the GPU's
kernel time; then the count of verdicts per kind of run (A/A runs against a history: every
``regressed`` is a false alarm; planted runs: each should read ``regressed``).

    python benchmarks/history_gate_table.py reports/runs
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from trainperf.ground.folder import RunFolder
from trainperf.judge.metrics import HOST_SPEED, KERNEL_TIME, STEP_TIME
from trainperf.result import CaseResult
from trainperf.stored_verdict import StoredMetricVerdict

HISTORY_RUNS = re.compile(r"the last (\d+) accepted runs")
KEPT = re.compile(r"\((\d+) of (\d+) and (\d+) of (\d+) run-steps")


@dataclass(frozen=True)
class GateRow:
    label: str
    result: CaseResult

    @property
    def kind(self) -> str:
        if self.result.planted or self.result.planted_slowdown:
            return "planted"
        return "A/A" if self.history_runs else "file"

    @property
    def history_runs(self) -> int:
        found = HISTORY_RUNS.search(self.result.verdict.judged_against)
        return int(found.group(1)) if found else 0

    def metric(self, name: str) -> StoredMetricVerdict | None:
        return next((m for m in self.result.verdict.metrics if m.metric == name), None)

    def line(self) -> str:
        step, kernel = self.metric(STEP_TIME), self.metric(KERNEL_TIME)
        value = self.result.metrics.get(STEP_TIME)
        speed = self.result.metrics.get(HOST_SPEED)
        kept = KEPT.search(step.note) if step else None
        return (
            f"{self.label:<12} {self.result.case_id[-32:]:<32} {self.kind:<8} {self.history_runs:>4} {self.result.verdict.verdict:<10} "
            f"{value.value if value else float('nan'):>7.3f} {_move(step):>8} {_gated(step):>5} "
            f"{f'{kept.group(1)}/{kept.group(2)}' if kept else '-':>7} "
            f"{speed.value if speed else float('nan'):>6.2f} {_move(kernel):>8}  {_tolerance(step)}"
        )


def _move(verdict: StoredMetricVerdict | None) -> str:
    return f"{(verdict.ratio - 1) * 100:+.1f}%" if verdict and verdict.ratio else "-"


def _gated(verdict: StoredMetricVerdict | None) -> str:
    return "-" if verdict is None else ("yes" if verdict.gated else "shown")


def _tolerance(verdict: StoredMetricVerdict | None) -> str:
    if verdict is None:
        return ""
    floor = re.search(r"tolerance [\d.]+% -> [\d.]+%", verdict.note)
    return floor.group(0) if floor else ""


def rows(runs: Path) -> list[GateRow]:
    found = []
    for label in sorted(p for p in runs.iterdir() if p.is_dir()):
        for folder in sorted(p for p in label.iterdir() if p.is_dir()):
            found += [GateRow(label.name, result) for result in RunFolder.open(folder).results()]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path, help="the folder of one --perf-output folder per run")
    args = parser.parse_args()
    table = rows(args.runs)
    print(
        f"{'run':<12} {'case':<32} {'kind':<8} {'hist':>4} {'verdict':<10} {'step s':>7} {'step':>8} {'gate':>5} "
        f"{'full-sp':>7} {'ops/us':>6} {'kernel':>8}  floor"
    )
    for row in table:
        print(row.line())
    counts = Counter((row.result.case_id, row.kind, row.result.verdict.verdict) for row in table)
    print()
    for (case, kind, verdict), n in sorted(counts.items()):
        print(f"{case}: {kind} {verdict} {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
