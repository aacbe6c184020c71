"""The files a child and its parent exchange, and the child's exit codes (no torch here)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

SPEC_FILE = "spec.json"
RESULT_FILE = "result.json"
STEPS_FILE = "steps.jsonl"
STDOUT_FILE = "stdout.log"
STDERR_FILE = "stderr.log"
SAMPLES_FILE = "nvml.csv"

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


def rank_file(name: str, rank: int) -> str:
    """A file of rank ``rank`` of a multi-GPU child: rank 0 keeps the plain name (it records the
    steps the parent measures), every other rank writes ``result.rank1.json`` and so on."""
    if rank == 0:
        return name
    stem, dot, suffix = name.partition(".")
    return f"{stem}.rank{rank}{dot}{suffix}"


def launch_rank() -> tuple[int, int, int]:
    """(rank, local rank, world size) from the launcher's environment; (0, 0, 1) without one."""
    return (int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0")), int(os.environ.get("WORLD_SIZE", "1")))


class SkipCase(Exception):
    """Raised by a family when this machine cannot run the case at all (the message says why)."""


def write_json_atomic(path: Path, data: Any) -> None:
    """Write via a temporary file and rename, so a reader never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def read_steps(path: Path) -> list[dict[str, Any]]:
    """Per-step records a child appended; a torn last line (child killed mid-write) is dropped."""
    if not path.is_file():
        return []
    steps = []
    for line in path.read_text().splitlines():
        try:
            steps.append(json.loads(line))
        except ValueError:
            break
    return steps


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
