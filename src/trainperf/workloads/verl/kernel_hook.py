"""Kernel time inside verl's own processes, where its steps' kernels run (``--perf-kernel-steps``).

verl imports every module named in ``VERL_USE_EXTERNAL_MODULES`` from its package ``__init__``, in
its driver, its Ray workers and its rollout engines' processes (they import verl to load its worker
extension). Importing this one, where ``TRAINPERF_VERL_KERNELS`` names a folder, does two things
(``verl.kernel_folder`` has the protocol):

- in every process, a watcher thread: at the window's start, a process with a CUDA context records
  the device's work through CUPTI's Activity API directly (``workloads.cupti_clock``); after the
  window's last step it cuts the records at the driver's step edges and writes them;
- ``verl.utils.tracking.Tracking.log`` is wrapped: in verl's driver, where the trainer logs each
  step after its workers have returned it, the wrapper writes the step's edge, waits for every
  process to answer before the window's first step, and for their records after its last.

A process started by ``fork`` inherits the module but not the thread: the watcher restarts in the
child. Nothing here makes a CUDA call before the window, and nothing is recorded in a process that
holds no CUDA context then (the driver, reward workers, an HTTP front end).
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from trainperf.traces.kernel_processes import ProcessKernels, convert_to_wall, process_kernels
from trainperf.workloads.verl.kernel_folder import (
    DIR_VARIABLE,
    POLL_S,
    WINDOW_VARIABLE,
    Answer,
    KernelFolder,
    Window,
    holds_gpu,
    wait_for_answers,
    wait_for_records,
)

MODULE_NAME = __name__
SOURCE_ROOT = Path(__file__).resolve().parents[3]
"""The folder holding the ``trainperf`` package, put on the path of verl's processes."""
OUTSIDE_LIMIT = 0.1
CLOCKS_DISAGREE = "CUPTI's timestamps are not on the host's clock here"
STEP_KEY = "timing_s/step"
"""The key of a training step's metrics (a validation log has none)."""


def process_title() -> str:
    """The title Ray or the engine gave this process (``ray::WorkerDict...``, ``VLLM::EngineCore``)."""
    try:
        return Path("/proc/self/cmdline").read_bytes().split(b"\0")[0].decode("utf-8", "replace")[:120]
    except OSError:
        return ""


def cuda_context() -> tuple[Any, str]:
    """This process's torch where it holds a CUDA context, else None and why not."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None, "no torch in this process"
    if not torch.cuda.is_initialized():
        return None, "no CUDA context in this process"
    return torch, ""


class CuptiWindow:
    """CUPTI directly over the window, with its clock read beside the host's at both ends."""

    def __init__(self, torch: Any) -> None:
        from trainperf.workloads.cupti_clock import CuptiActivityReader, open_library

        library = open_library()
        self.reader = CuptiActivityReader(library, torch._C._demangle)
        self._timestamp = library.cuptiGetTimestamp
        self._timestamp.argtypes = [ctypes.POINTER(ctypes.c_uint64)]
        self.reader.start()
        self.began = self.clocks()

    def clocks(self) -> tuple[int, int]:
        """(CUPTI's timestamp, the host's wall clock), read together."""
        value = ctypes.c_uint64(0)
        self._timestamp(ctypes.byref(value))
        return int(value.value), time.time_ns()

    def records(self, edges: dict[int, int], window: Window, pid: int, gpu: str) -> ProcessKernels:
        began = time.perf_counter()
        recording = self.reader.stop()
        ended = self.clocks()
        activities, note = convert_to_wall(recording.activities, self.began, ended)
        steps, top, outside = process_kernels(activities, edges, window.first, window.last)
        error = recording.lost
        if outside > OUTSIDE_LIMIT * len(activities):
            # Recorded from one step edge to another: records outside the steps mean the clocks disagree.
            error = (
                f"{outside} of {len(activities)} records fall outside the window's steps: {CLOCKS_DISAGREE}"
            )
        return ProcessKernels(
            pid=pid,
            title=process_title(),
            gpu=gpu,
            steps=steps,
            top=top,
            records=len(activities),
            outside=outside,
            read_back_s=round(time.perf_counter() - began, 3),
            error=error,
            note=note,
        )


def gpu_of(torch: Any) -> str:
    """The GPU this process works on, where it sees one; else its pid (``ProcessKernels.gpu``)."""
    if torch.cuda.device_count() == 1:
        return str(torch.cuda.get_device_properties(0).uuid)
    return f"pid:{os.getpid()}"


class Watcher:
    """One process's side of the window (``kernel_folder``'s steps 1 and 2)."""

    def __init__(self, folder: KernelFolder, window: Window) -> None:
        self.folder, self.window = folder, window
        self.pid = os.getpid()
        self.cupti: CuptiWindow | None = None
        self.gpu = ""

    def run(self) -> None:
        self.folder.register(self.pid)
        late = False
        while True:
            edges = self.folder.edges()
            newest = max(edges, default=0)
            if self.cupti is None and not late and newest >= self.window.first - 1:
                # Started after the window began: never a partial record (said at its end).
                late = newest > self.window.first - 1 or self.folder.released() is not None
                if not late and not self.start():
                    return
            if newest >= self.window.last:
                if self.cupti is not None:
                    self.finish(edges)
                elif late:
                    self.say_missed()
                return
            time.sleep(POLL_S)

    def say_missed(self) -> None:
        """A process that came after the window's start and holds a CUDA context may have run some of
        the window's kernels: the run's figure would lack them, so it is said, and no figure given."""
        torch, _ = cuda_context()
        if torch is not None:
            why = "started after the window began, with a CUDA context: its kernels are not recorded"
            self.folder.answer(self.pid, Answer(False, why, time.time_ns(), missed=True))

    def start(self) -> bool:
        """Record where this process holds a CUDA context; answer either way. True when recording."""
        torch, why = cuda_context()
        if torch is not None:
            try:
                self.cupti, self.gpu = CuptiWindow(torch), gpu_of(torch)
            except Exception as exc:  # noqa: BLE001 - said in the answer, the run goes on
                why = f"CUPTI did not start: {type(exc).__name__}: {exc}"[:300]
        self.folder.answer(self.pid, Answer(self.cupti is not None, why, time.time_ns()))
        return self.cupti is not None

    def finish(self, edges: dict[int, int]) -> None:
        assert self.cupti is not None
        try:
            record = self.cupti.records(edges, self.window, self.pid, self.gpu)
        except Exception as exc:  # noqa: BLE001 - the child reports it instead of a figure
            error = f"records not read: {type(exc).__name__}: {exc}"[:300]
            record = ProcessKernels(pid=self.pid, title=process_title(), gpu=self.gpu, error=error)
        self.folder.write_records(record)


def watch(folder: KernelFolder, window: Window) -> None:
    threading.Thread(target=Watcher(folder, window).run, name="trainperf-kernels", daemon=True).start()


def at_step_logged(folder: KernelFolder, window: Window, step: int) -> None:
    """In verl's driver, after a step's log: hold the next step until every process answered, or verl's
    end until the records are written."""
    if step == window.first - 1:
        silent = wait_for_answers(folder)
        folder.release(silent, [pid for pid in silent if holds_gpu(pid)])
    elif step == window.last:
        wait_for_records(folder)


def wrap_tracking(folder: KernelFolder, window: Window) -> None:
    """``Tracking.log`` writing each training step's edge (before the log: its work is done)."""
    from verl.utils import tracking

    original = tracking.Tracking.log
    if getattr(original, "trainperf_edges", False):
        return

    def log(self: Any, data: Any, step: Any, *args: Any, **kwargs: Any) -> Any:
        training = isinstance(data, dict) and STEP_KEY in data
        if training:
            folder.add_edge(int(step), time.time_ns())
        result = original(self, data, step, *args, **kwargs)
        if training:
            at_step_logged(folder, window, int(step))
        return result

    log.trainperf_edges = True  # type: ignore[attr-defined]
    tracking.Tracking.log = log


def install() -> tuple[KernelFolder, Window] | None:
    """The window this process's environment asks for, watched; None where it asks for none."""
    folder_path, window = os.environ.get(DIR_VARIABLE), Window.from_env(os.environ.get(WINDOW_VARIABLE))
    if not folder_path or window is None:
        return None
    folder = KernelFolder(Path(folder_path))
    watch(folder, window)
    os.register_at_fork(after_in_child=lambda: watch(folder, window))
    if "verl" in sys.modules:  # imported by verl's package __init__ (a test may import it alone)
        wrap_tracking(folder, window)
    return folder, window


INSTALLED = install()
