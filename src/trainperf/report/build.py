"""Write a run folder's reports from its results: ``summary.md``, ``index.html``, ``benchmark.json``.

The pytest plugin calls this at the end of a session and ``trainperf report RUN`` calls it to
rebuild them from the result files alone.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from trainperf.ground.folder import RunFolder
from trainperf.report.export import benchmark_json
from trainperf.report.headline import headline
from trainperf.report.html import render_html, run_info
from trainperf.report.markdown import render_summary
from trainperf.result import CaseResult, Unjudged


def write_reports(
    run_dir: Path,
    results: Sequence[CaseResult],
    title: str,
    details: Sequence[str] = (),
    unjudged: Sequence[Unjudged] = (),
    night: Sequence[str] = (),
) -> list[Path]:
    """The reports, each led by the run's headline (its cases judged, cut, not run and skipped) and,
    for a night, ``night``: its GPU-minutes and wall time against its projection (``fleet.night_cost``),
    on the first screen rather than among the notes under the table."""
    folder = RunFolder(run_dir)
    summary, page, bench = folder.summary_path, folder.page_path, folder.benchmark_path
    line = headline(results, unjudged)
    summary.write_text(render_summary(results, title, details, line, unjudged, night))
    page.write_text(render_html(run_dir, results, title, details, line, unjudged, night))
    bench.write_text(json.dumps(benchmark_json(results, run_info(run_dir)), indent=1))
    return [summary, page, bench]
