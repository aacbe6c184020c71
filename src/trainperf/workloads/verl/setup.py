"""Where a verl case's time goes before its steps (pure: verl's log in, figures out), and the caches
that shorten it.

A verl case spends minutes before its first step. Its log says where, without extra
instrumentation:

- verl's driver stamps its milestones (``INFO:2026-11-22 05:30:23,459:train and validate dataloader
  initialized``, ``... model engine initialized``, ``all initialize finished, ready to fit``) and Ray
  its start (``2026-11-22 05:29:32,480 INFO worker.py -- Started a local Ray instance``): the phases
  between them are wall-clock spans;
- vLLM (at ``VLLM_LOGGING_LEVEL=INFO``, which the child sets) says what its engine start spent:
  ``torch.compile took 23.41 s in total`` (or ``Directly load the compiled graph(s) ... from the
  cache, took 1.203 s``), ``Graph capturing finished in 12 secs``, ``Model loading took ... and
  0.93 seconds``, ``init engine (profile, create kv cache, warmup model) took 45.67 s``;
- the first step's extra time over the steady steps' median is the warm-up verl does inside it
  (agent-loop workers starting, kernels compiled on first use).

The caches (``cache_environment``): verl turns vLLM's torch.compile cache off for every run
(``VLLM_DISABLE_COMPILE_CACHE=1`` in ``verl/trainer/constants_ppo.py``, a workaround for cache
corruption when engines wrote one folder at once, which torch >= 2.10 avoids by writing its artifacts
atomically). verl only sets the variables its caller has not, so the child sets it back on and points
``VLLM_CACHE_ROOT`` at the suite's cache folder: every case of a run, and every later night, that
starts the same engine configuration loads the compiled graphs instead of compiling them again.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RAY_STARTED = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d+\s+INFO .*Started a local Ray instance")
VERL_STAMP = re.compile(r"INFO:(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d+:(.*)$")
MILESTONES = (
    ("inputs", "dataloader initialized"),
    ("workers", "model engine initialized"),
    ("rollout", "all initialize finished"),
)
"""verl's milestones, each the end of a phase; a milestone that repeats (one per worker role) ends
its phase at its last occurrence."""
VLLM_FIGURES = (
    ("compile_s", re.compile(r"torch\.compile took ([\d.]+) s in total")),
    ("compile_from_cache_s", re.compile(r"Directly load the compiled graph\(s\).* took ([\d.]+) s")),
    ("graph_capture_s", re.compile(r"Graph capturing finished in ([\d.]+) secs")),
    ("weights_load_s", re.compile(r"Model loading took .* and ([\d.]+) seconds")),
    ("engine_init_s", re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+)")),
)
CACHE_DISABLED = "vLLM's torch.compile cache is disabled"
CACHE_SWITCH = "TRAINPERF_VERL_COMPILE_CACHE"
"""``off`` leaves verl's choice (no compile cache) in place."""


def cache_environment(env: Mapping[str, str], cache_folder: Path) -> dict[str, str]:
    """The variables that keep vLLM's compiled graphs across cases and nights, and make its engine
    start readable; a variable the runner already set stays as it is."""
    wanted = {"VLLM_LOGGING_LEVEL": "INFO"}
    if env.get(CACHE_SWITCH, "on").lower() != "off":
        wanted.update(VLLM_DISABLE_COMPILE_CACHE="0", VLLM_CACHE_ROOT=str(cache_folder))
    return {key: value for key, value in wanted.items() if key not in env}


def _epoch(stamp: str) -> float:
    """A log's local wall-clock stamp as seconds since the epoch (the log and this process share a clock)."""
    return time.mktime(time.strptime(stamp, "%Y-%m-%d %H:%M:%S"))


def _milestones(log: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for line in log.splitlines():
        ray = RAY_STARTED.search(line)
        if ray:
            found.setdefault("ray", _epoch(ray.group(1)))
            continue
        stamped = VERL_STAMP.search(line)
        if not stamped:
            continue
        for name, text in MILESTONES:
            if text in stamped.group(2):
                found[name] = _epoch(stamped.group(1))
    return found


def _vllm_figures(log: str) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for name, pattern in VLLM_FIGURES:
        values = [float(match.group(1)) for match in pattern.finditer(log)]
        if values:
            figures[name] = round(sum(values), 2)  # one engine per rollout replica
    if "compile_from_cache_s" in figures:
        figures["compile_cache"] = "hit"
    elif CACHE_DISABLED in log:
        figures["compile_cache"] = "off"
    elif "compile_s" in figures:
        figures["compile_cache"] = "miss"  # compiled, and written for the next start
    else:
        figures["compile_cache"] = "unknown"  # vLLM logged below INFO
    return figures


def first_step_extra(steps: list[dict[str, Any]]) -> float | None:
    """The first step's time over the median of the others (verl's warm-up inside step 1)."""
    times = [float(s["duration_s"]) for s in steps if "duration_s" in s]
    if len(times) < 2:
        return None
    return round(times[0] - statistics.median(times[1:]), 1)


def setup_breakdown(log: str, launch: float, steps: list[dict[str, Any]]) -> dict[str, Any]:
    """Seconds per set-up phase: ``ray`` (launch to Ray started), ``inputs`` (verl's driver, config
    and data loader), ``workers`` (actor, reference and critic models), ``rollout`` (the inference
    engine: the rest up to "ready to fit"), ``first_step_extra``; ``vllm`` holds the engine's own
    figures; ``total_s`` is launch to ready plus the first step's extra. Phases the log does not
    show are left out."""
    marks = _milestones(log)
    phases: dict[str, float] = {}
    previous = launch
    for name in ("ray", *(name for name, _ in MILESTONES)):
        if name in marks:
            # A second of resolution in the log's stamps: never below zero.
            phases[f"{name}_s"] = round(max(0.0, marks[name] - previous), 1)
            previous = marks[name]
    extra = first_step_extra(steps)
    result: dict[str, Any] = {"phases": phases, "vllm": _vllm_figures(log)}
    if extra is not None:
        result["first_step_extra_s"] = extra
    if "rollout" in marks:
        result["total_s"] = round(max(0.0, marks["rollout"] - launch) + max(0.0, extra or 0.0), 1)
    return result


def describe_setup(setup: dict[str, Any]) -> str:
    """One line: the set-up's total and its phases, the engine's compile and graph capture."""
    names = {"ray_s": "Ray", "inputs_s": "driver+data", "workers_s": "models", "rollout_s": "engine"}
    parts = [f"{names[key]} {value:.0f} s" for key, value in setup.get("phases", {}).items() if key in names]
    vllm = setup.get("vllm", {})
    engine = [
        f"{label} {vllm[key]:.0f} s"
        for key, label in (
            ("compile_s", "compile"),
            ("compile_from_cache_s", "compiled graphs from cache"),
            ("graph_capture_s", "CUDA graphs"),
        )
        if key in vllm
    ]
    if "first_step_extra_s" in setup:
        parts.append(f"first step {setup['first_step_extra_s']:+.0f} s")
    total = f"{setup['total_s']:.0f} s" if "total_s" in setup else "unknown"
    inner = (
        f" (engine: {', '.join(engine)}; compile cache {vllm.get('compile_cache', '?')})" if engine else ""
    )
    return f"set-up {total}: " + ", ".join(parts) + inner
