"""The folder through which verl's processes and the child agree on a kernel window (no torch).

verl's driver logs each step after its workers have returned it (``traces.kernel_processes``); the
suite's hook in that driver (``verl.kernel_hook``) appends the step's log time to ``edges.jsonl``.
Every process of the run that imported verl (its Ray workers, its rollout engines) registers here
and watches that file:

1. when step ``first - 1`` is logged, each process with a CUDA context starts CUPTI and answers
   (``ack-<pid>.json``), the others answer that they hold no GPU work; the driver waits for every
   live process's answer before it lets step ``first`` begin, then writes ``released``;
2. when step ``last`` is logged, each recording process stops, cuts its records at the edges and
   writes ``kernels-<pid>.json``; the driver waits for them before verl goes on to end the run, so
   the read-back lands after the run's last step;
3. the child pools the processes' records into the run's kernel time (``collect``).

Every file is written whole (a temporary name, then a rename), so a reader never sees half of one.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from trainperf.pids import alive
from trainperf.traces.kernel_processes import ROLLOUT, TRAINING, ProcessKernels, pool_processes
from trainperf.traces.kernel_steps import KernelTimes

DIR_VARIABLE = "TRAINPERF_VERL_KERNELS"
WINDOW_VARIABLE = "TRAINPERF_VERL_KERNEL_STEPS"
ANSWER_WAIT_S = 20.0
"""How long the driver waits for every process to answer before the window's first step: a watcher
polls every 50 ms (every process answered within 0.11 s on an H200 host), so only a process stuck
without releasing the GIL takes long."""
RECORDS_WAIT_S = 900.0
"""How long the driver waits for the records after the last step: reading one back costs a few
microseconds, and a verl step launches up to a few million kernels per process."""
POLL_S = 0.05


@dataclass(frozen=True, slots=True)
class Window:
    first: int
    last: int

    def to_env(self) -> str:
        return f"{self.first},{self.last}"

    @classmethod
    def from_env(cls, text: str | None) -> Window | None:
        try:
            first, last = (int(part) for part in (text or "").split(","))
        except ValueError:
            return None
        return cls(first, last) if 2 <= first <= last else None


@dataclass(frozen=True, slots=True)
class Answer:
    recording: bool
    why: str = ""
    t_ns: int = 0
    missed: bool = False
    """A process that started during the window with a CUDA context: the window lacks its kernels."""


@dataclass(frozen=True, slots=True)
class Release:
    """The driver's word that the window may start, and who had not answered by then."""

    t_ns: int
    silent: tuple[int, ...] = ()
    silent_on_gpu: tuple[int, ...] = ()
    """Those of ``silent`` that had an NVIDIA device open: the window may lack their kernels."""


def _write_whole(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text)
    os.replace(temporary, path)


def holds_gpu(pid: int) -> bool:
    """Whether ``pid`` has an NVIDIA device open (a CUDA context, or NVML): where it cannot be told,
    it is taken to (a process that may have run kernels in the window is never left out unsaid)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:
        return False
    except OSError:
        return True
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/dev/nvidia"):
                return True
        except OSError:
            continue
    return False


class KernelFolder:
    def __init__(self, path: Path) -> None:
        self.path = path

    def add_edge(self, step: int, t_ns: int) -> None:
        with open(self.path / "edges.jsonl", "a") as handle:
            handle.write(json.dumps({"step": step, "t_ns": t_ns}) + "\n")

    def edges(self) -> dict[int, int]:
        try:
            lines = (self.path / "edges.jsonl").read_text().splitlines()
        except FileNotFoundError:
            return {}
        found = {}
        for line in lines:
            try:
                entry = json.loads(line)
                found[int(entry["step"])] = int(entry["t_ns"])
            except (ValueError, KeyError, TypeError):
                continue  # a line being written
        return found

    def register(self, pid: int) -> None:
        _write_whole(self.path / f"proc-{pid}", str(pid))

    def registered(self) -> list[int]:
        return sorted(int(p.name.removeprefix("proc-")) for p in self.path.glob("proc-*"))

    def answer(self, pid: int, answer: Answer) -> None:
        entry = {
            "recording": answer.recording,
            "why": answer.why,
            "t_ns": answer.t_ns,
            "missed": answer.missed,
        }
        _write_whole(self.path / f"ack-{pid}.json", json.dumps(entry))

    def answers(self) -> dict[int, Answer]:
        found = {}
        for path in self.path.glob("ack-*.json"):
            entry = json.loads(path.read_text())
            found[int(path.stem.removeprefix("ack-"))] = Answer(**entry)
        return found

    def release(self, silent: list[int], on_gpu: list[int]) -> None:
        """The window may start: ``silent`` did not answer, ``on_gpu`` of them had a GPU open."""
        entry = {"t_ns": time.time_ns(), "silent": silent, "silent_on_gpu": on_gpu}
        _write_whole(self.path / "released", json.dumps(entry))

    def released(self) -> Release | None:
        try:
            entry = json.loads((self.path / "released").read_text())
        except FileNotFoundError:
            return None
        silent, on_gpu = (
            tuple(int(pid) for pid in entry.get(key) or ()) for key in ("silent", "silent_on_gpu")
        )
        return Release(int(entry["t_ns"]), silent, on_gpu)

    def write_records(self, record: ProcessKernels) -> None:
        _write_whole(self.path / f"kernels-{record.pid}.json", json.dumps(record.to_dict()))

    def records(self) -> dict[int, ProcessKernels]:
        found = {}
        for path in self.path.glob("kernels-*.json"):
            pid = int(path.stem.removeprefix("kernels-"))
            try:
                found[pid] = ProcessKernels.from_dict(json.loads(path.read_text()))
            except ValueError as exc:
                found[pid] = ProcessKernels(pid=pid, title="", gpu="", error=str(exc))
        return found


def wait_until(done: Callable[[], list[int]], timeout_s: float) -> list[int]:
    """Poll ``done`` (what is still missing) until nothing is or the time is up; what is missing."""
    deadline = time.monotonic() + timeout_s
    missing = done()
    while missing and time.monotonic() < deadline:
        time.sleep(POLL_S)
        missing = done()
    return missing


def wait_for_answers(folder: KernelFolder, timeout_s: float = ANSWER_WAIT_S) -> list[int]:
    """The live processes (this one aside) that did not answer in time."""
    me = os.getpid()

    def unanswered() -> list[int]:
        answered = folder.answers()
        return [pid for pid in folder.registered() if pid != me and pid not in answered and alive(pid)]

    return wait_until(unanswered, timeout_s)


def wait_for_records(folder: KernelFolder, timeout_s: float = RECORDS_WAIT_S) -> list[int]:
    """The recording processes, still alive, that did not write their records in time."""

    def unwritten() -> list[int]:
        written = folder.records()
        recording = [pid for pid, answer in folder.answers().items() if answer.recording]
        return [pid for pid in recording if pid not in written and alive(pid)]

    return wait_until(unwritten, timeout_s)


def collect(folder: KernelFolder, window: Window, gpus: int) -> KernelTimes:
    """The run's kernel time from its processes' records; an error names what kept it from being whole:
    a process that did not answer before the window, recorded and wrote nothing, or came during it."""
    released = folder.released()
    if released is None:
        return KernelTimes(error=f"kernel time not recorded: verl never logged step {window.first - 1}")
    records = folder.records()
    problems = [
        ProcessKernels(pid=pid, title="", gpu="", error="did not answer before the window, with a GPU open")
        for pid in released.silent_on_gpu
    ]
    for pid, answer in folder.answers().items():
        if answer.recording and pid not in records:
            problems.append(ProcessKernels(pid=pid, title="", gpu="", error="recorded and wrote nothing"))
        if answer.missed:
            problems.append(ProcessKernels(pid=pid, title="", gpu="", error=answer.why))
    recording = [records[pid] for pid in sorted(records)]
    for stray in folder.path.glob(".*.tmp"):  # a process that ended while registering
        stray.unlink(missing_ok=True)
    # A step's work is generation and updates: a figure without either part is not the step's.
    pooled = pool_processes([*recording, *problems], window.first, window.last, gpus, (ROLLOUT, TRAINING))
    if quiet := sorted(set(released.silent) - set(released.silent_on_gpu)):
        said = f"process(es) {', '.join(map(str, quiet))} did not answer and had no GPU open"
        pooled.clock_note = "; ".join(part for part in (pooled.clock_note, said) if part)
    return pooled
