"""The common child harness: read the spec, run the family, classify how it ended, write the result.

The child never judges performance; it measures and reports. An out-of-memory error is
caught, recorded with the allocator's state and ends the process at once (an in-process
OOM left 72.5 GiB allocated on an H200: nothing is retried here).
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import resource
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainperf.case import Outcome
from trainperf.families import family_of
from trainperf.jsonio import write_json_atomic
from trainperf.workloads.protocol import (
    EXIT_CRASH,
    EXIT_OK,
    EXIT_OOM,
    EXIT_SKIPPED,
    INSTALL_HINTS,
    OOM_MARKERS,
    RESULT_FILE,
    STEPS_FILE,
    ChildSpec,
    SkipCase,
    launch_rank,
    rank_file,
)

if TYPE_CHECKING:
    from trainperf.workloads.profiling import MemoryHistory
    from trainperf.workloads.recorder import StepRecorder


def is_oom(exc: BaseException) -> bool:
    if type(exc).__name__ == "OutOfMemoryError":
        return True
    return isinstance(exc, (RuntimeError, MemoryError)) and any(m in str(exc).lower() for m in OOM_MARKERS)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m trainperf.workloads SPEC.json", file=sys.stderr)
        return 2
    spec_path = Path(argv[0])
    spec = ChildSpec.read(spec_path)
    out_dir = Path(spec.out_dir)
    # Under a launcher (a multi-GPU case) each rank drives the GPU of its local rank; only rank 0
    # writes the files the parent measures, the others their own rank files (their memory).
    rank, local_rank, world = launch_rank()
    if world > 1 and spec.on_cuda():
        spec = dataclasses.replace(spec, device=f"cuda:{local_rank}")
    started = time.time()
    result: dict[str, Any] = {
        "child_start": started,
        "pid": os.getpid(),
        "rank": rank,
    }
    attempt = _run_family(spec, out_dir, rank, result)
    if attempt.recorder is not None:
        _record_steps(result, attempt.recorder)
    result.setdefault("memory", {})["host_peak_rss_b"] = (
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    )
    result["child_end"] = time.time()
    write_json_atomic(out_dir / rank_file(RESULT_FILE, rank), result)
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: after an OOM it can hang on CUDA contexts, and nothing is left to do.
    os._exit(attempt.code)


@dataclass(slots=True)
class _Attempt:
    """How running the family ended (its exit code) and what it left to report, however it ended."""

    code: int = EXIT_CRASH
    recorder: StepRecorder | None = None
    memory_history: MemoryHistory | None = None


def _run_family(spec: ChildSpec, out_dir: Path, rank: int, result: dict[str, Any]) -> _Attempt:
    """Run the case's family into ``result``, classifying every way it can end."""
    attempt = _Attempt()
    try:
        from trainperf.workloads.host_index import measure_host_index

        # The host as the case meets it: first, before CUDA is initialised (it slows the calibration).
        result["host_index"] = measure_host_index()
        apply_memory_cap(spec)
        from trainperf.workloads.recorder import StepRecorder

        if spec.trace:
            from trainperf.workloads.profiling import MemoryHistory

            attempt.memory_history = MemoryHistory(_torch_device(spec))

        attempt.recorder = StepRecorder(out_dir / rank_file(STEPS_FILE, rank), spec, rank)
        family = importlib.import_module(family_of(spec.case["family"]).child)
        result.update(family.run(spec, attempt.recorder))
        result["outcome"], attempt.code = Outcome.OK.value, EXIT_OK
    except SkipCase as exc:
        result["outcome"], attempt.code = "skipped", EXIT_SKIPPED
        result["message"] = _first_line(exc)
    except ModuleNotFoundError as exc:
        result["outcome"], attempt.code = "skipped", EXIT_SKIPPED
        result["message"] = missing_module_message(exc, str(spec.case.get("environment", "hf")))
    except BaseException as exc:  # noqa: BLE001 - every way out is classified and recorded
        attempt.code = _record_failure(result, exc, attempt.memory_history, out_dir)
    return attempt


def _record_failure(
    result: dict[str, Any], exc: BaseException, memory_history: MemoryHistory | None, out_dir: Path
) -> int:
    """An OOM (with the allocator's history where it was kept), an interruption or a crash, with
    the traceback; called while ``exc`` is being handled. Returns the exit code."""
    if is_oom(exc):
        result["outcome"], code = Outcome.OOM.value, EXIT_OOM
        result["message"] = _first_line(exc)
        if memory_history is not None:
            result["memory_snapshot"] = _dump_snapshot(memory_history, out_dir)
    elif isinstance(exc, KeyboardInterrupt):
        result["outcome"], code = Outcome.CRASH.value, EXIT_CRASH
        result["message"] = "interrupted"
    else:
        result["outcome"], code = Outcome.CRASH.value, EXIT_CRASH
        result["message"] = f"{type(exc).__name__}: {_first_line(exc)}"
    result["traceback"] = traceback.format_exc()[-6000:]
    return code


def _record_steps(result: dict[str, Any], recorder: StepRecorder) -> None:
    """The recorded steps, the memory peaks the family did not report itself, and the trace's details."""
    result["steps"] = recorder.steps
    memory = result.setdefault("memory", {})
    for key, value in recorder.memory_summary().items():
        memory.setdefault(key, value)  # a family that runs its training elsewhere reports its own
    if (kernels := recorder.kernel_info()) is not None:
        result["kernel_time"] = kernels
    trace = recorder.trace_info()
    if trace is not None:
        from trainperf.workloads.profiling import environment_note

        result["trace"] = {**trace, "environment": environment_note()}


def missing_module_message(exc: ModuleNotFoundError, environment: str) -> str:
    """One line naming the environment, its interpreter, the missing module and the fix."""
    top = (exc.name or "").split(".")[0]
    if environment == "hf":
        hint = INSTALL_HINTS.get(top, f"install '{top}'")
    else:
        hint = f"rebuild it with `trainperf env create {environment}` (spec ci/envs/{environment}.txt)"
    return f"{top} is not installed in environment '{environment}' ({sys.executable}): {hint}"


def apply_memory_cap(spec: ChildSpec) -> None:
    """The memory cap (the case's own, or the emulated class's: the smaller), set before anything
    large is allocated."""
    caps = [float(c) for c in (spec.case.get("memory_cap_gib"), spec.memory_cap_gib) if c]
    if not caps:
        return
    cap_gib = min(caps)
    cap_b = int(float(cap_gib) * 2**30)
    if spec.on_cuda():
        import torch

        index = torch.device(spec.device).index or 0
        total = torch.cuda.get_device_properties(index).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap_b / total), index)
    else:
        # Address space, not resident memory: the allocator's request fails cleanly ("can't
        # allocate memory"), which is classified as an OOM, instead of the kernel's OOM killer.
        resource.setrlimit(resource.RLIMIT_AS, (cap_b, cap_b))


def _torch_device(spec: ChildSpec) -> Any:
    import torch

    return torch.device(spec.device)


def _dump_snapshot(history: Any, out_dir: Path) -> dict[str, Any]:
    """The allocator history at the OOM; a failure to dump is recorded, never raised over the OOM."""
    try:
        info: dict[str, Any] = history.dump(out_dir)
    except Exception as exc:  # noqa: BLE001
        info = {"error": f"{type(exc).__name__}: {_first_line(exc)}"}
    return info


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:500] if text else type(exc).__name__
