"""``trainperf report``: a run folder's reports rebuilt from its result files."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from trainperf.ground.folder import RunFolder
from trainperf.report.headline import headline
from trainperf.report.summary import details
from trainperf.report.table import render_text
from trainperf.report.terminal import run_folder_lines, run_folder_night, terminal_width


def cmd_report(args: argparse.Namespace) -> int:
    run_dir = Path(args.run)
    results = RunFolder.open(run_dir).results()
    # The lines under the table as the session (or the merge) wrote them: skips and why, failures,
    # each case's notes.
    under = details(results, {}, {})
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=1))
        return 0
    # The night's cost the session wrote under its headline and the lines under its table (the case a
    # stop cut) come back too: a rebuilt page of a cut night must not read as a whole one.
    lines, unjudged = run_folder_lines(run_dir, results)
    night = run_folder_night(run_dir, results)
    print("\n".join([headline(results, unjudged), *night]))
    print(render_text(results, terminal_width()))
    for line in [*under, *lines]:
        print(line)
    from trainperf.report.build import write_reports

    title = f"trainperf {results[0].gpu_class}: {run_dir.name}" if results else f"trainperf: {run_dir.name}"
    written = write_reports(run_dir, results, title, [*under, *lines], unjudged, night)
    print(f"wrote {', '.join(str(path) for path in written)}")
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    report = sub.add_parser(
        "report",
        help="rebuild a run folder's summary.md, index.html and benchmark.json from its result files",
    )
    report.add_argument("run", help="reports/<run>")
    report.add_argument("--json", action="store_true", help="print the results as JSON")
    report.set_defaults(func=cmd_report)
