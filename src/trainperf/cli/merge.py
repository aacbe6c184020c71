"""``trainperf merge RUN_DIR... --output DIR``: one nightly's shards (``--perf-shard K/N``) as one run.

The merged folder has every shard's results and child folders, and the reports of one run:
summary.md, index.html, benchmark.json (pytest-benchmark) and junit.xml. The shards' runs are
loaded into the results history (idempotently) and the nightly is written there under one id.
Exit status 1 when a merged verdict fails, as pytest's would.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from trainperf.store.url import store_off

JUNIT_FILE = "junit.xml"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "merge",
        help="merge the run folders of one nightly's shards (--perf-shard K/N) into one run folder",
    )
    parser.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR")
    parser.add_argument("--output", type=Path, required=True, help="the merged run folder (new)")
    parser.add_argument(
        "--store",
        help="results history URL, or off (default: TRAINPERF_STORE, else the per-user history.sqlite)",
    )
    parser.add_argument(
        "--runner", help="the nightly's runner label in the history (default: the first shard's)"
    )
    parser.set_defaults(func=run)
    return parser


def run(args: argparse.Namespace) -> int:
    from trainperf.fleet.merge import copy_into, nightly_record, read_shards, unjudged_cases
    from trainperf.fleet.night_cost import night_lines
    from trainperf.report.junit import junit_xml
    from trainperf.report.summary import details, write_summary
    from trainperf.report.terminal import terminal_width

    shards = read_shards(list(args.run_dirs))
    unjudged = unjudged_cases(shards)
    record, nightly = nightly_record(shards, args.runner, unjudged)
    output = args.output.resolve()
    folder = copy_into(shards, output, record)
    results = folder.results_by_finish()
    lines = details(results, {}, {}) + [f"{case.case_id}: {case.why}" for case in unjudged]
    night = night_lines(shards[0].sessions, results)
    gpu_class = shards[0].gpu_class
    print(write_summary(output, gpu_class, results, lines, terminal_width(), unjudged, night))
    (output / JUNIT_FILE).write_text(junit_xml(results, f"trainperf.{gpu_class}", unjudged))
    for line in lines:
        print(line)
    stored = _store(
        args.store, shards, dataclasses.replace(nightly, run_dir=str(output), argv=list(sys.argv))
    )
    print(
        f"trainperf: merged {len(shards)} shard(s), {len(results)} case(s), into {output} "
        f"(summary.md, index.html, benchmark.json, {JUNIT_FILE}); nightly {nightly.run_key[:12]}{stored}"
    )
    return 1 if any(r.verdict.fails for r in results) else 0


def _store(url: str | None, shards: list[Any], nightly: Any) -> str:
    """The shards' runs and the nightly into the results history; what was done, for the last line."""
    if store_off(url):
        return ""
    from trainperf.errors import TrainperfError
    from trainperf.recording.ingest import ingest
    from trainperf.store.interface import open_history_store, resolve_url, shown

    resolved = resolve_url(url)
    try:
        store = open_history_store(resolved)
    except TrainperfError as exc:
        return f"; not recorded in the results history ({exc}): `trainperf ingest` the shards later"
    with store:
        report = ingest(store, [s.folder for s in shards], say=lambda _line: None)
        store.write_run(nightly)
    return f", recorded in {shown(resolved)} ({report.line()})"
