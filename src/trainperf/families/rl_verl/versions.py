"""Which verl a case will run under, read from the environment's package metadata (no import).

Two rule sets cover the releases this suite supports (read from the published wheels):

- ``workers`` (verl 0.6, 0.7; E1 used 0.6.1): the FSDP workers of ``verl/workers/fsdp_workers.py``
  normalise the mini-batch in place (× rollout.n, ÷ data-parallel size, floor division) and
  assert the micro-batch divides the result at worker start-up.
- ``engine`` (verl 0.8.0, 0.9.x; 0.9.1 current): ``fsdp_workers.py`` is gone; the trainer multiplies
  the mini-batch by rollout.n, the engine worker asserts it divides by the data-parallel size and
  the micro-batch split asserts the per-GPU mini-batch divides by the micro-batch, at the first
  update (after a whole rollout has been spent).
"""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from typing import Literal

from trainperf.errors import TrainperfError

RuleSet = Literal["workers", "engine"]
CATALOGUE_VERL_VERSION = "0.9.1"
"""Assumed when the case's environment has no verl installed (the version the catalogue targets)."""
OLDEST_SUPPORTED = (0, 6)


def parse_version(text: str) -> tuple[int, int]:
    match = re.match(r"\s*(\d+)\.(\d+)", text)
    if not match:
        raise TrainperfError(f"cannot read verl version {text!r}: expected MAJOR.MINOR[.PATCH]")
    return int(match.group(1)), int(match.group(2))


def rule_set(version: str) -> RuleSet:
    """The batch-size rules of a verl release."""
    parsed = parse_version(version)
    if parsed < OLDEST_SUPPORTED:
        raise TrainperfError(
            f"verl {version} is older than the oldest release whose rules are modelled (0.6): pre-flight cannot "
            "predict its errors; upgrade verl or drop the case"
        )
    return "workers" if parsed < (0, 8) else "engine"


@functools.lru_cache(maxsize=8)
def installed_version(python: str | None) -> str | None:
    """verl's version in ``python``'s environment (this one when None), None when not installed."""
    if python is None or python == sys.executable:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("verl")
        except PackageNotFoundError:
            return None
    probe = (
        "import importlib.metadata as m\ntry: print(m.version('verl'))\nexcept m.PackageNotFoundError: pass"
    )
    try:
        done = subprocess.run([python, "-c", probe], check=False, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = done.stdout.strip()
    return text or None


def effective_version(python: str | None) -> tuple[str, str]:
    """The version pre-flight should model and where it came from."""
    found = installed_version(python)
    if found:
        return found, "installed"
    return CATALOGUE_VERL_VERSION, "assumed (verl not installed in the case's environment)"
