"""Where the suite's shipped files live.

The fixtures live beside the package in a source checkout (``<repo>/fixtures``); the
``TRAINPERF_FIXTURES`` environment variable points elsewhere (an installed wheel, a
runner's own catalogue).
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES_DIR = Path(os.environ.get("TRAINPERF_FIXTURES", REPO_ROOT / "fixtures"))
PUBLISHED_DIR = "published"
"""The folder of ``baselines/`` holding published reference points (not a GPU class's baselines)."""

# The names inside a run folder (``reports/<stamp>-<class>``). ``run.folder.RunFolder`` builds every
# path from them; they live here, in the core layer, for the layers below it (a trace plan, a store
# ingest) that must name a folder without importing the run layer.
SESSION_FILE = "run.json"
"""The session record (argv, settings, fingerprint); an xdist worker writes ``run.<worker>.json``."""
SESSION_FILES_GLOB = "run*.json"
"""``run.json`` and every xdist worker's ``run.<worker>.json``."""
RESULTS_DIR = "results"
"""``results/<case>.json``: each finished case's result."""
RESULTS_INDEX_FILE = "results.jsonl"
"""One line per finished case, flushed as it ends."""
CASES_DIR = "cases"
"""``cases/<case>/r<n>/``: each fresh child's spec, steps, samples, logs and result."""
TRACES_DIR = "traces"
"""``traces/<case>/<worker>.pt.trace.json.gz``: the TensorBoard plugin's run folders."""
INTERRUPTED_FILE = "interrupted.json"
"""The case a Ctrl-C or time limit cut."""
SUMMARY_FILE = "summary.md"
PAGE_FILE = "index.html"
"""A folder's HTML page (a run's plots, the dashboard's front page): the name a web server serves."""
BENCHMARK_FILE = "benchmark.json"
"""The run's cases in pytest-benchmark's format."""
REPORT_FILES = (SUMMARY_FILE, PAGE_FILE, BENCHMARK_FILE)
