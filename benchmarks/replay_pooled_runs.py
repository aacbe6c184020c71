"""Replay what ``--perf-repeats N`` would have judged on a runner's history: N consecutive stored
sessions of one kind (unchanged, or planted) pooled into one result, as a session of N runs pools its
runs (the same batches, run after run), and judged by today's rules against the accepted results
before the first of them (as ``--perf-baseline auto`` judges). Reads a copy of the store, writes nothing.

    python benchmarks/replay_pooled_runs.py --store sqlite:///PATH --runner RUNNER --gpu-class CLASS \
        --pool 3 [--runs 10] [--case CASE]

A session's kind is read from its run folder's parent (``aa-03``, ``planted-02``: the folders of
``benchmarks/history_gate_gpu.sh``); every window of N consecutive sessions of one kind is one line.
Windows overlap, so their verdicts are not independent: a line says what one N-run session would
have read there, not a rate.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from replay_history_gate import REPO, _as_result, case_ids, replay_inputs, replay_parser

from trainperf.judge.learned_tolerance import learned_tolerances
from trainperf.judge.metrics import Metric
from trainperf.judge.verdict import judge_case
from trainperf.store.baselines import BaselineStore
from trainperf.store.db import Store
from trainperf.store.history_baseline import pooled_baseline
from trainperf.store.reads import stored_cases
from trainperf.store.records import StoredCase
from trainperf.studies.ab import pool_case


def kind_of(result: StoredCase) -> str:
    """The session's kind from its folder's parent: ``planted-02`` -> planted, ``aa-03`` -> aa."""
    return Path(result.run_dir or "").parent.name.rsplit("-", 1)[0]


def windows(stored: list[StoredCase], pool: int, first: int) -> list[list[int]]:
    """Indices of every ``pool`` consecutive sessions of one kind from ``first`` on (the sessions
    in between of the other kind are skipped, as a runner's history holds them)."""
    found = []
    for kind in sorted({kind_of(result) for result in stored[first:]}):
        mine = [index for index in range(first, len(stored)) if kind_of(stored[index]) == kind]
        found += [mine[start : start + pool] for start in range(len(mine) - pool + 1)]
    return sorted(found)


def replay_pooled(
    store: Store, case_id: str, runner: str, metrics: dict[str, Metric], args: argparse.Namespace
) -> list[str]:
    stored = [r for r in stored_cases(store, case_id, runner=runner) if r.outcome == "ok"]
    class_file = BaselineStore(REPO / "baselines").load(args.gpu_class, case_id)
    first = next((i for i in range(len(stored)) if sum(r.accepted for r in stored[:i]) >= args.runs), None)
    lines = []
    for window in windows(stored, args.pool, first) if first is not None else []:
        prior = [case for case in stored[: window[0]] if case.accepted][-args.runs :]
        baseline = pooled_baseline(case_id, args.gpu_class, prior)
        narrowed, _ = learned_tolerances(metrics, baseline)
        current = pool_case([_as_result(stored[index], args.gpu_class) for index in window])
        verdict = judge_case(
            current, baseline, narrowed, expectation="ok", timing=(True, ""), strict=False,
            device_reference=class_file,
        )  # fmt: skip
        step = next((m for m in verdict.metrics if m.metric == "step_time_s"), None)
        moved = f"step {(step.ratio - 1) * 100:+.1f}%" if step and step.ratio else "-"
        names = "+".join(Path(stored[index].run_dir or "").parent.name for index in window)
        lines.append(f"{kind_of(stored[window[0]])}\t{names}\t{verdict.verdict.value}\t{moved}\t{verdict.parts}")
    return lines


def main(argv: list[str]) -> int:
    parser = replay_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--pool", type=int, default=3, help="sessions pooled into one result (--perf-repeats)")
    args = parser.parse_args(argv)
    metrics, store = replay_inputs(args)
    counts: Counter[str] = Counter()
    for case_id in args.case or case_ids(store, args.runner):
        for line in replay_pooled(store, case_id, args.runner, metrics, args):
            print(f"{case_id}\t{line}")
            kind, _, verdict = line.split("\t")[:3]
            counts[f"{kind} -> {verdict}"] += 1
    print("pooled: " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "nothing"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
