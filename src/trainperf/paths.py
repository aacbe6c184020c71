"""Where the suite's shipped files live.

The fixtures live beside the package in a source checkout (``<repo>/fixtures``); the
``TRAINPERF_FIXTURES`` environment variable points elsewhere (an installed wheel, a
runner's own catalogue).
"""

from __future__ import annotations

import os
from pathlib import Path

from trainperf.redact import redact_text

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES_DIR = Path(os.environ.get("TRAINPERF_FIXTURES", REPO_ROOT / "fixtures"))
PUBLISHED_DIR = "published"
"""The folder of ``baselines/`` holding published reference points (not a GPU class's baselines)."""

# The names inside a run folder (``reports/<stamp>-<class>``). ``ground.folder.RunFolder`` builds every
# path from them; they live here, in the core layer, for the layers below it (a trace plan, a store
# ingest) that must name a folder without importing ``ground``.
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
FINISHED_RUNS_FILE = "finished-runs.json"
"""``cases/<case>/finished-runs.json``: a case's runs that ended well while the case had not; a cut
case keeps them and ``--perf-resume`` goes on from them."""
INTERRUPTED_FILE = "interrupted.json"
"""The case a Ctrl-C or time limit cut."""
SUMMARY_FILE = "summary.md"
PAGE_FILE = "index.html"
"""A folder's HTML page (a run's plots, the dashboard's front page): the name a web server serves."""
BENCHMARK_FILE = "benchmark.json"
"""The run's cases in pytest-benchmark's format."""
REPORT_FILES = (SUMMARY_FILE, PAGE_FILE, BENCHMARK_FILE)

SQLITE_URL = "sqlite:///"
"""A password in a URL (``postgresql://user:secret@host/db``): never recorded."""


def portable(path: str | Path, run_dir: Path | None = None) -> str:
    """How a result records a path, so that it names nothing of the machine it ran on: relative to
    the run folder when inside it, else relative to the working folder the session ran from (the
    project checkout), else as given (an interpreter of the runner's own image, ``/opt/...``).
    Readers resolve a relative path against the run folder or the project, and still take the
    absolute paths older results recorded."""
    text = str(path)
    if not os.path.isabs(text):
        return text
    for base in (run_dir, Path.cwd()):
        if base is not None and _inside(text, str(base)):
            return os.path.relpath(text, base)
    return text


def _inside(path: str, base: str) -> bool:
    base = os.path.abspath(base)
    return os.path.abspath(path) == base or os.path.abspath(path).startswith(base.rstrip(os.sep) + os.sep)


def portable_argv(argv: list[str]) -> list[str]:
    """A command line as a result records it: ``pytest`` for the program however it was started
    (``python -m pytest`` makes ``argv[0]`` the absolute path of pytest's ``__main__.py``), and
    every argument that is a path inside the project (or an option's ``=PATH``) relative to it;
    a store URL's password left out."""
    if not argv:
        return []
    program = Path(argv[0])
    name = program.parent.name if program.name == "__main__.py" else program.name
    return [name, *(_portable_arg(arg) for arg in argv[1:])]


def _portable_arg(arg: str) -> str:
    option, equals, value = arg.partition("=")
    if equals and option.startswith("-") and (os.path.isabs(value) or value.startswith(SQLITE_URL)):
        return f"{option}={_portable_arg(value)}"
    if arg.startswith(SQLITE_URL):  # a store's URL names a file
        return SQLITE_URL + portable(arg.removeprefix(SQLITE_URL))
    return redact_text(portable(arg))
