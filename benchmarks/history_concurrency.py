"""8 processes ingesting 50 runs each at once, into SQLite and into PostgreSQL: none lost or doubled.

    python benchmarks/history_concurrency.py [--writers 8 --runs 50 --cases 10] \\
        [--work /tmp/trainperf-writers]

SQLite serialises writers (BEGIN IMMEDIATE, a lock timeout); a writer that cannot get the lock in
time says so in one line and leaves its run folder for a later ingest, so the check counts what
was stored plus what was left, and then ingests the left-overs.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from synthetic_history import write_nights

from trainperf.recording.ingest import ingest
from trainperf.store.interface import open_history_store


def writer(url: str, folders: list[str]) -> tuple[int, list[str]]:
    store = open_history_store(url, lock_timeout_s=30)
    try:
        report = ingest(store, [Path(f) for f in folders], say=lambda line: None)
        return report.cases_added, [str(p) for p in report.deferred]
    finally:
        store.close()


def measure(url: str, label: str, groups: list[list[str]], cases: int) -> bool:
    start = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(len(groups)) as pool:
        done = pool.starmap(writer, [(url, group) for group in groups])
    seconds = time.perf_counter() - start
    left = [folder for _added, deferred in done for folder in deferred]
    store = open_history_store(url)
    stored = store.list_runs()
    expected = sum(len(g) for g in groups)
    keys = [run["run_key"] for run in stored]
    ok = len(stored) + len(left) == expected and len(set(keys)) == len(keys)
    if left:
        ingest(store, [Path(f) for f in left], say=lambda _: None)
    final = len(store.list_runs())
    store.close()
    print(
        f"{label:11s} {len(groups)} writers x {len(groups[0])} runs ({cases} cases each): {seconds:6.1f} s; "
        f"{len(stored)} runs stored, {len(left)} left for a later ingest, {final} after it; "
        f"{'none lost or doubled' if ok and final == expected else 'MISMATCH'}",
        flush=True,
    )
    return ok and final == expected


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--cases", type=int, default=10)
    parser.add_argument("--work", type=Path, default=Path("/tmp/trainperf-writers"))
    args = parser.parse_args()
    groups = [
        [
            str(p)
            for p in write_nights(
                args.work / "runs", args.runs, args.cases, first_night=w * args.runs, seed=w
            )
        ]
        for w in range(args.writers)
    ]
    sqlite = args.work / "history.sqlite"
    sqlite.unlink(missing_ok=True)
    ok = measure(f"sqlite:///{sqlite}", "SQLite", groups, args.cases)
    from pg_server import new_database, running_postgres

    with running_postgres() as server:
        ok &= measure(new_database(server), "PostgreSQL", groups, args.cases)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
