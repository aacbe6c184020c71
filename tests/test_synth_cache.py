"""The synthetic-file cache under two writers at once (xdist workers on one host): one writes the
entry, the other waits on its lock and finds it written; a writer killed holding the lock frees it."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path
from typing import Any

from trainperf.synth.cache import ensure_entry


def _build(folder: Path) -> dict[str, Any]:
    with open(folder.parent / "builds.log", "a") as log:  # one line per build, whoever builds
        log.write(f"{os.getpid()}\n")
    time.sleep(1.0)
    (folder / "weights.bin").write_bytes(b"x" * 1024)
    return {"files": 1}


def _writer(root: str, out: multiprocessing.Queue[tuple[bool, list[str]]]) -> None:
    said: list[str] = []
    entry = ensure_entry(Path(root), "model-abc", _build, say=said.append)
    out.put((entry.hit, said))


def test_two_writers_of_one_entry_build_it_once_and_the_second_says_it_waits(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    out: multiprocessing.Queue[tuple[bool, list[str]]] = context.Queue()
    writers = [context.Process(target=_writer, args=(str(tmp_path), out)) for _ in range(2)]
    for writer in writers:
        writer.start()
        time.sleep(0.2)  # the first holds the lock before the second asks
    answers = sorted(out.get(timeout=30) for _ in writers)
    for writer in writers:
        writer.join(timeout=30)
    assert len((tmp_path / "builds.log").read_text().splitlines()) == 1
    (built, built_said), (waited, waited_said) = answers
    assert (built, waited) == (False, True)
    assert not built_said and any("waiting for another run writing cache entry" in s for s in waited_said)
    assert (tmp_path / "model-abc" / "weights.bin").is_file()


def _hang(folder: Path) -> dict[str, Any]:
    time.sleep(60)
    return {}


def _stuck_writer(root: str) -> None:
    ensure_entry(Path(root), "model-abc", _hang, say=lambda _: None)


def test_a_writer_killed_with_the_lock_leaves_it_free_and_its_half_entry_is_removed(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    stuck = context.Process(target=_stuck_writer, args=(str(tmp_path),))
    stuck.start()
    deadline = time.time() + 20
    while not list(tmp_path.glob("model-abc.tmp-*")) and time.time() < deadline:
        time.sleep(0.05)
    assert stuck.pid is not None
    os.kill(stuck.pid, signal.SIGKILL)
    stuck.join(timeout=10)
    said: list[str] = []
    entry = ensure_entry(tmp_path, "model-abc", _build, say=said.append)
    assert not entry.hit and (entry.path / "weights.bin").is_file()
    assert any("half-written" in s for s in said) and not list(tmp_path.glob("model-abc.tmp-*"))
