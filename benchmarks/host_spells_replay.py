"""Judge every run of one session against every run of another, one run a side, with host time over
the steps at full host speed (``judge.host_spells``) and over the whole run (the host index before the
case as the trigger), to see what the step selection does to A/A pairs and to a planted change.

    python benchmarks/host_spells_replay.py REFERENCE_RUN_FOLDER RESULT_RUN_FOLDER [--case ID]

Both folders' runs must have timed the host at each step's edge (``host_speed``). Pairs within the
reference folder are the A/A control; reference against result the change.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from itertools import combinations
from pathlib import Path

from trainperf.ground.folder import RunFolder
from trainperf.judge.host_spells import run_segments
from trainperf.judge.metrics import HOST_SPEED, STEP_TIME, with_tolerances
from trainperf.judge.verdict import judge_case
from trainperf.result import CaseResult, MetricValue

METRICS = with_tolerances({})


def _run_value(value: MetricValue, run: int, runs: int) -> MetricValue:
    per_run = value.per_run if value.per_run and len(value.per_run) == runs else None
    centre = per_run[run] if per_run else value.value
    if value.keys and value.samples and len(value.keys) == len(value.samples):
        segments = run_segments(value.keys)
        if len(segments) == runs:
            start, end = segments[run]
            return MetricValue(centre, value.unit, value.samples[start:end], [centre], value.keys[start:end])
    return MetricValue(centre, value.unit, None, [centre], None)


def split_runs(result: CaseResult) -> list[CaseResult]:
    """One result a run, each with its own samples and values."""
    runs = len(result.runs)
    return [
        dataclasses.replace(
            result,
            metrics={name: _run_value(value, r, runs) for name, value in result.metrics.items()},
            runs=[result.runs[r]],
        )
        for r in range(runs)
    ]


def _without_probes(result: CaseResult) -> CaseResult:
    """The result without its host speed: no step selection, the host index before the case the trigger."""
    return dataclasses.replace(result, metrics={n: v for n, v in result.metrics.items() if n != HOST_SPEED})


def _verdict(current: CaseResult, reference: CaseResult, whole_run: bool = False) -> str:
    if whole_run:
        current, reference = _without_probes(current), _without_probes(reference)
    verdict = judge_case(current, reference, METRICS, expectation="ok", timing=(True, ""), strict=False)
    step = next((m for m in verdict.metrics if m.metric == STEP_TIME), None)
    if step is None or step.ratio is None:
        return verdict.verdict.value
    gate = "" if step.gated else " shown"
    return f"{verdict.verdict.value:9s} step {(step.ratio - 1) * 100:+5.1f}%{gate}"


def _case(folder: Path, case_id: str | None) -> CaseResult:
    results = RunFolder.open(folder).results()
    found = [r for r in results if case_id is None or r.case_id == case_id]
    if not found:
        raise SystemExit(f"host_spells_replay: no case {case_id} in {folder}")
    return found[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reference", type=Path)
    parser.add_argument("result", type=Path)
    parser.add_argument("--case", default=None)
    args = parser.parse_args()
    reference_runs = split_runs(_case(args.reference, args.case))
    result_runs = split_runs(_case(args.result, args.case))
    pairs = [("A/A", a, b, ia, ib) for (ia, a), (ib, b) in combinations(enumerate(reference_runs, 1), 2)]
    pairs += [
        ("B/A", a, b, ia, ib) for ia, a in enumerate(reference_runs, 1) for ib, b in enumerate(result_runs, 1)
    ]
    print(f"{'pair':13s} {'steps at full host speed':28s} whole run, host index")
    for kind, reference, current, ia, ib in pairs:
        cells = [_verdict(current, reference, whole_run) for whole_run in (False, True)]
        print(f"{kind + f' r{ib} vs r{ia}':13s} {cells[0]:28s} {cells[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
