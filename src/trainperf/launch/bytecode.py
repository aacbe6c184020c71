"""A bytecode cache for the children, where the runner writes none.

Container images often set ``PYTHONDONTWRITEBYTECODE`` and install their packages without
``.pyc`` files. Then every Python process compiles every module it imports, and a case pays it
once per process: an SFT case once, a verl case in each of the dozen processes it starts (driver,
Ray workers, vLLM's server, engine core and worker). On an H100 runner built that way (2026-11-24,
docs/measurements/2026-11-24-h100-bytecode-cache), a fresh ``import vllm, verl`` took 15-19 s and
6-7 s with a cache, ``import torch, transformers, peft`` 13-14 s and 6-8 s; a verl case's set-up
fell from 287 to 190 s, an SFT case's wall time from 62 to 55 s.

The children write and read their bytecode under the suite's cache folder instead
(``PYTHONPYCACHEPREFIX``), so the runner's own package folders stay as they are; the first
process after an upgrade fills it, every later one (of the run, and of later nights) reads it.
Python checks each cached file against its source's modification time and size, so a changed
package is compiled again, never run stale. A prefix makes Python ignore the ``__pycache__``
folders beside the sources, so the cache is used only where torch (which every child imports)
has no compiled file there: a runner that writes bytecode, ships it, or names its own prefix is
left alone; ``TRAINPERF_BYTECODE_CACHE=off`` leaves it alone too.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path

SWITCH = "TRAINPERF_BYTECODE_CACHE"
NO_BYTECODE = "PYTHONDONTWRITEBYTECODE"
PREFIX = "PYTHONPYCACHEPREFIX"
STACK_MODULE = "torch"
"""The module whose compiled files say whether the runner ships bytecode: every child imports it."""


def ships_bytecode(module: str) -> bool:
    """Whether ``module`` (found, not imported) has its compiled file where Python reads it; a
    module that is not found, or not a source file, says nothing: taken as shipped."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.has_location or not (spec.origin or "").endswith(".py"):
        return True
    return Path(importlib.util.cache_from_source(spec.origin or "")).is_file()


def with_bytecode_cache(env: Mapping[str, str], folder: Path) -> dict[str, str]:
    """``env`` as a child gets it: with the bytecode cache in ``folder`` where the runner writes
    no bytecode (module docstring), else unchanged."""
    wanted = dict(env)
    # Python reads an empty PYTHONDONTWRITEBYTECODE as unset: only a non-empty one stops writing.
    if env.get(SWITCH, "on").lower() == "off" or not env.get(NO_BYTECODE) or env.get(PREFIX):
        return wanted
    if ships_bytecode(STACK_MODULE):
        return wanted
    wanted.pop(NO_BYTECODE)
    wanted[PREFIX] = str(folder)
    return wanted
