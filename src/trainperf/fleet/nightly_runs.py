"""The folder a fleet engine's nightly writes (Slurm's job array, Ray's tasks): ``shard-K/``, each
shard's run folder; ``logs/``, each shard's and the merge's log; ``selection.args``, the pytest
selection the shards ran; ``merged/``, ``trainperf merge``'s one run."""

from __future__ import annotations

from pathlib import Path

SELECTION_FILE = "selection.args"
MERGED_DIR = "merged"
LOGS_DIR = "logs"


def shard_folder(runs: Path, index: int) -> Path:
    return runs / f"shard-{index}"


def prepare(runs: Path, selection: list[str]) -> None:
    """The nightly's folder, its logs folder and the selection file, one argument a line."""
    (runs / LOGS_DIR).mkdir(parents=True, exist_ok=True)
    (runs / SELECTION_FILE).write_text("".join(f"{arg}\n" for arg in selection))
