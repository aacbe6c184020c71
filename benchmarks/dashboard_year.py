"""The trend site of one year of nightly history: build time and size against their budgets.

    python benchmarks/dashboard_year.py [--nights 365 --cases 70] [--work /tmp/trainperf-year] [--repeats 3]

Budgets: the site of 365 nights x 70 cases built in <= 3 s, <= 10 MB in all. The run folders and
the SQLite store come from ``synthetic_history`` (written once, kept under --work, shared with
history_year.py). Each build starts from an empty folder in a warm process; the best of the
repeats is the figure, the load average is printed beside it (builds on a shared host vary).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from synthetic_history import write_nights

from trainperf.recording.ingest import ingest
from trainperf.report.dashboard import build_site
from trainperf.store.interface import open_history_store

BUILD_BUDGET_S = 3.0
SITE_BUDGET_MB = 10.0


def folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--cases", type=int, default=70)
    parser.add_argument("--work", type=Path, default=Path("/tmp/trainperf-year"))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    write_nights(args.work / "runs", args.nights, args.cases)
    store = open_history_store(f"sqlite:///{args.work / 'dashboard-year.sqlite'}")
    ingest(store, [args.work / "runs"], say=lambda _: None)  # adds nothing when already stored
    from trainperf.judge.changepoints import change_points

    change_points([1.0] * 10)  # the libraries are imported before the clock starts, as in a warm process
    site, seconds = args.work / "site", []
    for _ in range(args.repeats):
        shutil.rmtree(site, ignore_errors=True)
        start = time.perf_counter()
        pages = build_site(store, site)
        seconds.append(time.perf_counter() - start)
    store.close()
    total = folder_bytes(site) / 1e6
    largest = max((path.stat().st_size for path in (site / "cases").iterdir()), default=0) / 1e3
    print(
        f"{args.nights} nights x {args.cases} cases; {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, Python {platform.python_version()}"
    )
    best = min(seconds)
    print(
        f"build {best:.2f} s (best of {', '.join(f'{s:.2f}' for s in seconds)})   "
        f"budget <= {BUILD_BUDGET_S:g} s   {'ok' if best <= BUILD_BUDGET_S else 'MISSED'}"
    )
    print(
        f"site {total:.2f} MB ({pages} case pages, largest {largest:.0f} kB, index "
        f"{(site / 'index.html').stat().st_size / 1e3:.0f} kB)   budget <= {SITE_BUDGET_MB:g} MB   "
        f"{'ok' if total <= SITE_BUDGET_MB else 'MISSED'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
