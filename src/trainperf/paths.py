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
