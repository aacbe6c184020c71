"""Run one case end to end on the parent side: pre-flight, fresh children, sampling, result, verdict.

Data flows one way: case -> pre-flight -> child (workload) -> result file -> parent adds
sampler data -> compare with baseline -> verdict. The parent never imports torch.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from trainperf import interruption
from trainperf.baseline import BaselineStore
from trainperf.case import Case, Outcome
from trainperf.cliff import Probe, ProbeFailed, confirm_cliff, confirmed, find_cliff, validate_range
from trainperf.compare import CaseVerdict, Verdict, compare_case, timing_comparable
from trainperf.envs import Interpreter, missing_message, parse_overrides, resolve_interpreter
from trainperf.errors import TrainperfError
from trainperf.estimate import estimate_case
from trainperf.grpo import FAMILY as GRPO_FAMILY
from trainperf.grpo import preflight_grpo
from trainperf.hardware import CPU_CLASS, GpuClass
from trainperf.hygiene import check as check_gpus
from trainperf.launch import run_child
from trainperf.measure import RunMeasurement, measure_run, pool_runs
from trainperf.metrics import Metric, resolve_metric
from trainperf.monitor.nvml import Nvml, Sample, Sampler, write_samples
from trainperf.multi_gpu import child_command, launches_ranks, measure_gpus, merge_ranks, per_gpu_note
from trainperf.placement import Placement, reserve
from trainperf.references import Reference, compare_to_references
from trainperf.results import CaseResult, MetricValue, append_jsonl, load_result, save_result
from trainperf.settings import Settings
from trainperf.synth.model_configs import load_model_fixture
from trainperf.synth.profiles import load_profile
from trainperf.traces.collect import attach_diff, collect, plan_for
from trainperf.traces.plan import TracePlan
from trainperf.verl.memory import over_the_floor
from trainperf.workloads.child import OOM_MARKERS
from trainperf.workloads.protocol import (
    EXIT_OK,
    SAMPLES_FILE,
    SPEC_FILE,
    STEPS_FILE,
    rank_file,
    read_child_result,
    read_steps,
    write_json_atomic,
)

DEFAULT_STEPS = {"gpu": 40, "cpu": 16}
# A cliff probe runs two steps: the optimizer states are allocated in the first, so the second
# meets them together with a full forward and backward; a fit is not timed. The cliff is that of
# these first batches of the (deterministic) data. A third step cost ~30 s a probe near a cliff
# at batch 95 on an H200, and a search there did not finish in a 10-minute slot.
CLIFF_STEPS = 2
# Probes the estimate puts this far over the device are not launched (its error on the
# measured cases stayed within 12%).
ESTIMATE_SKIP_FACTOR = 1.25
IDLE_SLACK_B = 1 << 30
IDLE_WAIT_S = 60.0


@dataclass(slots=True)
class RunContext:
    """Session-wide facts every case needs."""

    settings: Settings
    run_dir: Path
    gpu_class: GpuClass
    device: str | None
    """NVML id (index or UUID) of the GPU cases run on; None on a machine without one."""
    idle_mem_b: int | None
    fingerprint: dict[str, Any]
    metrics: dict[str, Metric]
    baselines: BaselineStore
    references: list[Reference] = field(default_factory=list)
    emulated: str | None = None
    """Set under --perf-emulate: every child's memory is capped to ``gpu_class.memory_gib``."""
    say: Callable[[str], None] = print
    placement: Placement | None = None
    """The GPUs this pytest process may use and the one it owns (one xdist worker per GPU)."""


@dataclass(slots=True)
class ChildRun:
    """One fresh child's end: its outcome, what it wrote, what the parent measured around it."""

    outcome: Outcome
    message: str
    child: dict[str, Any]
    measurement: RunMeasurement | None
    info: dict[str, Any]


@dataclass(slots=True)
class CaseReport:
    case: Case
    result: CaseResult
    verdict: CaseVerdict
    baseline_written: Path | None = None
    notes: list[str] = field(default_factory=list)


def preflight(case: Case, python: str | None = None) -> None:
    """Problems found before any process starts: one line each, naming the fix. ``python`` is the
    children's interpreter, whose installed packages decide a family's rules (verl's version)."""
    if case.family == "rl_verl":
        from trainperf.verl.preflight import check_case

        if case.model_path and not Path(case.model_path, "config.json").is_file():
            raise TrainperfError(f"model_path {case.model_path} has no config.json: give a local checkpoint folder")
        if not case.model_path:
            load_model_fixture(case.model)
        check_case(case, python)
        return
    if not case.model_path:
        load_model_fixture(case.model)
    elif not Path(case.model_path, "config.json").is_file():
        raise TrainperfError(f"model_path {case.model_path} has no config.json: give a local checkpoint folder")
    if case.family == GRPO_FAMILY:
        preflight_grpo(case)  # fixed-length synthetic prompts: no length profile
    elif not case.dataset_path:
        load_profile(case.profile)
    elif not Path(case.dataset_path).is_file():
        raise TrainperfError(f"dataset_path {case.dataset_path} does not exist: give a local .jsonl/.json/.parquet file")


def child_env(device: str | None, *, isolated: bool = False) -> dict[str, str]:
    """The child's environment variables. ``isolated``: the interpreter is a workload environment
    of its own, so the suite's PYTHONPATH (which may carry another stack) is not passed on."""
    env = dict(os.environ)
    if isolated:
        env.pop("PYTHONPATH", None)
    env.update(
        PYTHONUNBUFFERED="1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_DATASETS_DISABLE_PROGRESS_BARS="1",
        TOKENIZERS_PARALLELISM="false",
        CUDA_VISIBLE_DEVICES=device if device is not None else "",
        # NVML numbers GPUs in PCI bus order, CUDA by default fastest first: without this, the
        # child's GPU "1" need not be the GPU the parent samples as 1.
        CUDA_DEVICE_ORDER="PCI_BUS_ID",
    )
    # The child imports this very trainperf, whatever interpreter runs it.
    src = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    return env


class CaseRunner:
    def __init__(self, context: RunContext) -> None:
        self.ctx = context

    @property
    def on_gpu(self) -> bool:
        return self.ctx.gpu_class.name != CPU_CLASS and self.ctx.device is not None

    def run(self, case: Case) -> CaseReport:
        ctx = self.ctx
        result_path = ctx.run_dir / "results" / f"{case.id}.json"
        baseline = ctx.baselines.load(ctx.gpu_class.name, case.id)
        notes: list[str] = []
        if ctx.settings.resume is not None and result_path.is_file():
            result = load_result(result_path)
            notes.append("resumed: judged from the stored result, not re-run")
            verdict = self._judge(case, result, baseline)
        else:
            steps = self._steps(case, baseline)
            result = self._new_result(case)
            if self.on_gpu:
                estimated = estimate_case(case, steps)
                result.estimate = estimated.to_dict() if estimated else None
                if over := over_the_floor(case, case.memory_cap_gib or ctx.gpu_class.memory_gib):
                    notes.append(f"expected to run out of memory at any micro-batch: {over}")
            measurements: list[RunMeasurement] = []
            self._add_runs(case, steps, result, measurements, self._repeats())
            verdict = self._judge(case, result, baseline)
            if self._needs_confirmation(verdict) and ctx.settings.confirm and not ctx.settings.update_baselines:
                first = len(result.runs)
                ctx.say(
                    f"[trainperf] {case.id}: timing regression in {first} run(s); confirming with "
                    f"{ctx.settings.confirm} fresh run(s) (--perf-confirm)"
                )
                self._add_runs(case, steps, result, measurements, ctx.settings.confirm, purpose="confirmation")
                verdict = self._judge(case, result, baseline)
                held = "confirmed" if verdict.verdict is Verdict.REGRESSED else "not confirmed"
                notes.append(
                    f"timing regression of the first {first} run(s) {held} by {ctx.settings.confirm} more fresh "
                    "run(s); steps are compared through their median across all runs"
                )
        notes += gpu_notes(result.runs)
        result.verdict = verdict.to_dict()
        no_diff = attach_diff(result.verdict, result.trace, baseline.trace if baseline else None)
        if no_diff:
            notes.append(no_diff)
        result.references = compare_to_references(result, case, ctx.references) or None
        for ref in result.references or []:
            notes.append(
                f"vs published: {ref['metric']} {ref['measured']:,.4g} = {ref['ratio']:.2f}x {ref['source']}'s "
                f"{ref['published']:,.4g} (provisional, never gates)"
            )
        if notes:
            result.verdict["notes"] = notes
        save_result(result_path, result)
        append_jsonl(ctx.run_dir / "results.jsonl", {"case_id": case.id, "outcome": result.outcome, "verdict": verdict.verdict.value})
        report = CaseReport(case, result, verdict, notes=notes)
        if ctx.settings.update_baselines:
            self._update_baseline(report)
        return report

    def run_cliff(self, case: Case, axis: str, low: int, high: int) -> CaseReport:
        """Find the OOM cliff of ``case`` along ``axis`` and gate it against the stored cliff."""
        ctx = self.ctx
        validate_range(axis, low, high)
        cliff_id = f"{case.id}-cliff-{axis}"
        baseline = ctx.baselines.load(ctx.gpu_class.name, cliff_id)
        steps = case.steps or CLIFF_STEPS
        limit_gib = case.memory_cap_gib or ctx.gpu_class.memory_gib

        # Every probe is written down as it ends; with --perf-resume the search replays them in
        # order (it is deterministic given the outcomes) and launches only what is still unknown,
        # so a search cut short by a time limit loses nothing.
        probes_path = ctx.run_dir / "results" / f"{cliff_id}.probes.jsonl"
        recorded = _read_probes(probes_path) if ctx.settings.resume is not None else []
        probes_path.parent.mkdir(parents=True, exist_ok=True)
        if not recorded:
            probes_path.write_text("")
        launches = 0
        started = time.monotonic()

        def probe(value: int) -> Probe:
            nonlocal launches
            if recorded and recorded[0].value == value:
                replayed = recorded.pop(0)
                ctx.say(f"[trainperf] {cliff_id}: {axis}={value} {replayed.outcome} (recorded, not re-run)")
                return replayed
            recorded.clear()  # the search left the recorded path: launch from here on
            probe_case = case.replace(**{axis: value})
            probed = self._new_result(probe_case)
            self._add_runs(probe_case, steps, probed, [], 1, purpose="cliff-probe", settled_by=cliff_id)
            launches += 1
            ctx.say(
                f"[trainperf] {cliff_id}: probe {launches}, {axis}={value}: "
                f"{'fits' if probed.outcome == Outcome.OK.value else probed.outcome}, {time.monotonic() - started:.0f}s so far"
            )
            result = Probe(value, probed.outcome == Outcome.OK.value, probed.outcome, probed.message[:300])
            append_jsonl(probes_path, asdict(result))
            return result

        def predicted_oom(value: int) -> str | None:
            if not self.on_gpu:
                return None
            probe_case = case.replace(**{axis: value})
            if over := over_the_floor(probe_case, limit_gib):
                return over  # a lower bound over the device: no launch can fit (confirmations still run)
            estimated = estimate_case(probe_case, steps)
            if estimated and estimated.total_gib > ESTIMATE_SKIP_FACTOR * limit_gib:
                return f"estimate {estimated.total_gib:.0f} GiB > {ESTIMATE_SKIP_FACTOR} x {limit_gib:.0f} GiB"
            return None

        result = self._new_result(case)
        result.case_id = cliff_id
        ctx.say(f"[trainperf] {cliff_id}: searching {axis} in {low}..{high}")
        try:
            interpreter = self._interpreter(case)
            cliff = find_cliff(
                axis,
                low,
                high,
                probe,
                predicted_oom=predicted_oom,
                rejected=lambda value: self._rejection(case.replace(**{axis: value}), interpreter),
            )
            checks = confirm_cliff(cliff, probe)
        except ProbeFailed as exc:
            result.outcome, result.message = Outcome.CRASH.value, f"cliff search stopped: {exc}"
            verdict = self._judge(case, result, baseline)
        else:
            result.cliff = cliff.to_dict()
            result.cliff["confirmation"] = [asdict(check) for check in checks]
            result.cliff["confirmed"] = confirmed(cliff, checks)
            result.metrics = {f"cliff_{axis}": MetricValue(float(cliff.largest_fit or 0), "", per_run=[float(cliff.largest_fit or 0)])}
            verdict = self._judge(case, result, baseline)
            if not result.cliff["confirmed"] and verdict.verdict in (Verdict.PASS, Verdict.NEW, Verdict.IMPROVED):
                verdict.verdict, verdict.fails = Verdict.NOISY, ctx.settings.strict
                verdict.reason = f"cliff not confirmed by fresh runs at its edges ({cliff.describe()})"
        result.verdict = verdict.to_dict()
        save_result(ctx.run_dir / "results" / f"{cliff_id}.json", result)
        append_jsonl(ctx.run_dir / "results.jsonl", {"case_id": cliff_id, "outcome": result.outcome, "verdict": verdict.verdict.value})
        report = CaseReport(case, result, verdict)
        if result.cliff:
            skipped = sum(1 for p in result.cliff["probes"] if p["outcome"] == "skipped-by-estimate")
            report.notes.append(
                f"{cliff.describe()}; {result.cliff['launched']} launches + {len(checks)} confirmation runs, "
                f"{skipped} probes skipped by the estimate; confirmed: {'yes' if result.cliff['confirmed'] else 'NO'}"
            )
        if ctx.settings.update_baselines:
            self._update_baseline(report)
        return report

    def _judge(self, case: Case, result: CaseResult, baseline: CaseResult | None) -> CaseVerdict:
        comparable, why = self._timing_comparable(baseline, result)
        return compare_case(
            result,
            baseline,
            self.ctx.metrics,
            expectation=case.expectation(self.ctx.gpu_class.name),
            timing_comparable=comparable,
            strict=self.ctx.settings.strict,
            timing_note=why,
        )

    def _repeats(self) -> int:
        """Fresh runs per case: a baseline is pooled from several, so that no single process that
        happened to run fast or slow becomes the reference every later run is judged by."""
        settings = self.ctx.settings
        return max(settings.repeats, settings.baseline_repeats) if settings.update_baselines else settings.repeats

    def _needs_confirmation(self, verdict: CaseVerdict) -> bool:
        """A regression of timing metrics alone: one process can be slow as a whole (host load,
        a noisy neighbour), which no per-step statistic inside it can tell from a regression."""
        if verdict.verdict is not Verdict.REGRESSED:
            return False
        regressed = [m for m in verdict.metrics if m.gated and m.verdict is Verdict.REGRESSED]
        resolved = [resolve_metric(self.ctx.metrics, m.metric) for m in regressed]
        return bool(regressed) and all(metric is not None and metric.timing for metric in resolved)

    def _timing_comparable(self, baseline: CaseResult | None, result: CaseResult) -> tuple[bool, str]:
        if baseline is None:
            return result.emulated is None, f"the result is emulated ({result.emulated})" if result.emulated else ""
        return timing_comparable(baseline, result, self.ctx.gpu_class.timing_comparable_only_on_same)

    def _update_baseline(self, report: CaseReport) -> None:
        result = report.result
        if result.outcome not in (Outcome.OK.value, Outcome.OOM.value, Outcome.CONFIG_ERROR.value):
            report.notes.append(f"baseline not written: outcome {result.outcome}")
            return
        if result.planted_slowdown or result.emulated:
            report.notes.append("baseline not written: planted slowdown or emulated run")
            return
        source = f"{self.ctx.run_dir.name}: {' '.join(sys.argv)}"
        report.baseline_written = self.ctx.baselines.save(result, source)

    # -- measuring -------------------------------------------------------------------------

    def _steps(self, case: Case, baseline: CaseResult | None) -> int:
        """Steps per child: the case's own, else --perf-steps, else the baseline's (like for like), else the default."""
        if case.steps or self.ctx.settings.steps:
            return int(case.steps or self.ctx.settings.steps)  # type: ignore[arg-type]
        recorded = [run.get("steps_requested") for run in baseline.runs] if baseline else []
        if recorded and recorded[0]:
            return int(recorded[0])
        return DEFAULT_STEPS["gpu" if self.on_gpu else "cpu"]

    def _new_result(self, case: Case) -> CaseResult:
        ctx = self.ctx
        return CaseResult(
            case_id=case.id,
            case=case.to_dict(),
            gpu_class=ctx.gpu_class.name,
            outcome=Outcome.OK.value,
            fingerprint=dict(ctx.fingerprint),
            planted_slowdown=ctx.settings.plant_slowdown,
            emulated=ctx.emulated,
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )

    def _rejection(self, case: Case, interpreter: Interpreter | None) -> str | None:
        """Why pre-flight refuses ``case`` (a config error, no GPU time spent), or None."""
        try:
            # The rules are those of the verl installed where the case will run: its environment's
            # interpreter, not the suite's (which has no verl and would make pre-flight assume one).
            preflight(case, interpreter.path if interpreter else self.ctx.settings.python)
        except TrainperfError as exc:
            return str(exc)
        return None

    def _add_runs(
        self,
        case: Case,
        steps: int,
        result: CaseResult,
        measurements: list[RunMeasurement],
        count: int,
        purpose: str = "measurement",
        settled_by: str | None = None,
    ) -> None:
        """Run ``count`` more fresh children and pool them into ``result``; stop at the first failure.
        ``settled_by``: see ``run_child``."""
        interpreter = self._interpreter(case)
        rejection = self._rejection(case, interpreter)
        if rejection is not None:
            result.outcome, result.message = Outcome.CONFIG_ERROR.value, rejection
            return
        if interpreter is None:
            result.outcome, result.message = Outcome.SKIPPED.value, missing_message(case.environment)
            return
        total = len(result.runs) + count
        for _ in range(count):
            run = self.run_child(
                case, steps, repeat=len(result.runs), total=total, interpreter=interpreter, settled_by=settled_by
            )
            outcome, message, child, measurement, info = run.outcome, run.message, run.child, run.measurement, run.info
            info["purpose"] = purpose
            result.runs.append(info)
            if result.trace is None and info.get("trace", {}).get("summary"):
                result.trace = info["trace"]
            if child.get("effective_config") and not result.effective_config:
                result.effective_config = child["effective_config"]
                result.fingerprint.update(child.get("versions", {}))
                if child.get("device_name"):
                    result.fingerprint["child_device_name"] = child["device_name"]
            if outcome is not Outcome.OK:
                result.outcome, result.message = outcome.value, message
                if measurement is not None:  # keep what was measured up to the failure (memory at OOM)
                    result.metrics = pool_runs([*measurements, measurement])
                return
            assert measurement is not None
            measurements.append(measurement)
        result.metrics = pool_runs(measurements)

    def _interpreter(self, case: Case) -> Interpreter | None:
        settings = self.ctx.settings
        return resolve_interpreter(
            case.environment, perf_python=settings.python, overrides=parse_overrides(settings.env), environ=os.environ
        )

    def run_child(
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
    ) -> ChildRun:
        """One fresh child of ``case`` in its environment's interpreter. ``plant_slowdown`` overrides
        the session's; ``bare`` runs the training loop without the harness's per-step hooks and
        without NVML sampling (the fidelity benchmark's reference for the harness's own overhead),
        timed over the steps after ``window_after`` (default: the protocol's). ``settled_by``: the
        result id that settles this child's interruption record, when not the case's own (a
        cliff probe's is the search's)."""
        if interpreter is None:
            interpreter = self._interpreter(case)
            if interpreter is None:
                raise TrainperfError(missing_message(case.environment))
        ctx = self.ctx
        out_dir = ctx.run_dir / "cases" / case.id / f"r{repeat + 1}"
        while (out_dir / SPEC_FILE).exists():  # the same case probed again (cliff confirmation)
            out_dir = out_dir.with_name(f"r{int(out_dir.name[1:]) + 1}")
        out_dir.mkdir(parents=True, exist_ok=True)
        spec = {
            "case": case.to_dict(),
            "steps": steps,
            "device": "cuda:0" if self.on_gpu else "cpu",
            "seed": 0,
            "out_dir": str(out_dir),
            "plant_slowdown": ctx.settings.plant_slowdown if plant_slowdown is None else plant_slowdown,
            "memory_cap_gib": ctx.gpu_class.memory_gib if ctx.emulated else None,
            "bare": bare,
            **({"bare_window_after": window_after} if bare and window_after is not None else {}),
        }
        trace_plan = plan_for(ctx.run_dir, case.id, out_dir.name, steps) if ctx.settings.trace or case.trace else None
        if isinstance(trace_plan, TracePlan):
            spec["trace"] = trace_plan.to_spec()
        write_json_atomic(out_dir / SPEC_FILE, spec)
        label = f"{case.id} run {repeat + 1}/{total}"
        devices = self._case_devices(case)
        everyone = ctx.placement.devices if ctx.placement else devices
        with reserve(devices, everyone, on_wait=lambda gpu: ctx.say(f"[trainperf] {label}: waiting for GPU {gpu}")) as waited:
            before = self._check_gpus(case, devices, label)
            idle = {d: self._idle_level(d) for d in devices}
            command = child_command(interpreter.path, case.gpus, out_dir / SPEC_FILE, case.family)
            where = f"GPU {','.join(devices)}" if devices else "CPU"
            traced = f", profiling steps {trace_plan.first_profiled_step}-{steps}" if isinstance(trace_plan, TracePlan) else ""
            ctx.say(f"[trainperf] {label}: started ({steps} steps, {where}{traced})")
            progress = _Progress(ctx.say, label, out_dir / STEPS_FILE, steps, ctx.settings.progress_interval)
            samplers = {d: Sampler(d) for d in devices} if not bare else {}
            samples: dict[str, list[Sample]] = {}
            try:
                for sampler in samplers.values():
                    sampler.start()
                env = child_env(",".join(devices) if devices else None, isolated=interpreter.isolated)
                if launches_ranks(case.family, case.gpus) and not devices:  # ranks on the CPU (gloo), e.g. the self-tests
                    env["ACCELERATE_USE_CPU"] = "true"
                launched = time.monotonic()
                try:
                    exit_ = run_child(command, log_dir=out_dir, env=env, timeout_s=ctx.settings.timeout, on_tick=progress)
                except KeyboardInterrupt:
                    steps_so_far = read_steps(out_dir / STEPS_FILE)
                    cut = interruption.Interruption(
                        case.id, label, str(out_dir.relative_to(ctx.run_dir)), len(steps_so_far), steps,
                        ran_s=round(time.monotonic() - launched, 1), needed_more_s=interruption.remaining_s(steps_so_far, steps),
                        settled_by=settled_by,
                    )  # fmt: skip
                    interruption.record(ctx.run_dir, cut)
                    raise
            finally:
                samples = {d: sampler.stop() for d, sampler in samplers.items()}
                # Written before anything else can fail, also when the run is being interrupted.
                for rank, device in enumerate(samples):
                    if samples[device]:
                        write_samples(out_dir / rank_file(SAMPLES_FILE, rank), samples[device])
            child = read_child_result(out_dir)
            if launches_ranks(case.family, case.gpus):
                child = merge_ranks(child, out_dir, case.gpus)
            outcome, message = classify(exit_.returncode, exit_.timed_out, child, exit_.stderr_tail, ctx.settings.timeout, steps)
            measurement = None
            if child.get("steps") or child.get("memory") or any(samples.values()):
                if case.gpus > 1:
                    measurement = measure_gpus(child, samples, samples_per_step=case.samples_per_step, idle_mem_b=dict(idle))
                else:
                    first = samples[devices[0]] if devices and samples else []
                    idle_b = idle[devices[0]] if devices else ctx.idle_mem_b
                    measurement = measure_run(child, first, samples_per_step=case.samples_per_step, idle_mem_b=idle_b)
            idle_after = [self._wait_idle(d, idle[d]) for d in devices]
        info: dict[str, Any] = {
            "dir": str(out_dir.relative_to(ctx.run_dir)),
            "returncode": exit_.returncode,
            "steps_requested": steps,
            "wall_s": round(exit_.wall_s, 2),
            "outcome": outcome.value,
            "timeline": child.get("timeline", {}),
            "environment": case.environment,
            "python": interpreter.path,
        }
        if measurement is not None:
            info.update(measurement.info)
        if isinstance(trace_plan, TracePlan) and child.get("trace") is not None:
            info["trace"] = collect(child["trace"], trace_plan, ctx.run_dir)
        elif isinstance(trace_plan, str):
            info["trace"] = {"error": trace_plan}
        if child.get("memory_snapshot"):
            info["memory_snapshot"] = child["memory_snapshot"]
        if outcome is not Outcome.OK:
            info["stderr_tail"] = exit_.stderr_tail[-3000:]
        if devices:
            info.update(gpus=list(devices), gpu_wait_s=round(waited, 1), gpu_before=before)
            info["idle_after"] = idle_after[0] if len(idle_after) == 1 else idle_after
        done = f", {len(child.get('steps') or [])}/{steps} steps"
        ctx.say(f"[trainperf] {label}: {outcome.value} after {exit_.wall_s:.0f}s{done}" + (f" ({message})" if message else ""))
        return ChildRun(outcome, message, child, measurement, info)

    def _case_devices(self, case: Case) -> tuple[str, ...]:
        """The GPUs a case's child gets: this worker's own, plus the next ones for a k-GPU case."""
        if not self.on_gpu:
            if case.gpus > 1 and self.ctx.gpu_class.name != CPU_CLASS:
                raise TrainperfError(f"{case.id} needs {case.gpus} GPUs and NVML sees none here")
            return ()
        assert self.ctx.device is not None
        placement = self.ctx.placement or Placement((self.ctx.device,))
        return placement.for_case(case.gpus)

    def _check_gpus(self, case: Case, devices: tuple[str, ...], label: str) -> dict[str, Any] | None:
        """Runner hygiene before a child: foreign processes and throttling, said, stored, and with
        --perf-require-idle-gpu an error."""
        if not devices:
            return None
        hygiene = check_gpus(devices)
        for problem in hygiene.problems():
            self.ctx.say(f"[trainperf] {label}: {problem}")
        if not hygiene.clean and self.ctx.settings.require_idle_gpu:
            raise TrainperfError(
                f"{case.id}: {'; '.join(hygiene.problems())} (--perf-require-idle-gpu): free the GPU or run without the option"
            )
        return hygiene.to_dict()

    def _idle_level(self, device: str) -> int:
        """Device memory in use with no case on it: read now (each worker's or case's own GPU), and
        for the session's GPU never above the session's reading, so that memory a previous case
        left behind is not subtracted from this one's peak."""
        now = int(Nvml.sample(Nvml.handle(device)).mem_used_b)
        session = self.ctx.idle_mem_b if device == self.ctx.device else None
        return now if session is None else min(now, session)

    def _wait_idle(self, device: str, idle_b: int | None) -> dict[str, Any]:
        """Wait until the GPU's memory is back near its level before the case, and report if it is not."""
        handle = Nvml.handle(device)
        idle = (idle_b or 0) + IDLE_SLACK_B
        started = time.monotonic()
        used = Nvml.sample(handle).mem_used_b
        while used > idle and time.monotonic() - started < IDLE_WAIT_S:
            time.sleep(0.5)
            used = Nvml.sample(handle).mem_used_b
        back = used <= idle
        if not back:
            self.ctx.say(
                f"[trainperf] warning: GPU {device} memory still {used / 2**30:.1f} GiB in use {IDLE_WAIT_S:.0f}s after "
                "the case ended; the next case may be disturbed"
            )
        return {"idle": back, "mem_used_gib": round(used / 2**30, 2), "waited_s": round(time.monotonic() - started, 1)}


def gpu_notes(runs: list[dict[str, Any]]) -> list[str]:
    """Report lines from the runs' GPU records: what was wrong before a run, and per-GPU figures."""
    notes = []
    for number, run in enumerate(runs, 1):
        before = run.get("gpu_before") or {}
        for device, procs in (before.get("foreign_processes") or {}).items():
            pids = ", ".join(str(pid) for pid, _ in procs)
            notes.append(f"run {number}: GPU {device} held by foreign process(es) {pids} before it started (noisy neighbour?)")
        for device, reasons in (before.get("throttled") or {}).items():
            notes.append(f"run {number}: GPU {device} throttled before it started ({', '.join(reasons)})")
    per_gpu = per_gpu_note(runs)
    if per_gpu:
        notes.append(per_gpu)
    return notes


def _read_probes(path: Path) -> list[Probe]:
    """Probes a cut-short search wrote down; a torn last line is dropped."""
    import json

    probes = []
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                probes.append(Probe(**json.loads(line)))
            except (ValueError, TypeError):
                break
    return probes


def classify(
    returncode: int | None, timed_out: bool, child: dict[str, Any], stderr_tail: str, timeout_s: float,
    steps_requested: int = 0,
) -> tuple[Outcome, str]:  # fmt: skip
    """The outcome of one child from its result file, exit status and stderr."""
    if timed_out:
        advice = timeout_advice(child.get("steps") or [], steps_requested, timeout_s)
        return Outcome.TIMEOUT, f"killed after the {timeout_s:.0f}s limit (--perf-timeout){advice}"
    reported = child.get("outcome")
    if reported is not None:
        outcome = Outcome(reported)
        if outcome is Outcome.OK and returncode != EXIT_OK:
            return Outcome.CRASH, f"exit status {returncode} after reporting success"
        return outcome, str(child.get("message", ""))
    lowered = stderr_tail.lower()
    if any(marker in lowered for marker in OOM_MARKERS):
        return Outcome.OOM, "out of memory (from stderr; the child wrote no result)"
    if returncode is not None and returncode < 0:
        return Outcome.CRASH, f"killed by signal {-returncode} (host out of memory if 9?); stderr: {_last_line(stderr_tail)}"
    return Outcome.CRASH, f"exit status {returncode} without a result; stderr: {_last_line(stderr_tail)}"


def timeout_advice(steps: list[dict[str, Any]], requested: int, timeout_s: float) -> str:
    """What limit the cut run needed, from its own pace: the set-up and the steps it did, plus
    its remaining steps at their median time, a fifth more, in whole minutes. A verl case spends
    5-7 minutes before its first step, which a limit sized from step times alone misses."""
    more = interruption.remaining_s(steps, requested)
    if more is None:
        return ": cut before its first step ended (set-up, or a first step slower than the limit); give a longer one"
    if more == 0:
        return ""
    needed = timeout_s + more
    suggest = math.ceil(needed * 1.2 / 60) * 60
    return f" at step {len(steps)}/{requested}; at its pace the run needs about {needed:.0f}s: give --perf-timeout {suggest} or more"


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(empty)"


class _Progress:
    """Prints ``step k/n`` of a running child every ``interval_s``, never more often."""

    def __init__(self, say: Callable[[str], None], label: str, steps_path: Path, total: int, interval_s: float) -> None:
        self.say, self.label, self.path, self.total, self.interval = say, label, steps_path, total, interval_s
        self.next_at = interval_s

    def __call__(self, elapsed: float) -> None:
        if self.interval <= 0 or elapsed < self.next_at:
            return
        self.next_at = elapsed + self.interval
        done = 0
        if self.path.is_file():
            with open(self.path, "rb") as handle:
                done = sum(1 for _ in handle)
        phase = f"step {done}/{self.total}" if done else "setting up (model build, first step)"
        self.say(f"[trainperf] {self.label}: {phase}, {elapsed:.0f}s")


__all__ = ["CaseReport", "CaseRunner", "ChildRun", "RunContext", "Verdict", "classify", "preflight"]
