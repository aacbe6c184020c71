"""Headless Chromium as the self-tests and benchmarks/dashboard_screenshots.py start it: no
sandbox (CI containers run as root), no GPU, no first-run dialogs, and none of the browser's own
requests (updates, sync, QUIC probes), which a host without network would wait on."""

from __future__ import annotations

import shutil

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
