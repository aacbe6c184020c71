"""The parent side of a workload family behind one interface: pre-flight, memory, launch, engine.

The parent never imports a training stack: a family here knows its rules (what its library
would refuse, how much memory it needs at least, how it spreads over GPUs) and the child
(``trainperf.workloads.<family>``) does the training. Shared rules live in ``Family``; each
family overrides what differs.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any, Literal

from trainperf.case import Case
from trainperf.errors import TrainperfError
from trainperf.judge.family_tolerance import FamilyTolerances
from trainperf.memory_estimate import MemoryEstimate
from trainperf.synth.model_configs import load_model_fixture


class LaunchMode(str, Enum):
    """How a case with more than one GPU starts (a one-GPU case is always one process)."""

    TORCHRUN = "torchrun"
    """One rank per GPU under ``torch.distributed.run``; the launcher group is the child."""
    SELF_DISTRIBUTING = "self-distributing"
    """One process that sees every GPU of the case and spreads over them itself (verl's Ray workers)."""


FamilyKind = Literal["sft", "rl"]


class Family:
    """Rules shared by every family; a family overrides what its library does differently.

    A family is added under ``families/`` alone: registered in ``FAMILIES`` (``__init__.py``), it names
    its child module, and the child (``workloads/child.py``) finds it through the registry."""

    name: str = ""
    child: str
    """The child side's module, with ``run(spec, recorder) -> dict``: named, never imported by the
    parent, so the parent never loads a training stack."""
    kind: FamilyKind
    """``sft``: a step trains on the batch it is given; ``rl``: a step also generates its batch
    (rollouts), which a training FLOPs count does not describe."""
    label: str = ""
    """The family's library as the reports name it (``HF``, ``unsloth``)."""
    compared_methods: tuple[str, ...] = ()
    """The methods E2's side-by-side comparison (``report/side_by_side.py``) shows this family in,
    a row each."""
    launch_mode: LaunchMode = LaunchMode.TORCHRUN

    def preflight(self, case: Case, python: str | None) -> None:
        """Problems found before any process starts, one line each naming the fix. ``python``
        is the children's interpreter, whose installed packages decide a family's rules."""
        check_model(case)

    def memory_estimate(self, case: Case, steps: int) -> MemoryEstimate | None:
        """Peak allocator memory predicted before launch; None where the family is not modelled."""
        return None

    def memory_floor(self, case: Case, limit_gib: float) -> str | None:
        """Why ``case`` cannot fit ``limit_gib`` at any micro-batch; None when that is not known."""
        return None

    def samples_per_step(self, case: Case) -> int:
        """Samples one optimizer step consumes over all of the case's GPUs."""
        return case.batch_size * case.grad_accum * case.gpus

    def launches_ranks(self, gpus: int) -> bool:
        """Whether the child is the launcher with one rank per GPU (else one process sees them all)."""
        return gpus > 1 and self.launch_mode is LaunchMode.TORCHRUN

    def rollout_engine(self, extra: Mapping[str, Any]) -> str | None:
        """The RL rollout engine a case names (``vllm``, ``sglang``); None for a family without one."""
        return None

    data_sized_by_steps: bool = False
    """The child sizes its synthetic data by the steps it is told and the trainer shuffles it: a run
    told ``ChildSpec.data_steps`` draws the first batches of that longer run, in its order, so a
    shorter run pairs step by step with a full-length baseline (``--perf-plan-steps``)."""

    trace_window: tuple[int, int] | None = None
    """(warm-up, active) steps of the family's own profiler; None: the suite's schedule
    (``traces.profile_window.plan_trace``)."""
    kernel_time: bool = True
    """Whether the family's kernels are recorded: in the child's own process (``workloads.kernel_clock``)
    or in the processes where its training runs (verl's: ``verl.kernel_hook``)."""
    kernel_window_at_end: bool = False
    """The window is the run's last steps (``traces.kernel_steps.last_steps_window``): for a family
    whose kernels run in processes of its own, which read their records back after the window."""
    tolerances: FamilyTolerances = FamilyTolerances()
    """Timing tolerances of the family's own where its figures spread wider than the registry's (each
    1.5 times the widest spread measured, as there); the class's otherwise
    (``judge.family_tolerance``)."""


def check_model(case: Case) -> None:
    """The model exists: a shipped config, or a local checkpoint folder with its config.json."""
    if not case.model_path:
        load_model_fixture(case.model)
    elif not Path(case.model_path, "config.json").is_file():
        raise TrainperfError(
            f"model_path {case.model_path} has no config.json: give a local checkpoint folder"
        )
