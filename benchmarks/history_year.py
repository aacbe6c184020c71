"""One year of nightly history: ingest into SQLite and PostgreSQL, the dashboard, one case's history.

    python benchmarks/history_year.py [--nights 365 --cases 70] [--work /tmp/trainperf-year] [--postgres]

Targets (365 nights x 70 cases x 13 metrics): ingest <= 30 s into SQLite, <= 60 s into PostgreSQL;
dashboard <= 15 s; ``trainperf history`` of one case <= 1 s. ``--postgres`` starts a server of
its own (Debian's postgresql package, as the tests do).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from synthetic_history import case_ids, write_nights

from trainperf.recording.ingest import ingest
from trainperf.report.dashboard import build_site
from trainperf.store.interface import open_history_store


def timed(label: str, action, target_s: float) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    action()
    seconds = time.perf_counter() - start
    print(
        f"{label:55s} {seconds:7.2f} s   target <= {target_s:g} s   "
        f"{'ok' if seconds <= target_s else 'MISSED'}",
        flush=True,
    )
    return seconds


def measure(
    url: str, label: str, folders: list[Path], work: Path, ingest_target: float, cases: list[str]
) -> None:
    store = open_history_store(url)
    timed(
        f"ingest {len(folders)} runs into {label}",
        lambda: ingest(store, [work / "runs"], say=lambda _: None),
        ingest_target,
    )
    timed(
        f"ingest again into {label} (adds nothing)",
        lambda: ingest(store, [work / "runs"], say=lambda _: None),
        ingest_target,
    )
    timed(f"dashboard from {label}", lambda: build_site(store, work / f"site-{label}"), 15)
    from trainperf.judge.changepoints import change_points
    from trainperf.store.series import series_of

    change_points([1.0] * 10)  # the libraries are imported before the clock starts, as in a warm process
    timed(
        f"history of {cases[0][:20]}... ({label}, query + change points)",
        lambda: series_of(store.history_points(["step_time_s"], case_id=cases[0]), "step_time_s"),
        1,
    )
    store.close()
    command = [
        sys.executable,
        str(HERE.parent / "src" / "trainperf" / "cli" / "history.py"),
        cases[0],
        "--store",
        url,
    ]
    env = {**os.environ, "PYTHONPATH": str(HERE.parent / "src")}
    timed(
        f"trainperf history {cases[0][:20]}... ({label}, whole command)",
        lambda: subprocess.run(command, check=True, capture_output=True, env=env),
        1,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--cases", type=int, default=70)
    parser.add_argument("--work", type=Path, default=Path("/tmp/trainperf-year"))
    parser.add_argument(
        "--postgres", action="store_true", help="also measure a PostgreSQL server started here"
    )
    args = parser.parse_args()
    print(
        f"{args.nights} nights x {args.cases} cases x 12 metrics; "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}"
    )
    start = time.perf_counter()
    folders = write_nights(args.work / "runs", args.nights, args.cases)
    print(f"(run folders written or found in {time.perf_counter() - start:.0f} s: {args.work / 'runs'})")
    sqlite = args.work / "history.sqlite"
    sqlite.unlink(missing_ok=True)
    measure(f"sqlite:///{sqlite}", "SQLite", folders, args.work, 30, case_ids(args.cases))
    if args.postgres:
        from pg_server import new_database, running_postgres

        with running_postgres() as server:
            measure(new_database(server), "PostgreSQL", folders, args.work, 60, case_ids(args.cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
