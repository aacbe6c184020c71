"""The dashboard's screenshots in docs/img/, made again with one command.

    python benchmarks/dashboard_screenshots.py [--out docs/img] [--work /tmp/trainperf-screens]
                                               [--year-work /tmp/trainperf-year]

Builds three sites with ``trainperf.report.dashboard.build_site`` and photographs pages of them
with headless Chromium (``chromium --headless --screenshot``), then turns each PNG into a palette
image (Pillow's fast octree, 24 colours, no dithering) so that docs/ stays small:

- ``dashboard.png``, ``dashboard-case.png``: the synthetic year of ``synthetic_history.py`` (365
  nights x 70 cases, a fifth of them 3% slower from night 200); its run folders and store are
  written once under --year-work and shared with ``dashboard_year.py``;
- ``dashboard-h100.png``, ``dashboard-h100-case.png``: the store the H100 history-gate
  measurement committed, copied first (opening a store switches it to WAL, which would change the
  committed file), its run folders unpacked from the measurement's raw.tar.xz;
- ``dashboard-h100-faults.png``: real H100 runs with faults in them, put into a store of their own
  through the suite's ingest (a folder of result files copied out of a run is a run): the
  diagnosis measurement's baseline and its planted attention, composite, host-side and memory
  faults, and the fault matrix's run beside a foreign process (contaminated).

Everything is written under --work except the PNGs; the committed files are only read.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MEASUREMENTS = ROOT / "docs" / "measurements"
GATE_REPORTS = "second-pass/reports"
"""The second pass's store and run folders, inside the measurement's archive."""
GATE_ARCHIVE = MEASUREMENTS / "2026-11-24-h100-history-gate" / "raw.tar.xz"
FAULT_ARCHIVES = {
    "diagnosis": MEASUREMENTS / "2026-11-24-h100-diagnosis" / "raw.tar.xz",
    "faults": MEASUREMENTS / "2026-11-24-h100-faults" / "raw.tar.xz",
}
FAULT_RUNS = {
    # result-file prefix -> the archive that holds it; each prefix was one pytest run
    "neighbour": "faults",
    "baseline": "diagnosis",
    "plant-attention": "diagnosis",
    "plant-composite": "diagnosis",
    "plant-memory": "diagnosis",
    "plant-host": "diagnosis",
}
SYNTHETIC_CASE = "sft_hf-synthetic_05-lora-short-b4"
"""Host-bound, 3% slower from night 200, with the transformers upgrade of night 120 on its plots."""
H100_CASE = "sft_hf-qwen3_8b-lora-maxlen-b4"
COLOURS = 24
sys.path[:0] = [str(HERE), str(ROOT / "tests")]

from chromium import CHROMIUM, FLAGS
from synthetic_history import write_nights

from trainperf.recording.ingest import ingest
from trainperf.report.dashboard import build_site, slug
from trainperf.store.db import open_store


@dataclass(frozen=True, slots=True)
class Shot:
    page: str
    """Relative to the site: index.html or cases/<case>.html."""
    png: str
    width: int
    height: int


def build(store_url: str, site: Path, runs_root: Path | None = None) -> Path:
    shutil.rmtree(site, ignore_errors=True)
    store = open_store(store_url)
    try:
        build_site(store, site, runs_root=runs_root)
    finally:
        store.close()
    return site


def synthetic_year(work: Path) -> Path:
    """The synthetic year's site (its run folders and store kept under ``work`` for next time)."""
    write_nights(work / "runs", 365, 70)
    url = f"sqlite:///{work / 'dashboard-year.sqlite'}"
    store = open_store(url)
    try:
        ingest(store, [work / "runs"], say=lambda _: None)  # adds nothing when already stored
    finally:
        store.close()
    return build(url, work / "site")


def history_gate(work: Path) -> Path:
    """The committed H100 history-gate store, read from a copy, with its run folders unpacked from
    the measurement's archive (for each red run's reason on the first page)."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    with tarfile.open(GATE_ARCHIVE) as tar:
        wanted = [m for m in tar.getmembers() if m.name.startswith(GATE_REPORTS)]
        tar.extractall(work / "raw", members=wanted, filter="data")
    reports = work / "raw" / GATE_REPORTS
    return build(f"sqlite:///{reports / 'history-gate.sqlite'}", work / "site", runs_root=reports)


def fault_runs(work: Path) -> Path:
    """A store of the committed H100 runs with faults in them: each run's result files copied into
    a folder of its own (a folder of copied results is one run to ``trainperf ingest``)."""
    shutil.rmtree(work, ignore_errors=True)
    for name, archive in FAULT_ARCHIVES.items():
        with tarfile.open(archive) as tar:
            tar.extractall(work / "raw" / name, filter="data")
    for prefix, unpacked in FAULT_RUNS.items():
        folder = work / "runs" / f"2026-11-24-{prefix}"
        folder.mkdir(parents=True)
        for copied in sorted((work / "raw" / unpacked / "results").glob(f"{prefix}--*.json")):
            shutil.copyfile(copied, folder / copied.name.split("--", 1)[1])
    url = f"sqlite:///{work / 'faults.sqlite'}"
    store = open_store(url)
    try:
        report = ingest(store, [work / "runs"], say=lambda _: None)
    finally:
        store.close()
    if not report.complete or report.cases_added != 7:
        raise SystemExit(f"the fault runs were not all stored: {report.line()}")
    return build(url, work / "site")


def screenshot(chromium: str, site: Path, shot: Shot, out: Path) -> Path:
    """The page at the window's size, as a palette PNG under ``out``."""
    target = out / shot.png
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [
                chromium,
                *FLAGS,
                "--hide-scrollbars",
                "--virtual-time-budget=3000",
                f"--user-data-dir={profile}",
                f"--window-size={shot.width},{shot.height}",
                f"--screenshot={target}",
                (site / shot.page).resolve().as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    if done.returncode != 0 or not target.is_file():
        raise SystemExit(f"chromium could not photograph {site / shot.page}: {done.stderr[-500:]}")
    quantise(target)
    return target


def quantise(png: Path) -> None:
    """A palette of COLOURS colours, undithered, so text and plot lines stay sharp; the file is a
    third of its size. The octree keeps small areas of colour (the legend's markers) that median
    cut merges into grey."""
    try:
        from PIL import Image
    except ImportError:
        print(f"{png.name}: left in full colour (pip install pillow to quantise it)", file=sys.stderr)
        return
    with Image.open(png) as image:
        paletted = image.convert("RGB").quantize(
            COLOURS, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE
        )
    paletted.save(png, optimize=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    parser.add_argument("--work", type=Path, default=Path("/tmp/trainperf-screens"))
    parser.add_argument("--year-work", type=Path, default=Path("/tmp/trainperf-year"))
    args = parser.parse_args()
    if CHROMIUM is None:
        raise SystemExit("chromium is not installed: apt-get install -y chromium")
    sites = {
        "year": synthetic_year(args.year_work),
        "gate": history_gate(args.work / "history-gate"),
        "faults": fault_runs(args.work / "faults"),
    }
    shots = {
        "year": [
            Shot("index.html", "dashboard.png", 1400, 1000),
            Shot(f"cases/{slug(SYNTHETIC_CASE)}.html", "dashboard-case.png", 1400, 680),
        ],
        "gate": [
            Shot("index.html", "dashboard-h100.png", 1400, 560),
            Shot(f"cases/{slug(H100_CASE)}.html", "dashboard-h100-case.png", 1400, 640),
        ],
        "faults": [Shot("index.html", "dashboard-h100-faults.png", 1400, 640)],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    for name, site in sites.items():
        for shot in shots[name]:
            target = screenshot(CHROMIUM, site, shot, args.out)
            print(f"{target}  {shot.width}x{shot.height}  {target.stat().st_size / 1e3:.0f} kB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
