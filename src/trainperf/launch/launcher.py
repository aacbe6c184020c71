"""One fresh child of a case: its spec, its GPUs (locked), the samplers, the launch, the read-back.

Each step is a function of its own, so that the spec, the command, the environment and the
run record can be checked without starting a process; ``ChildLauncher.run`` strings them
together. The outcome of the child is ``launch.outcome``'s to decide.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainperf.case import Case, Outcome
from trainperf.child_report_record import FrameworkSetup, MemorySnapshot
from trainperf.errors import TrainperfError
from trainperf.families import family_of
from trainperf.families.envs import Interpreter, missing_message, parse_overrides, resolve_interpreter
from trainperf.launch import interruption, process
from trainperf.launch.child_env import child_command, child_env
from trainperf.launch.guard import Progress, RunWatch, Watched, both, check_before
from trainperf.launch.launch_context import LaunchContext
from trainperf.launch.outcome import classify, says_out_of_space
from trainperf.measure.hardware import CPU_CLASS
from trainperf.measure.idle import idle_level, wait_idle
from trainperf.measure.measurement import RunMeasurement, collect_trace, measure_run
from trainperf.measure.multi_gpu import measure_gpus, merge_ranks
from trainperf.measure.nvml import Sample, Sampler, write_samples
from trainperf.measure.placement import Placement, reserve_for_case
from trainperf.paths import portable
from trainperf.run_checks_record import GpuCheck, IdleCheck
from trainperf.run_record import RunRecord
from trainperf.trace_record import TraceRecord
from trainperf.traces.kernel_steps import kernel_window, last_steps_window
from trainperf.traces.profile_window import TracePlan, plan_trace
from trainperf.workloads.protocol import (
    CACHED_INPUTS,
    SAMPLES_FILE,
    SPEC_FILE,
    STEPS_FILE,
    CachedInput,
    ChildSpec,
    rank_file,
    read_child_result,
    read_steps,
)


@dataclass(slots=True)
class ChildRun:
    """One fresh child's end: its outcome, what it wrote, what the parent measured around it."""

    outcome: Outcome
    message: str
    child: dict[str, Any]
    measurement: RunMeasurement | None
    info: RunRecord


@dataclass(slots=True)
class Launched:
    """What the launch itself gave: the exit, each GPU's samples, the GPU facts around it."""

    exit: process.Exit
    samples: dict[str, list[Sample]]
    devices: tuple[str, ...]
    waited_s: float
    before: GpuCheck | None
    idle: dict[str, int]
    watched: Watched = field(default_factory=Watched)
    """What the watches recorded (``launch.guard.RunWatch``): the host's CPU, and what made the run's
    timing untrustworthy (``contamination``: a foreign process, external throttling)."""


def interpreter_for(ctx: LaunchContext, case: Case) -> Interpreter | None:
    """The interpreter of the case's environment (--perf-python, TRAINPERF_ENV, .venvs/NAME)."""
    settings = ctx.settings
    return resolve_interpreter(
        case.environment,
        perf_python=settings.python,
        overrides=parse_overrides(settings.env),
        environ=os.environ,
    )


def child_spec(
    ctx: LaunchContext,
    case: Case,
    steps: int,
    out_dir: Path,
    *,
    plant_slowdown: float | None = None,
    bare: bool = False,
    window_after: int | None = None,
    trace: TracePlan | None = None,
    data_steps: int | None = None,
) -> ChildSpec:
    """What the child is told: the case, its steps (and data), device, plants, memory cap, trace."""
    return ChildSpec(
        case=case.to_dict(),
        steps=steps,
        data_steps=data_steps if data_steps and data_steps > steps else None,
        device="cuda:0" if ctx.on_gpu else "cpu",
        seed=0,
        out_dir=str(out_dir),
        plant_slowdown=ctx.settings.plant_slowdown if plant_slowdown is None else plant_slowdown,
        plant=ctx.settings.plant,
        memory_cap_gib=ctx.gpu_class.memory_gib if ctx.emulated else None,
        bare=bare,
        bare_window_after=window_after if bare else None,
        trace=trace.to_spec() if trace is not None else None,
        kernel_window=_kernel_window(ctx, case, steps, trace, bare),
        kernel_clock=ctx.settings.kernel_clock,
    )


def _kernel_window(
    ctx: LaunchContext, case: Case, steps: int, trace: TracePlan | None, bare: bool
) -> list[int] | None:
    """The steps whose kernel time a GPU child records (``--perf-kernel-steps``), before any trace's;
    a family recording in its own processes takes its last steps, and none in a traced run (its own
    profiler holds the same CUPTI)."""
    family = family_of(case.family)
    if bare or not ctx.on_gpu or ctx.settings.kernel_steps < 1 or not family.kernel_time:
        return None
    if family.kernel_window_at_end:
        window = None if trace is not None else last_steps_window(steps, ctx.settings.kernel_steps)
        return list(window) if window else None
    first = trace.first_profiled_step if trace is not None else None
    window = kernel_window(steps, ctx.settings.kernel_steps, first)
    return list(window) if window else None


def case_devices(ctx: LaunchContext, case: Case) -> tuple[str, ...]:
    """The GPUs a case's child gets: this worker's own, plus the next ones for a k-GPU case."""
    if not ctx.on_gpu:
        if case.gpus > 1 and ctx.gpu_class.name != CPU_CLASS:
            raise TrainperfError(f"{case.id} needs {case.gpus} GPUs and NVML sees none here")
        return ()
    assert ctx.device is not None
    placement = ctx.placement or Placement((ctx.device,))
    return placement.for_case(case.gpus)


FULL_BELOW_B = 1 << 20
"""A run folder's file system with less than this free is full for a child writing its files."""


def out_of_space(folder: Path, stderr_tail: str) -> bool:
    """Whether a failed child could not write its files: its stderr says so, or its folder's disk is full."""
    try:
        full = shutil.disk_usage(folder).free < FULL_BELOW_B
    except OSError:
        full = False
    return full or says_out_of_space(stderr_tail)


def waiting_line(label: str, what: str) -> str:
    """What a child waits for before it starts: a GPU that another case holds, or enough free GPUs."""
    return f"[trainperf] {label}: waiting for {what}"


def read_back(case: Case, out_dir: Path) -> dict[str, Any]:
    """What the child left: its result (every rank's memory and worst outcome folded in)."""
    child = read_child_result(out_dir)
    if family_of(case.family).launches_ranks(case.gpus):
        child = merge_ranks(child, out_dir, case.gpus)
    return child


def measure_child(
    ctx: LaunchContext, case: Case, child: dict[str, Any], launched: Launched
) -> RunMeasurement | None:
    """The run's figures from its steps and the GPUs' samples; None when it left nothing to measure."""
    samples, devices, idle = launched.samples, launched.devices, launched.idle
    if not (child.get("steps") or child.get("memory") or any(samples.values())):
        return None
    per_step = family_of(case.family).samples_per_step(case)
    if case.gpus > 1:
        return measure_gpus(child, samples, samples_per_step=per_step, idle_mem_b=dict(idle))
    first = samples[devices[0]] if devices and samples else []
    idle_b = idle[devices[0]] if devices else ctx.idle_mem_b
    return measure_run(child, first, samples_per_step=per_step, idle_mem_b=idle_b)


def run_info(
    ctx: LaunchContext,
    out_dir: Path,
    spec: ChildSpec,
    launched: Launched,
    child: dict[str, Any],
    outcome: Outcome,
    interpreter: Interpreter,
    environment: str,
    measured: RunRecord | None = None,
) -> RunRecord:
    """The run's record in its result (``runs``): exit, timeline, where it ran, its logs' folder, added
    to what its measurement recorded (``measured``)."""
    info = dataclasses.replace(measured) if measured is not None else RunRecord()
    info.dir = ctx.folder.relative(out_dir)
    info.returncode = launched.exit.returncode
    info.steps_requested = spec.steps
    info.wall_s = round(launched.exit.wall_s, 2)
    info.outcome = outcome.value
    info.timeline = child.get("timeline", {})
    info.environment = environment
    info.python = portable(interpreter.path, ctx.folder.root)
    info.data_steps = spec.data_steps or None
    info.memory_snapshot = MemorySnapshot.from_dict(child.get("memory_snapshot") or None)
    info.setup = FrameworkSetup.from_dict(child.get("setup") or None)  # a framework's start-up (verl)
    info.cached_inputs = CachedInput.read_all(child.get(CACHED_INPUTS)) or None  # a fresh runner's writes
    if outcome is not Outcome.OK:
        info.stderr_tail = launched.exit.stderr_tail[-3000:]
    if launched.devices:
        info.gpus, info.gpu_wait_s = list(launched.devices), round(launched.waited_s, 1)
        info.gpu_before = launched.before
    info.host_cpu, info.contamination = launched.watched.host_cpu, launched.watched.contamination
    return info


class ChildLauncher:
    """Starts the fresh children of a session's cases."""

    def __init__(self, context: LaunchContext) -> None:
        self.ctx = context

    def run(
        self,
        case: Case,
        steps: int,
        *,
        repeat: int,
        total: int,
        interpreter: Interpreter | None = None,
        plant_slowdown: float | None = None,
        bare: bool = False,
        window_after: int | None = None,
        settled_by: str | None = None,
        traced: bool | None = None,
        data_steps: int | None = None,
    ) -> ChildRun:
        """One fresh child of ``case`` in its environment's interpreter. ``plant_slowdown`` overrides the
        session's; ``bare``: no per-step hooks, no NVML sampling (the fidelity benchmark's reference),
        timed over the steps after ``window_after`` (default: the protocol's). ``settled_by``: the result
        id that settles this child's interruption record, when not the case's own (a cliff probe's is
        the search's). ``traced``: profile this run (a baseline's profile summary, a diagnosis) whatever
        --perf-trace says. ``data_steps``: a planned run's data (``run.step_count``)."""
        ctx = self.ctx
        interpreter = interpreter or interpreter_for(ctx, case)
        if interpreter is None:
            raise TrainperfError(missing_message(case.environment))
        out_dir = ctx.folder.new_child_dir(case.id, repeat)
        traced = (ctx.settings.trace or case.trace) if traced is None else traced
        window = family_of(case.family).trace_window
        trace_plan = (
            plan_trace(ctx.folder.trace_dir(case.id), out_dir.name, steps, window=window) if traced else None
        )
        spec = child_spec(
            ctx,
            case,
            steps,
            out_dir,
            plant_slowdown=plant_slowdown,
            bare=bare,
            window_after=window_after,
            trace=trace_plan if isinstance(trace_plan, TracePlan) else None,
            data_steps=data_steps,
        )
        spec.write(out_dir / SPEC_FILE)
        label = f"{case.id} run {repeat + 1}/{total}"
        launched, child, outcome, message, measurement, idle_after = self._launch_and_read(
            case, spec, out_dir, interpreter, label, settled_by
        )
        measured = measurement.info if measurement is not None else None
        info = run_info(ctx, out_dir, spec, launched, child, outcome, interpreter, case.environment, measured)
        if isinstance(trace_plan, TracePlan) and child.get("trace") is not None:
            info.trace = collect_trace(child["trace"], trace_plan, ctx.folder.root, measurement)
        elif isinstance(trace_plan, str):
            info.trace = TraceRecord(error=trace_plan)
        if launched.devices:
            info.idle_after = idle_after[0] if len(idle_after) == 1 else idle_after
        done = f", {len(child.get('steps') or [])}/{steps} steps"
        said = f" ({message})" if message else ""
        ctx.say(f"[trainperf] {label}: {outcome.value} after {launched.exit.wall_s:.0f}s{done}{said}")
        return ChildRun(outcome, message, child, measurement, info)

    def _launch_and_read(
        self,
        case: Case,
        spec: ChildSpec,
        out_dir: Path,
        interpreter: Interpreter,
        label: str,
        settled_by: str | None,
    ) -> tuple[Launched, dict[str, Any], Outcome, str, RunMeasurement | None, list[IdleCheck]]:
        """Hold the case's GPUs from the hygiene check before the launch to the idle check after it."""
        ctx = self.ctx
        wanted = case_devices(ctx, case)
        everyone = ctx.placement.devices if ctx.placement else wanted

        def on_wait(what: str) -> None:
            ctx.say(waiting_line(label, what))

        with reserve_for_case(wanted, everyone, on_wait=on_wait) as held:
            devices, waited = held.devices, held.waited_s
            before, dirty = check_before(ctx.settings, ctx.say, case, devices, label, spec.bare)
            idle = {d: idle_level(d, ctx.device, ctx.idle_mem_b) for d in devices}
            watch = RunWatch.for_run(devices, spec.bare)
            exit_, samples = self._launch(case, spec, out_dir, interpreter, devices, label, settled_by, watch)
            launched = Launched(exit_, samples, devices, waited, before, idle)
            launched.watched = watch.record(dirty, samples)
            child = read_back(case, out_dir)
            outcome, message = classify(
                exit_.returncode,
                exit_.timed_out,
                child,
                exit_.stderr_tail,
                ctx.settings.timeout,
                spec.steps,
                silent_s=exit_.silent_s,
            )
            if outcome is Outcome.CRASH and out_of_space(out_dir, exit_.stderr_tail):
                # Raised as the folder's own fault: the case is not judged and nothing is recorded
                # as the workload's crash; the cases before it stay, and --perf-resume goes on.
                raise OSError(errno.ENOSPC, f"the child could not write its files ({message})", str(out_dir))
            measurement = measure_child(ctx, case, child, launched)
            idle_after = [wait_idle(d, idle[d], ctx.say) for d in devices]
        return launched, child, outcome, message, measurement, idle_after

    def _launch(
        self,
        case: Case,
        spec: ChildSpec,
        out_dir: Path,
        interpreter: Interpreter,
        devices: tuple[str, ...],
        label: str,
        settled_by: str | None,
        watch: RunWatch,
    ) -> tuple[process.Exit, dict[str, list[Sample]]]:
        """Start the child with a sampler per GPU; the samples are written even when interrupted."""
        ctx = self.ctx
        command = child_command(interpreter.path, case.gpus, out_dir / SPEC_FILE, case.family)
        where = f"GPU {','.join(devices)}" if devices else "CPU"
        trace = TracePlan.from_spec(spec.trace)
        first = trace.first_profiled_step if trace is not None else 0
        window = f"step {first}" if first == spec.steps else f"steps {first}-{spec.steps}"
        traced = f", profiling {window}" if trace is not None else ""
        ctx.say(f"[trainperf] {label}: started ({spec.steps} steps, {where}{traced})")
        progress = Progress(ctx.say, label, out_dir / STEPS_FILE, spec.steps, ctx.settings.progress_interval)
        samplers = {d: Sampler(d) for d in devices} if not spec.bare else {}
        samples: dict[str, list[Sample]] = {}
        try:
            for sampler in samplers.values():
                sampler.start()
            env = child_env(",".join(devices) if devices else None, isolated=interpreter.isolated)
            if family_of(case.family).launches_ranks(case.gpus) and not devices:
                env["ACCELERATE_USE_CPU"] = "true"  # ranks on the CPU (gloo), e.g. the self-tests
            watch.begin()
            launched = time.monotonic()
            try:
                exit_ = process.run_child(
                    command,
                    log_dir=out_dir,
                    env=env,
                    timeout_s=ctx.settings.timeout,
                    on_tick=both(progress, *watch.ticks()),
                    silent_timeout_s=ctx.settings.silent_timeout,
                )
                watch.end()
            except KeyboardInterrupt:
                self._record_interruption(case, label, out_dir, spec.steps, launched, settled_by)
                raise
        finally:
            samples = {d: sampler.stop() for d, sampler in samplers.items()}
            # Written before anything else can fail, also when the run is being interrupted.
            for rank, device in enumerate(samples):
                if samples[device]:
                    write_samples(out_dir / rank_file(SAMPLES_FILE, rank), samples[device])
        return exit_, samples

    def _record_interruption(
        self, case: Case, label: str, out_dir: Path, steps: int, launched: float, settled_by: str | None
    ) -> None:
        ran_s, done = round(time.monotonic() - launched, 1), read_steps(out_dir / STEPS_FILE)
        where = self.ctx.folder.relative(out_dir)
        cut = interruption.cut_child(case.id, label, where, done, steps, ran_s, settled_by)
        interruption.record(self.ctx.folder.root, cut)
