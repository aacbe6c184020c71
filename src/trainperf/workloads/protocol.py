"""The contract between the parent and a child: the spec, the files they exchange, the exit codes (no
torch)."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainperf.jsonio import read_jsonl, write_json_atomic

SPEC_FILE = "spec.json"
RESULT_FILE = "result.json"
STEPS_FILE = "steps.jsonl"
STDOUT_FILE = "stdout.log"
STDERR_FILE = "stderr.log"
SAMPLES_FILE = "nvml.csv"

OOM_MARKERS = ("out of memory", "outofmemoryerror", "can't allocate memory", "cuda error: out of memory")
"""How an out-of-memory error reads, in an exception or in the stderr of a child that wrote no result."""

BARE_WINDOW_START = 3
"""A bare run (no per-step hooks) times the steps after this one with two device syncs in all; the
fidelity benchmark compares it with the harness's per-step records over exactly the same steps."""

EXIT_OK = 0
EXIT_CRASH = 1
EXIT_OOM = 3
EXIT_SKIPPED = 4

# Extras that provide an optional import, for the one-line "install it" message.
INSTALL_HINTS = {
    "bitsandbytes": "pip install 'trainperf[qlora]' (bitsandbytes)",
    "peft": "pip install 'trainperf[hf]'",
    "trl": "pip install 'trainperf[hf]'",
    "transformers": "pip install 'trainperf[hf]'",
    "datasets": "pip install 'trainperf[hf]'",
    "accelerate": "pip install 'trainperf[hf]'",
    "verl": "install the verl-vllm or verl-sglang environment (ci/envs/verl-*.txt; trainperf env)",
    "torch": "install PyTorch for this machine (CPU: pip install torch==2.13.0)",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildSpec:
    """What the parent tells a child (``spec.json`` in the child's folder); the child runs it as told."""

    case: dict[str, Any]
    """The case (``Case.to_dict``): the child rebuilds it with ``Case.from_dict``."""
    steps: int
    """Optimizer steps to run."""
    data_steps: int | None = None
    """Steps' worth of synthetic data, when more than ``steps``: a planned short run then trains on
    the first batches of the full-length run its baseline measured, in the same order."""
    out_dir: str
    """The child's folder: its steps, result, logs, trace."""
    device: str = "cpu"
    """``cuda:0`` (the child sees only its own GPUs) or ``cpu``; a rank under torchrun takes ``cuda:<local
    rank>``."""
    seed: int = 0
    plant_slowdown: float = 0.0
    """Fraction of a step added as a sleep after each one: the self-test of the gate (never in a baseline)."""
    plant: str | None = None
    """A planted regression of one nature (``traces.plant``: ``KIND[:AMOUNT]``); never baselined."""
    memory_cap_gib: float | None = None
    """The emulated class's memory (--perf-emulate); the case's own cap is in ``case``."""
    bare: bool = False
    """Run the training loop without the per-step hooks (the fidelity benchmark's reference)."""
    bare_window_after: int | None = None
    """A bare run times the steps after this one (default ``BARE_WINDOW_START``)."""
    trace: dict[str, Any] | None = None
    """The trace plan (``TracePlan.to_spec``) when the run is profiled."""
    kernel_window: list[int] | None = None
    """``[first, last]``: the steps whose GPU kernel time the child records (``workloads.kernel_clock``;
    CUDA devices only), left out of the timing metrics like a trace's profiled steps."""
    kernel_clock: str = "auto"
    """How the child reads its kernel records (``--perf-kernel-clock``: auto, cupti, profiler)."""

    @property
    def dataset_steps(self) -> int:
        """Steps' worth of data to build: the full run's for a planned run, else its own steps."""
        return max(self.steps, self.data_steps or 0)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form; optional parts left out when unset, as the child has always read them."""
        data = dataclasses.asdict(self)
        for key in ("bare_window_after", "trace", "plant", "data_steps", "kernel_window"):
            if data[key] is None:
                del data[key]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChildSpec:
        known = {field.name for field in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known and value is not None})

    def write(self, path: Path) -> None:
        """The spec in the child's folder, its folders named relative to that folder: a run folder
        records nothing of the machine's layout, and still reads where it is copied."""
        write_json_atomic(path, _folders(self.to_dict(), lambda folder: os.path.relpath(folder, path.parent)))

    @classmethod
    def read(cls, path: Path) -> ChildSpec:
        """The spec with its folders absolute again (older specs recorded them absolute)."""
        data = json.loads(path.read_text())
        return cls.from_dict(_folders(data, lambda folder: os.path.abspath(path.parent / folder)))

    def on_cuda(self) -> bool:
        return self.device.startswith("cuda")


def _folders(data: dict[str, Any], convert: Callable[[str], str]) -> dict[str, Any]:
    """A spec's JSON with its folders (``out_dir``, the trace plan's ``trace_dir``) converted."""
    data = {**data, "out_dir": convert(data["out_dir"])}
    if isinstance(data.get("trace"), dict) and data["trace"].get("trace_dir"):
        data["trace"] = {**data["trace"], "trace_dir": convert(data["trace"]["trace_dir"])}
    return data


CACHED_INPUTS = "cached_inputs"
"""The child result's list of the cached synthetic inputs it used (``CachedInput.to_dict``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CachedInput:
    """A synthetic input a child took from the cache under ``TRAINPERF_CACHE_DIR`` or wrote into it (a
    4-bit checkpoint, a model folder): what a fresh runner writes before the case's first step."""

    kind: str
    """The cache's folder (``checkpoints``, ``models``)."""
    key: str
    """The entry's name: the model and a hash of everything that shapes its files."""
    bytes: int | None
    """Its size on disk, where its writer recorded it (entries of an older trainperf did not)."""
    build_s: float | None
    """How long its writer took, where recorded."""
    hit: bool
    """Found in the cache (True) or written by this run (False)."""
    build_in_peak_rss: bool = False
    """Written by this run, and the process's peak host memory could not be cleared after it: the
    run's peak RSS is the build's as much as the workload's (``synth.cache``)."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> CachedInput | None:
        """The record, or None for anything that is not one (a hand-edited or truncated result)."""
        if not isinstance(data, dict) or not isinstance(data.get("kind"), str) or not data.get("key"):
            return None
        size, seconds = data.get("bytes"), data.get("build_s")
        return cls(
            kind=data["kind"],
            key=str(data["key"]),
            bytes=int(size) if isinstance(size, int | float) else None,
            build_s=float(seconds) if isinstance(seconds, int | float) else None,
            hit=bool(data.get("hit")),
            build_in_peak_rss=bool(data.get("build_in_peak_rss")),
        )

    @classmethod
    def read_all(cls, data: Any) -> list[CachedInput]:
        """The records of a stored list, each read on its own: an entry that is not one (a
        hand-edited result) is left out without hiding the others."""
        entries = data if isinstance(data, list) else []
        return [record for record in map(cls.from_dict, entries) if record is not None]


def rank_file(name: str, rank: int) -> str:
    """A file of rank ``rank`` of a multi-GPU child: rank 0 keeps the plain name (it records the
    steps the parent measures), every other rank writes ``result.rank1.json`` and so on."""
    if rank == 0:
        return name
    stem, dot, suffix = name.partition(".")
    return f"{stem}.rank{rank}{dot}{suffix}"


def launch_rank() -> tuple[int, int, int]:
    """(rank, local rank, world size) from the launcher's environment; (0, 0, 1) without one."""
    return (
        int(os.environ.get("RANK", "0")),
        int(os.environ.get("LOCAL_RANK", "0")),
        int(os.environ.get("WORLD_SIZE", "1")),
    )


class SkipCase(Exception):
    """Raised by a family when this machine cannot run the case at all (the message says why)."""


def read_steps(path: Path) -> list[dict[str, Any]]:
    """Per-step records a child appended; a torn last line (child killed mid-write) is dropped."""
    return read_jsonl(path)


def read_child_result(out_dir: Path) -> dict[str, Any]:
    """What a child left in ``out_dir``: its result file, or, when it died hard (killed, segfault)
    before writing one, the steps it had flushed."""
    path = out_dir / RESULT_FILE
    if path.is_file():
        try:
            data: dict[str, Any] = json.loads(path.read_text())
            return data
        except ValueError:
            pass
    return {"steps": read_steps(out_dir / STEPS_FILE)}
