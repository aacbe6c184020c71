"""Replay the history-judged gate over a results history: each stored result of a runner judged
again, by today's rules, against the accepted results before it (as ``--perf-baseline auto`` would
once the runner holds N of them). It reads the store (a SQLite file from a copy) and writes nothing.

    python benchmarks/replay_history_gate.py --store sqlite:///PATH --runner RUNNER --gpu-class CLASS \
        [--runs 10] [--case CASE ...]

Prints one line per replayed result (its stored verdict, the replayed one, the tolerances learned)
and a count of replayed verdicts per kind: on a history of clean runs every ``regressed`` is a false
alarm; a result stored with a planted slowdown is marked ``planted`` and should read ``regressed``.
The single-run verdict is what is replayed: a live breach would then be confirmed by fresh runs.
Cliff searches are left out (they are judged against their baseline file).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

import sqlalchemy as sa

from trainperf.case_record import CaseRecord
from trainperf.config_record import EffectiveConfig
from trainperf.fingerprint_record import Fingerprint
from trainperf.judge.learned_tolerance import learned_tolerances
from trainperf.judge.metrics import Metric, tolerances_from_pyproject, with_tolerances
from trainperf.judge.verdict import judge_case
from trainperf.measure.hardware import load_classes
from trainperf.result import CaseResult
from trainperf.store.baselines import BaselineStore
from trainperf.store.db import Store, open_store
from trainperf.store.history_baseline import pooled_baseline
from trainperf.store.reads import stored_cases
from trainperf.store.records import StoredCase
from trainperf.store.schema import cases, runs

REPO = Path(__file__).resolve().parents[1]


def working_copy(url: str) -> str:
    """A SQLite store is read from a copy: opening a store upgrades an older schema in place, and
    the stores replayed here are often committed measurements."""
    if not url.startswith("sqlite:///"):
        return url
    copy = Path(tempfile.mkdtemp()) / "history.sqlite"
    shutil.copyfile(url.removeprefix("sqlite:///"), copy)
    return f"sqlite:///{copy}"


def case_ids(store: Store, runner: str) -> list[str]:
    query = (
        sa.select(cases.c.case_id)
        .join(runs, cases.c.run_id == runs.c.id)
        .where(runs.c.runner == runner, cases.c.variant == "")
        .distinct()
    )
    with store.reading() as conn:
        return sorted(row[0] for row in conn.execute(query))


def planted(store: Store, row: int) -> float:
    with store.reading() as conn:
        return float(conn.execute(sa.select(cases.c.planted).where(cases.c.id == row)).scalar() or 0.0)


def is_cliff(result: StoredCase) -> bool:
    """A cliff search is judged against its baseline file, never the history: not replayed."""
    return any(name.startswith("cliff_") for name in result.metrics)


def replay_case(
    store: Store, case_id: str, runner: str, metrics: dict[str, Metric], n: int, *, min_runs: int, gpu_class: str
) -> list[str]:
    """One line per stored result of the case with at least ``min_runs`` accepted results before it,
    judged as the live gate judges it: against its last ``n`` accepted results pooled, timing
    tolerances narrowed to their noise, kernel time against the class's baseline file."""
    lines = []
    stored = stored_cases(store, case_id, runner=runner)
    class_file = BaselineStore(REPO / "baselines").load(gpu_class, case_id)
    for index, result in enumerate(stored):
        prior = [case for case in stored[:index] if case.accepted][-n:]
        if len(prior) < max(1, min_runs) or result.outcome != "ok" or is_cliff(result):
            continue
        baseline = pooled_baseline(case_id, gpu_class, prior)
        narrowed, notes = learned_tolerances(metrics, baseline)
        verdict = judge_case(
            _as_result(result, gpu_class),
            baseline,
            narrowed,
            expectation="ok",
            timing=(True, ""),
            strict=False,
            device_reference=class_file,
        )
        plant = planted(store, result.row)
        # A --perf-plant drill is not stored as such (it is never accepted): its run folder says it.
        folder = Path(result.run_dir or "").parent.name
        label = f"planted {plant:+.0%}" if plant else ("planted" if "plant" in folder else "clean")
        step = next((m for m in verdict.metrics if m.metric == "step_time_s"), None)
        moved = f"step {(step.ratio - 1) * 100:+.1f}%" if step and step.ratio else "-"
        lines.append(
            f"{case_id}\t{folder or result.started[:19]}\t{label}\tstored {result.verdict}\t"
            f"replayed {verdict.verdict.value}\t{len(prior)} runs\t{moved}\t{verdict.reason[:90]}"
        )
    return lines


def _as_result(stored: StoredCase, gpu_class: str) -> CaseResult:
    return CaseResult(
        case_id=stored.case_id,
        case=CaseRecord(),
        gpu_class=gpu_class,
        outcome=stored.outcome,
        metrics=stored.metrics,
        effective_config=EffectiveConfig.from_dict(stored.effective_config),
        fingerprint=Fingerprint.from_dict(stored.fingerprint),
    )


def replay_parser(description: str) -> argparse.ArgumentParser:
    """The options every replay of a runner's history takes: its store, runner, class and cases."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--store", required=True, help="the history's URL (sqlite:///PATH or postgresql://...)"
    )
    parser.add_argument("--runner", required=True, help="the runner label whose results are replayed")
    parser.add_argument("--gpu-class", required=True, help="the class whose timing tolerances apply")
    parser.add_argument("--runs", type=int, default=10, help="accepted results pooled per baseline")
    parser.add_argument("--case", action="append", default=[], help="replay only these cases")
    return parser


def replay_inputs(args: argparse.Namespace) -> tuple[dict[str, Metric], Store]:
    """The class's timing metrics and a working copy of the store."""
    gpu_class = load_classes()[args.gpu_class]
    metrics = with_tolerances(tolerances_from_pyproject(REPO), gpu_class.timing_tolerance_scale)
    return metrics, open_store(working_copy(args.store), create=False)


def main(argv: list[str]) -> int:
    parser = replay_parser(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--min-runs", type=int, default=None, help="replay results with this many accepted before (default --runs)"
    )
    args = parser.parse_args(argv)
    metrics, store = replay_inputs(args)
    counts: Counter[str] = Counter()
    for case_id in args.case or case_ids(store, args.runner):
        lines = replay_case(
            store,
            case_id,
            args.runner,
            metrics,
            args.runs,
            min_runs=args.min_runs or args.runs,
            gpu_class=args.gpu_class,
        )
        for line in lines:
            print(line)
            fields = line.split("\t")
            counts[f"{fields[2].split()[0]} -> {fields[4].split()[1]}"] += 1
    print("replayed: " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "nothing"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
