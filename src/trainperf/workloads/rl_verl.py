"""The verl family's child: hermetic inputs, then ``python -m verl.trainer.main_ppo`` with the
case's Hydra overrides, its file-logger JSONL tailed into ``steps.jsonl`` as each step lands.

verl runs in its own session with a Ray of its own (``verl.environment``: its own folder, no
cluster's address); whatever way it ends, its process group is killed, then every process left in
its session (``verl.teardown``: Ray's workers sit in groups of their own), so no worker keeps GPU
memory into the next case and no other Ray on the host is touched: verl cases on other GPUs of the
host run beside it. A SIGTERM from the parent (its timeout, Ctrl-C) does the same before this
process exits. A failed run is classified from verl's log (``trainperf.workloads.verl.classify``):
OOM in a Ray worker or at the engine's start-up, a dead worker, anything else; its Ray's folder
(Ray's own logs) is kept and named.

Steps are verl's own (``timing_s/step``, phases, ``perf/throughput``): verl times them in its
driver. ``t_end`` is when the line was read here (polled every 0.5 s), which places the
energy window within half a second of the step edges.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from trainperf.case import Case, Outcome
from trainperf.families.rl_verl.knobs import VerlKnobs, knobs_of
from trainperf.families.rl_verl.preflight import Normalised, check
from trainperf.families.rl_verl.versions import RuleSet, rule_set
from trainperf.traces.plant import parse_plant
from trainperf.workloads.effective import library_versions
from trainperf.workloads.protocol import CACHED_INPUTS, CachedInput, ChildSpec, SkipCase
from trainperf.workloads.recorder import StepRecorder
from trainperf.workloads.verl import plant_hook
from trainperf.workloads.verl.classify import classify_failure
from trainperf.workloads.verl.environment import ray_home, verl_environment
from trainperf.workloads.verl.kernel_folder import KernelFolder, Window, collect
from trainperf.workloads.verl.lengths import Lengths, length_mismatch, measured_lengths
from trainperf.workloads.verl.logs import LOG_FILE, METRICS_FILE, parse_jsonl_line, step_record
from trainperf.workloads.verl.overrides import (
    Attention,
    Inputs,
    attention_overrides,
    dataset_rows,
    merge_overrides,
    overrides,
)
from trainperf.workloads.verl.profile import place_trace, profiler_overrides, supports_profiling
from trainperf.workloads.verl.setup import describe_setup, setup_breakdown
from trainperf.workloads.verl.teardown import Sweep, end_session

POLL_S = 0.5
VERSION_PACKAGES = (
    "verl",
    "vllm",
    "sglang",
    "ray",
    "torch",
    "transformers",
    "flash-attn",
    "flashinfer-python",
)
GIB = 2**30


class VerlOutOfMemory(MemoryError):
    """verl ran out of memory somewhere in its Ray workers (the message says where)."""


class _Terminated(Exception):
    pass


def _on_sigterm(signum: int, frame: Any) -> None:
    raise _Terminated()


def require_machine(gpus: int, device: str) -> None:
    """Skip, with the reason, where verl cannot run: no verl (ModuleNotFoundError), too few GPUs."""
    if importlib.util.find_spec("verl") is None:
        raise ModuleNotFoundError("No module named 'verl'", name="verl")
    if not device.startswith("cuda"):
        raise SkipCase("verl needs NVIDIA GPUs (its rollout engines are CUDA-only); this run is on the CPU")
    import torch

    visible = torch.cuda.device_count()
    if visible < gpus:
        raise SkipCase(
            f"the case needs {gpus} GPUs and {visible} is visible (CUDA_VISIBLE_DEVICES="
            f"{os.environ.get('CUDA_VISIBLE_DEVICES', '')!r}); run it where the suite hands a case {gpus} "
            "devices"
        )


def refuse_unsupported(spec: ChildSpec) -> None:
    """Options that act inside this process, where verl's work does not happen: skipped, not faked."""
    if spec.plant_slowdown > 0:
        raise SkipCase(
            "--perf-plant-slowdown acts at step edges in this process; verl's steps run in its Ray workers"
        )
    kind = parse_plant(spec.plant)[0] if spec.plant else None
    if kind and kind not in plant_hook.KINDS:
        raise SkipCase(
            f"--perf-plant {kind} acts at step edges in this process; verl's steps run in its Ray workers "
            f"(planted there: {', '.join(plant_hook.KINDS)})"
        )
    if spec.memory_cap_gib or spec.case.get("memory_cap_gib"):
        raise SkipCase(
            "memory caps (--perf-emulate, memory_cap_gib) act on this process's allocator, not on verl's "
            "workers"
        )


def prepare_inputs(
    case: Case, work: Path, rows: int, prompt_len: int, seed: int
) -> tuple[Inputs, dict[str, Any]]:
    """The model folder, the parquet and the reward file; a case's local paths replace the synthetic ones."""
    from transformers import AutoTokenizer

    from trainperf.synth.cache import NotEnoughDisk
    from trainperf.synth.rl_inputs import ensure_model_folder, write_gsm8k_parquet
    from trainperf.workloads import verl_reward

    info: dict[str, Any] = {}
    cached: tuple[CachedInput, ...] = ()
    started = time.monotonic()
    if case.model_path:
        model_dir = tokenizer_dir = Path(case.model_path)
        info["model_source"] = f"local:{case.model_path}"
    else:
        try:
            folder, entry = ensure_model_folder(
                case.model, seed=seed, say=lambda line: print(line, flush=True)
            )
        except NotEnoughDisk as exc:  # cannot run on this machine as it is: say why
            raise SkipCase(str(exc)) from None
        print(
            f"[trainperf] synthetic model {folder.path} ({entry.state()}, {folder.parameters / 1e9:.2f}B "
            "parameters)",
            flush=True,
        )
        model_dir, tokenizer_dir = folder.path, folder.tokenizer
        info.update(
            total_params=folder.parameters, trainable_params=folder.parameters, weight_shards=folder.shards
        )
        info.update(model_source=f"synthetic:{folder.path.name}", model_cache_hit=entry.hit)
        cached = (entry.record(),)
    info["model_build_s"] = round(time.monotonic() - started, 1)
    if case.dataset_path:
        parquet = Path(case.dataset_path)
    else:
        parquet = work / "train.parquet"
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)  # as verl loads it (tokenizer_path)
        info["prompt_words"] = write_gsm8k_parquet(
            parquet, tokenizer, rows=rows, prompt_len=prompt_len, seed=seed
        )
    reward = Path(verl_reward.__file__).resolve()
    inputs = Inputs(
        model_dir=model_dir,
        tokenizer_dir=tokenizer_dir,
        train_parquet=parquet,
        reward_file=reward,
        work_dir=work,
        experiment=case.id,
        cached=cached,
    )
    return inputs, info


def _kill_group(process: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue


class _Tail:
    """New complete lines of a growing file."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.partial = path, 0, b""

    def lines(self) -> list[str]:
        if not self.path.is_file():
            return []
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            chunk = handle.read()
        self.offset += len(chunk)
        data = self.partial + chunk
        *complete, self.partial = data.split(b"\n")
        return [line.decode("utf-8", "replace") for line in complete]


def run(spec: ChildSpec, recorder: StepRecorder) -> dict[str, Any]:
    case = Case.from_dict(spec.case)
    knobs = knobs_of(case)
    require_machine(knobs.gpus, spec.device)
    refuse_unsupported(spec)
    version = importlib.metadata.version("verl")
    rules = rule_set(version)
    normalised, problem = check(knobs, rules)
    if problem:  # the parent's pre-flight stops these; a child started by hand must not spend GPU time
        raise ValueError(f"verl {version} would reject this case: {problem}")
    attention = attention_overrides(
        knobs, flash_attn_installed=importlib.util.find_spec("flash_attn") is not None
    )
    steps = spec.steps
    out_dir = Path(spec.out_dir)
    work = out_dir / "verl"
    work.mkdir(parents=True, exist_ok=True)
    timeline: dict[str, float] = {"start": time.time()}
    inputs, info = prepare_inputs(case, work, dataset_rows(knobs, steps), knobs.prompt_len, spec.seed)
    # TRAINPERF_VERL_OVERRIDES: extra Hydra overrides for a runner's stack, applied last;
    # everything used is written to overrides.txt.
    extra = shlex.split(os.environ.get("TRAINPERF_VERL_OVERRIDES", ""))
    plan, profiling = recorder.trace_plan, recorder.trace_plan is not None and supports_profiling(version)
    if plan is not None and profiling:  # verl's own per-role profiler on the last step (verl.profile)
        extra = [*profiler_overrides(plan, work / "profile", critic=knobs.algorithm == "ppo"), *extra]
    if plan is not None and not profiling:  # no switches: no step is profiled, every step is timed
        recorder.trace_plan = None
    args = merge_overrides(overrides(knobs, inputs, steps=steps, rules=rules), [*attention.overrides, *extra])
    (work / "overrides.txt").write_text("\n".join(args) + "\n")
    ray_folder = ray_home()
    kernels = _kernel_window(spec, work, profiling=plan is not None)
    env = verl_environment(
        out_dir / METRICS_FILE, work, attention, ray_folder=ray_folder, plant=spec.plant, kernels=kernels
    )
    timeline["launch"] = time.time()
    window = kernels[1] if kernels is not None else None
    returncode, swept = _train(args, out_dir, work, env, recorder, timeline, window)
    timeline["end"] = time.time()
    if kernels is not None:
        recorder.external_kernels(collect(KernelFolder(kernels[0]), kernels[1], knobs.gpus).to_dict())
    setup = _setup(out_dir, timeline["launch"], recorder.steps)
    if plan is not None:
        no_switches = {"error": f"verl {version} is not profiled per role (0.9 or later is)"}
        recorder.external_trace(place_trace(work / "profile", plan) if profiling else no_switches)
    if returncode != 0 or len(recorder.steps) < steps:
        raise _failure(out_dir, len(recorder.steps), steps, returncode, ray_folder)
    shutil.rmtree(ray_folder, ignore_errors=True)  # Ray's logs of a run that ended well: nothing to read
    lengths = measured_lengths(recorder.steps)
    mismatch = length_mismatch(knobs, lengths, synthetic_prompts=not case.dataset_path)
    if mismatch:  # the work is not the case's: an error, never a baseline
        raise RuntimeError(mismatch)
    return {
        "effective_config": _effective_config(knobs, rules, normalised, attention, lengths, info),
        "versions": library_versions(VERSION_PACKAGES),
        "timeline": timeline,
        "memory": _memory_peaks(recorder.steps),
        "session_sweep": swept.to_dict(),
        "setup": setup,
        CACHED_INPUTS: [record.to_dict() for record in inputs.cached],
    }


def _kernel_window(spec: ChildSpec, work: Path, profiling: bool) -> tuple[Path, Window] | None:
    """Where verl's processes record the window's kernels (``verl.kernel_hook``), None where the run
    records none: no window asked for, or verl's own profiler holds CUPTI (a traced run)."""
    window = Window(*spec.kernel_window) if spec.kernel_window else None
    if window is None or profiling or spec.kernel_clock == "profiler":
        return None
    return work / "kernels", window


def _setup(out_dir: Path, launch: float, steps: list[dict[str, Any]]) -> dict[str, Any]:
    """Where the time before the steps went (``verl.setup``), with its line for the report."""
    setup = setup_breakdown((out_dir / LOG_FILE).read_text(errors="replace"), launch, steps)
    setup["line"] = describe_setup(setup)
    print(f"[trainperf] {setup['line']}", flush=True)
    return setup


def _train(
    args: list[str],
    out_dir: Path,
    work: Path,
    env: dict[str, str],
    recorder: StepRecorder,
    timeline: dict[str, float],
    window: Window | None,
) -> tuple[int, Sweep]:
    """Run verl in its own session, recording its steps as they land; whatever way it ends, kill its
    group, then end what is left of its session (Ray's workers sit in groups of their own). Returns
    verl's exit status and what ending its session took."""
    previous_handler = signal.signal(signal.SIGTERM, _on_sigterm)
    tail = _Tail(out_dir / METRICS_FILE)
    with open(out_dir / LOG_FILE, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "verl.trainer.main_ppo", *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=work,
            env=env,
            start_new_session=True,
        )
        try:
            while process.poll() is None:
                _record_new(tail, recorder, timeline, window)
                time.sleep(POLL_S)
        finally:
            _kill_group(process)
            swept = end_session(process.pid)
            _record_new(tail, recorder, timeline, window)
            signal.signal(signal.SIGTERM, previous_handler)
    return process.returncode, swept


def _failure(out_dir: Path, done_steps: int, steps: int, returncode: int, ray_folder: Path) -> Exception:
    """The error of a run that failed or stopped short, classified from verl's log, with where its
    Ray's own logs are."""
    failure = classify_failure((out_dir / LOG_FILE).read_text(errors="replace")[-200_000:])
    done = f"after {done_steps}/{steps} steps, exit status {returncode}; Ray's logs in {ray_folder}"
    if failure.outcome == Outcome.OOM:
        return VerlOutOfMemory(f"out of memory ({done}): {failure.message}")
    return RuntimeError(f"verl failed ({done}): {failure.message}")


def _effective_config(
    knobs: VerlKnobs,
    rules: RuleSet,
    normalised: Normalised,
    attention: Attention,
    lengths: Lengths,
    info: dict[str, Any],
) -> dict[str, Any]:
    """What the run trained with: verl's derived batch sizes, the attention used, the lengths measured
    and the inputs' details."""
    return {
        "framework": "verl",
        "algorithm": knobs.algorithm,
        "engine": knobs.engine,
        "precision": "bf16",
        "rule_set": rules,
        "global_mini_batch": normalised.global_mini_batch,
        "mini_batch_per_gpu": normalised.mini_batch_per_gpu,
        "micro_batches_per_mini": normalised.micro_batches_per_mini,
        "fixed_response_length": not knobs.natural_lengths,
        # gated like any effective setting: installing flash-attn changes the workload
        "actor_attention": attention.actor,
        **lengths.to_config(),
        **({"critic_attention": attention.critic} if attention.critic else {}),
        **info,
    }


def _memory_peaks(steps: list[dict[str, Any]]) -> dict[str, int]:
    """The framework's allocated and reserved peaks over the steps verl reported them in, in bytes."""
    peaks = {
        key: max((s[field] for s in steps if field in s), default=None)
        for key, field in (("peak_allocated_b", "max_allocated_gib"), ("peak_reserved_b", "max_reserved_gib"))
    }
    return {key: int(value * GIB) for key, value in peaks.items() if value is not None}


def _record_new(
    tail: _Tail, recorder: StepRecorder, timeline: dict[str, float], window: Window | None
) -> None:
    for line in tail.lines():
        parsed = parse_jsonl_line(line)
        record = step_record(*parsed) if parsed else None
        if record is None:
            continue
        record["t_end"] = time.time()
        if window is not None and window.first <= int(record["step"]) <= window.last:
            record["kernel_window"] = True  # recorded in verl's processes: not timed (measure.measurement)
        timeline.setdefault("first_step_end", record["t_end"])
        recorder.record(record)
