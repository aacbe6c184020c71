"""verl's own profiler, per role, for a profiled run of a verl case (a baseline's profile summary, a
diagnosis): the child cannot profile verl's Ray workers itself, so it turns on verl's switches.

With ``global_profiler.tool=torch`` and ``global_profiler.steps=[N]`` verl profiles step N; each
role's ``profiler.enable`` with the torch tool's ``discrete=True`` gives one trace per stage
(``verl/utils/profiler/torch_profile.py``, 0.9.1): files named
``<role prefix>_<stage>_step<N>_rank<r>-of-<w>_pid<p>_<time>.json.gz`` in ``save_path``, the stage
being ``actor_update`` for the actor's update (``engine_workers.py``) and ``train_batch`` for the
critic's, both spelled with ``-`` in the names. The actor's update on rank 0 becomes the run's
trace (the suite analyses it as any child's), the other update traces are named beside it. verl
releases before 0.9 are not profiled.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path
from typing import Any

from trainperf.traces.profile_window import TracePlan

ACTOR_UPDATE = "actor-update"
CRITIC_UPDATE = "train-batch"
"""Stage names as they appear in verl's file names: ``actor_update`` and ``train_batch``, with every
character outside ``[0-9A-Za-z.=+-]`` made a ``-`` (``torch_profile.py`` ``_sanitize_name_part``), as
an H100 run wrote them: ``value-model_train-batch_step5_rank0-of-1_pid3198_...json.gz``."""
PROFILED_FROM = (0, 9)
"""The first verl release whose config has every switch used here (``tests/data/verl`` key lists)."""


def supports_profiling(version: str) -> bool:
    parts = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    return parts >= PROFILED_FROM


def profiler_overrides(plan: TracePlan, save_dir: Path, critic: bool) -> list[str]:
    """Hydra overrides that profile the plan's last step: the actor's (and critic's) update stages."""
    roles = ["actor_rollout_ref.actor", *(["critic"] if critic else [])]
    overrides = [
        "global_profiler.tool=torch",
        f"global_profiler.steps=[{plan.total_steps}]",
        f"global_profiler.save_path={save_dir}",
    ]
    for role in roles:
        overrides += [
            f"{role}.profiler.enable=True",
            f"{role}.profiler.all_ranks=True",
            f"{role}.profiler.tool_config.torch.contents=[cuda,cpu]",
            f"{role}.profiler.tool_config.torch.discrete=True",
        ]
    return overrides


def _update_traces(save_dir: Path, step: int) -> dict[str, list[Path]]:
    """The update-stage traces of ``step``, by stage, rank 0 first."""
    found: dict[str, list[Path]] = {}
    for path in sorted(save_dir.rglob("*.json*")):
        for stage in (ACTOR_UPDATE, CRITIC_UPDATE):
            if f"_{stage}_" in path.name and f"_step{step}_" in path.name:
                found.setdefault(stage, []).append(path)
    for paths in found.values():
        paths.sort(key=lambda p: (0 if "_rank0" in p.name else 1, p.name))
    return found


def place_trace(save_dir: Path, plan: TracePlan) -> dict[str, Any]:
    """The actor's update trace of the profiled step at the plan's path (gzip), and what was found:
    the trace record the parent reads (``trace_info``), with an ``error`` when verl wrote none."""
    info: dict[str, Any] = {
        "activities": ["CPU", "CUDA"],
        "profiled_steps": [plan.total_steps],
        "source": f"verl's torch profiler, stage {ACTOR_UPDATE} (rank 0)",
        # The profile covers the actor's update, not the whole step: said beside its figures.
        "scope": "verl actor update",
    }
    traces = _update_traces(save_dir, plan.total_steps) if save_dir.is_dir() else {}
    info["stages"] = {stage: [p.name for p in paths] for stage, paths in traces.items()}
    if ACTOR_UPDATE not in traces:
        info["error"] = f"verl wrote no {ACTOR_UPDATE} trace for step {plan.total_steps} under {save_dir}"
        return info
    source, target = traces[ACTOR_UPDATE][0], plan.path
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.name.endswith(".gz"):
        shutil.copyfile(source, target)
    else:
        with open(source, "rb") as raw, gzip.open(target, "wb", compresslevel=6) as packed:
            shutil.copyfileobj(raw, packed)
    info.update(file=target.name, bytes=target.stat().st_size, raw_bytes=source.stat().st_size)
    return info
