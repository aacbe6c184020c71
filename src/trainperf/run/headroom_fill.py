"""Fill a measured result's ``limits`` (``trainperf.plan.headroom``) from its case, the class and
the class's stored OOM cliffs: the run side, which knows the family's samples per step."""

from __future__ import annotations

from trainperf.case import Case, Outcome
from trainperf.errors import TrainperfError
from trainperf.families import family_of
from trainperf.judge import stats
from trainperf.limits_record import CliffHeadroom
from trainperf.measure.hardware import GpuClass
from trainperf.plan.cliff import AXES
from trainperf.plan.flops import attention_length, model_shape
from trainperf.plan.headroom import LimitInputs, case_limits, cliff_headroom
from trainperf.result import CaseResult, requested_steps
from trainperf.store.baselines import BaselineStore
from trainperf.synth.model_configs import load_model_fixture
from trainperf.synth.profiles import load_profile, sample_lengths


def _sample_lengths(case: Case, steps: int, samples_per_step: int) -> list[int] | None:
    """The non-padding lengths of every sample the run trained on (synthetic data is deterministic),
    None for a local dataset (its lengths are the child's to read)."""
    if case.dataset_path:
        return None
    try:
        return sample_lengths(load_profile(case.profile), steps * samples_per_step, case.max_seq_len)
    except TrainperfError:
        return None  # an RL prompt set has no length profile


def _framework_mfu(result: CaseResult) -> float | None:
    values = [run.framework_mfu_actor for run in result.runs if run.framework_mfu_actor is not None]
    return stats.median(values) if values else None


def _metric(result: CaseResult, name: str) -> float | None:
    value = result.metrics.get(name)
    return value.value if value is not None else None


def limit_inputs(case: Case, result: CaseResult, gpu_class: GpuClass) -> LimitInputs:
    steps = requested_steps(result) or 0
    family = family_of(case.family)
    per_step = family.samples_per_step(case)
    try:
        shape = model_shape(load_model_fixture(case.model)["config"])
    except TrainperfError:
        shape = None
    lengths = _sample_lengths(case, steps, per_step) if steps else None
    trainable = result.effective_config.trainable_params or 0
    lora = trainable or (case.lora_r * shape.lora_per_rank if shape else 0)
    return LimitInputs(
        family=case.family,
        kind=family.kind,
        method=case.method,
        gpus=case.gpus,
        shape=shape,
        lora_params=0 if case.method == "full" else lora,
        attention_seq_len=attention_length(lengths) if lengths else None,
        tokens_per_step=sum(lengths) / steps if lengths else None,
        tokens_per_s=_metric(result, "tokens_per_s"),
        energy_per_token_j=_metric(result, "energy_per_token_j"),
        peak_tflops=gpu_class.bf16_dense_tflops,
        emulated=result.emulated,
        framework_mfu=_framework_mfu(result),
    )


def stored_cliff(baselines: BaselineStore, gpu_class: str, case: Case) -> CliffHeadroom | None:
    """The headroom to a stored cliff of this case's configuration along any axis, or None."""
    for cliff_id in baselines.case_ids(gpu_class):
        axis = next((a for a in AXES if cliff_id.endswith(f"-cliff-{a}")), None)
        if axis is None or getattr(case, axis) is None:
            continue
        try:
            cliff = baselines.load(gpu_class, cliff_id)
            searched = cliff.case.as_case() if cliff else None
        except (TrainperfError, TypeError, ValueError):
            continue
        if cliff is None or not cliff.cliff or searched is None:
            continue
        if searched.replace(**{axis: getattr(case, axis)}).id == case.id:
            return cliff_headroom(
                axis,
                int(getattr(case, axis)),
                cliff.cliff.largest_fit,
                cliff.cliff.smallest_oom,
            )
    return None


def attach_limits(case: Case, result: CaseResult, gpu_class: GpuClass, baselines: BaselineStore) -> None:
    """Set ``result.limits`` for a case that ran (nothing for one that did not)."""
    if result.outcome != Outcome.OK.value or not result.metrics:
        return
    limits = case_limits(limit_inputs(case, result, gpu_class))
    limits.cliff_headroom = stored_cliff(baselines, gpu_class.name, case)
    result.limits = limits
