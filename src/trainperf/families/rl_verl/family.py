"""verl (``rl_verl``) behind the family interface: version-aware pre-flight, the update's memory
floor, one Ray-spread process per case, and its rollout engine."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainperf.case import Case
from trainperf.families.base import Family, LaunchMode, check_model
from trainperf.families.rl_verl.floor import over_the_floor
from trainperf.families.rl_verl.knobs import FAMILY
from trainperf.families.rl_verl.preflight import check_case
from trainperf.judge.family_tolerance import FamilyTolerances

ENGINES = ("vllm", "sglang")


class RlVerl(Family):
    name = FAMILY
    child = "trainperf.workloads.rl_verl"
    kind = "rl"
    label = "verl"
    # verl starts its Ray workers, one per GPU, and its rollout engine's TP groups: a multi-GPU
    # case is one child that sees every GPU, never a torchrun rank per GPU (each rank would
    # start a whole verl trainer of its own).
    launch_mode = LaunchMode.SELF_DISTRIBUTING
    # verl's own profiler takes the last step alone, with no warm-up step (workloads.verl.profile).
    trace_window = (0, 1)
    # The actor, critic and rollout run in Ray workers and engine processes: recorded there
    # (workloads.verl.kernel_hook), over the run's last steps, left out of the timing.
    kernel_window_at_end = True
    # PPO 0.5B's kernels are 78% elementwise work bound by the GPU's memory (the softmax over the
    # vocabulary): the same step read 11,632.6 to 11,728.8 ms on three H200 machines, 0.83% apart,
    # where the hf cases' GEMM-bound steps repeat within 0.53%. Its host work runs in Ray workers: on
    # one runner its step time moved +11.2% and its actor update +17.0% (-6.7% and +8.4% on another)
    # between sessions minutes apart, kernels unchanged (docs/measurements/2026-11-28-h200-verl-baseline).
    tolerances = FamilyTolerances(kernel=0.0125, host=0.25)

    def preflight(self, case: Case, python: str | None) -> None:
        check_model(case)
        check_case(case, python)

    def memory_floor(self, case: Case, limit_gib: float) -> str | None:
        return over_the_floor(case, limit_gib)

    def samples_per_step(self, case: Case) -> int:
        return case.batch_size  # an RL train batch is global: prompts per step over all GPUs

    def rollout_engine(self, extra: Mapping[str, Any]) -> str | None:
        engine = extra.get("eng")
        return engine if engine in ENGINES else None
