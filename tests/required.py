"""What a self-test needs from the machine it runs on, and what happens when it is missing.

A component the suite claims to check (PostgreSQL, Slurm, Ray, headless Chromium, an optional
Python package, a tool's command line) makes its tests skip with the reason where it is missing,
so that a laptop without it still runs the rest. Under CI (``CI=true``, which ``.ci/run`` sets)
they fail instead, with the same reason: CI must never be where a check silently goes missing.
Every such skip in the self-tests goes through ``missing``.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest


def under_ci() -> bool:
    return os.environ.get("CI") == "true"


def missing(what: str, reason: str) -> NoReturn:
    """Skip (fail under CI) the test or module that needs ``what``: ``reason`` says how to get it."""
    # pytest reports a skip at the line that raised it (here): the reason names the test instead.
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rpartition(" ")[0]
    where = f"{test}: " if test else ""
    if under_ci():
        pytest.fail(f"{where}{what} cannot run under CI (CI=true): {reason}", pytrace=False)
    pytest.skip(f"{where}{what}: {reason}", allow_module_level=True)


def module(name: str, install: str) -> ModuleType:
    """``importlib.import_module(name)``, or ``missing`` naming the package to install."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        error = str(exc)
    missing(f"the checks that use {name}", f"{error}; {install}")  # outside the except: no chained report


def program(*names: str, install: str) -> str:
    """The path of the first of ``names`` on PATH or beside this interpreter, or ``missing``."""
    for name in names:
        found = shutil.which(name) or _beside_interpreter(name)
        if found:
            return found
    missing(f"the checks that run {names[0]}", f"{' or '.join(names)} not found; {install}")


def _beside_interpreter(name: str) -> str | None:
    """A console script of this virtual environment, found even when it is not on PATH."""
    candidate = Path(sys.executable).with_name(name)
    return str(candidate) if candidate.is_file() else None


def chromium() -> str:
    """Headless Chromium for the page tests (Debian's ``chromium``, Ubuntu's ``chromium-browser``)."""
    return program("chromium", "chromium-browser", install="apt-get install -y chromium (.ci/run does)")
