"""The synthetic-file cache under two writers at once (xdist workers on one host): one writes the
entry, the other waits on its lock and finds it written; a writer killed holding the lock frees it."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from pathlib import Path
from typing import Any

from trainperf.synth.cache import COMPLETE_MARKER, ensure_entry
from trainperf.workloads.protocol import CachedInput


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


def test_an_entry_records_its_writers_size_and_time_and_a_hit_reports_them(tmp_path: Path) -> None:
    """A run that finds an entry cached still says what a fresh runner pays for it (``trainperf cost``)."""
    root = tmp_path / "checkpoints"
    written = ensure_entry(root, "model-abc", _build, say=lambda _: None)
    found = ensure_entry(root, "model-abc", _build, say=lambda _: None)
    first, second = written.record(), found.record()
    assert (first.kind, first.key, first.hit, second.hit) == ("checkpoints", "model-abc", False, True)
    assert first.bytes == second.bytes == 1024  # weights.bin; the marker is written after the count
    assert first.build_s is not None and first.build_s >= 1.0 and second.build_s == first.build_s
    assert CachedInput.from_dict(second.to_dict()) == second


def test_an_entry_of_an_older_writer_reports_no_size_or_time(tmp_path: Path) -> None:
    entry = tmp_path / "models" / "model-old"
    entry.mkdir(parents=True)
    (entry / COMPLETE_MARKER).write_text(json.dumps({"key": "model-old", "parameters": 1}))
    record = ensure_entry(tmp_path / "models", "model-old", _build, say=lambda _: None).record()
    assert (record.hit, record.bytes, record.build_s) == (True, None, None)
    assert CachedInput.from_dict([1, 2]) is None and CachedInput.from_dict({"kind": "models"}) is None


def _build_holding(folder: Path) -> dict[str, Any]:
    held = bytearray(400 * 1024 * 1024)
    held[::4096] = b"\x01" * len(held[::4096])  # touched: resident, not only reserved
    (folder / "weights.bin").write_bytes(b"x" * 1024)
    return {"files": 1}


def _peaks(root: str, out: multiprocessing.Queue[tuple[bool, float, float]]) -> None:
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    entry = ensure_entry(Path(root), "model-big", _build_holding, say=lambda _: None)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out.put((entry.record().build_in_peak_rss, before, after))


def test_a_process_that_writes_an_entry_keeps_the_build_out_of_its_peak_memory(tmp_path: Path) -> None:
    """A child that writes a model folder before its first step would report the build's peak as the
    workload's: the first run on a fresh runner would read as a host-memory regression."""
    context = multiprocessing.get_context("fork")
    out: multiprocessing.Queue[tuple[bool, float, float]] = context.Queue()
    writer = context.Process(target=_peaks, args=(str(tmp_path), out))
    writer.start()
    in_peak, before_mib, after_mib = out.get(timeout=60)
    writer.join(timeout=30)
    assert not in_peak
    assert after_mib < before_mib + 200, (
        f"peak {before_mib:.0f} -> {after_mib:.0f} MiB holds the 400 MiB build"
    )
