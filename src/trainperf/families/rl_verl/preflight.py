"""verl's own batch-size errors, predicted in milliseconds before any Ray cluster or GPU starts.

Each rule restates a check of verl's source (file and line quoted per rule, per release) in
our own words; ``check`` returns the first violation as one line naming verl's message and
the fix. E1's published example: on 2 GPUs, mini-batch 128 normalises to 64 per GPU, so a
micro-batch of 128 or more is rejected (``normalized ppo_mini_batch_size 64 should be
divisible by ppo_micro_batch_size_per_gpu 128`` in verl 0.6.1).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainperf.case import Case
from trainperf.errors import TrainperfError
from trainperf.families.rl_verl.knobs import VerlKnobs, knobs_of
from trainperf.families.rl_verl.versions import RuleSet, effective_version, rule_set


@dataclass(frozen=True, slots=True)
class Normalised:
    """The batch sizes verl derives, recorded as the case's effective configuration."""

    rule_set: RuleSet
    global_mini_batch: int
    """Responses per mini-batch (× rollout.n)."""
    mini_batch_per_gpu: int
    micro_batches_per_mini: int | None


def _mini_per_gpu(knobs: VerlKnobs, mini: int, role: str, rules: RuleSet) -> tuple[int, int, str | None]:
    """(global mini-batch, per-GPU mini-batch, violation) for the actor or the critic."""
    dp = knobs.gpus  # FSDP: every GPU is one data-parallel rank (no Ulysses sequence parallelism here)
    global_mini = mini * knobs.rollout_n
    if rules == "workers":
        # 0.6.1 fsdp_workers.py:235-236 (actor), :1192-1193 (critic); 0.7.0 :242-243, :1235-1236:
        # in-place ``*= rollout.n`` then ``//= world_size // sp`` (floor: no divisibility check) and
        # an assertion that the result is positive (0.6.1 :237, 0.7.0 :244).
        per_gpu = global_mini // dp
        if per_gpu < 1:
            return (
                global_mini,
                per_gpu,
                (
                    f"{role} ppo_mini_batch_size {global_mini} // {dp} GPUs is 0 (verl: 'should be larger "
                    "than 0 after "
                    "normalization'); raise the mini-batch or use fewer GPUs"
                ),
            )
        return global_mini, per_gpu, None
    # engine (0.8.0 ray_trainer.py:1311/1340, 0.9.1 :1353/1383): mini-batch × rollout.n; then
    # engine_workers.py (0.8.0 :258, 0.9.1 :267) asserts it divides by the data-parallel size.
    if global_mini % dp:
        return (
            global_mini,
            global_mini // dp,
            (
                f"{role} mini-batch {mini} x rollout.n {knobs.rollout_n} = {global_mini} is not divisible by "
                "the "
                f"data-parallel size {dp} (verl: 'Got mini_batch_size={global_mini} and "
                f"...get_data_parallel_size()={dp}'); "
                "make the mini-batch a multiple of the GPU count"
            ),
        )
    return global_mini, global_mini // dp, None


def _micro_violation(per_gpu: int, micro: int, role: str, rules: RuleSet) -> str | None:
    if per_gpu % micro == 0:
        return None
    if rules == "workers":
        # 0.6.1 fsdp_workers.py:249-251 (actor), :1205-1207 (critic); 0.7.0 :256-258, :1248-1250.
        said = (
            f"normalized ppo_mini_batch_size {per_gpu} should be divisible by "
            f"ppo_micro_batch_size_per_gpu {micro}"
        )
    else:
        # engine/utils.py prepare_micro_batches (0.8.0 :91-93, 0.9.1 :124-127), at the first update.
        said = "data size must be divisible by force_group_size * micro_batch_size_per_gpu"
    return (
        f"{role} micro-batch {micro} does not divide the per-GPU mini-batch {per_gpu} (verl: '{said}'); "
        f"use a divisor of {per_gpu}"
    )


def check(knobs: VerlKnobs, rules: RuleSet) -> tuple[Normalised, str | None]:
    """verl's derived batch sizes and the first rule the knobs break (None: verl accepts them)."""
    global_mini, per_gpu, problem = _mini_per_gpu(knobs, knobs.mini_batch, "actor", rules)
    micro = knobs.micro_batch
    normalised = Normalised(
        rules, global_mini, per_gpu, per_gpu // micro if micro and per_gpu % micro == 0 else None
    )
    violations: list[str | None] = [_rollout_tp_violation(knobs)]
    if not knobs.dynamic_batch:
        violations += _train_batch_violations(knobs)
    violations.append(problem)
    if knobs.use_critic:
        violations.append(_mini_per_gpu(knobs, knobs.mini_batch, "critic", rules)[2])
    if micro is not None and problem is None:
        violations += _micro_batch_violations(knobs, per_gpu, micro, rules)
    if knobs.dynamic_batch:
        violations.append(_token_budget_violation(knobs))
    return normalised, next((v for v in violations if v), None)


def _rollout_tp_violation(knobs: VerlKnobs) -> str | None:
    # Rollout TP against the world size: 0.7.0 fsdp_workers.py:618, 0.8.0 engine_workers.py:600, 0.9.1
    # :659 ('rollout world_size: W is not divisible by infer_world_size: TP'). verl's rollout TP defaults
    # to 2, which is why every case names its own.
    n_gpus = knobs.gpus
    if n_gpus % knobs.rollout_tp:
        return (
            f"rollout tensor parallel size {knobs.rollout_tp} does not divide the {n_gpus} GPU(s) (verl: "
            "'rollout "
            f"world_size: {n_gpus} is not divisible by infer_world_size: {knobs.rollout_tp}'); set tp to a "
            "divisor"
        )
    return None


def _train_batch_violations(knobs: VerlKnobs) -> list[str | None]:
    """Without dynamic batching: the train batch against the GPU count and the mini-batch."""
    n_gpus = knobs.gpus
    violations: list[str | None] = []
    # utils/config.py validate_config (0.6.1/0.7.0 :109-112, 0.8.0 :110-112, 0.9.1 :124-126): the
    # responses per step must split evenly over the GPUs.
    real = knobs.train_batch * knobs.rollout_n
    if real % n_gpus:
        violations.append(
            f"train batch {knobs.train_batch} x rollout.n {knobs.rollout_n} = {real} is not divisible by "
            f"{n_gpus} "
            f"GPUs (verl: 'real_train_batch_size ({real}) must be divisible by minimal possible batch "
            "size "
            f"({n_gpus})')"
        )
    # workers/config/actor.py validate (0.6.1 :155, 0.7.0 :203, 0.8.0 :226, 0.9.1 :227) and critic.py
    # (0.8.0 :126, 0.9.1 :127): the mini-batch cannot exceed the train batch.
    if knobs.train_batch < knobs.mini_batch:
        violations.append(
            f"train batch {knobs.train_batch} < ppo_mini_batch_size {knobs.mini_batch} (verl: "
            "'train_batch_size "
            f"({knobs.train_batch}) must be >= actor.ppo_mini_batch_size ({knobs.mini_batch})')"
        )
    return violations


def _micro_batch_violations(knobs: VerlKnobs, per_gpu: int, micro: int, rules: RuleSet) -> list[str | None]:
    """The micro-batch against the actor's per-GPU mini-batch and (engine) the log-prob passes' share."""
    violations = [_micro_violation(per_gpu, micro, "actor", rules)]
    if rules == "engine":
        # The log-prob passes (old policy, reference, values) split each GPU's share of the whole
        # batch into micro-batches through the same prepare_micro_batches (engine/utils.py, as above).
        share = knobs.train_batch * knobs.rollout_n // knobs.gpus
        if share % micro:
            violations.append(
                f"log-prob micro-batch {micro} does not divide the per-GPU batch {share} (verl: 'data "
                "size must be "
                f"divisible by force_group_size * micro_batch_size_per_gpu'); use a divisor of {share}"
            )
    return violations


def _token_budget_violation(knobs: VerlKnobs) -> str | None:
    # utils/seqlen_balancing.py (0.7.0, 0.8.0, 0.9.1 :384): one sequence must fit the token budget.
    longest = knobs.prompt_len + knobs.response_len
    assert knobs.max_tokens_per_gpu is not None
    if knobs.max_tokens_per_gpu < longest:
        return (
            f"dynamic batch budget {knobs.max_tokens_per_gpu} tokens per GPU < prompt + response "
            f"{longest} "
            "(verl: 'max_token_len must be greater than the sequence length'); raise dyn"
        )
    return None


def check_case(case: Case, python: str | None = None) -> dict[str, object]:
    """Pre-flight of an ``rl_verl`` case: raises ``TrainperfError`` (a ``config_error``) on a batch
    size verl would reject, else returns the normalised sizes and the version modelled."""
    knobs = knobs_of(case)
    version, source = effective_version(python)
    rules = rule_set(version)
    normalised, problem = check(knobs, rules)
    if problem:
        raise TrainperfError(f"verl {version} ({source}) would reject this case: {problem}")
    return {
        "verl_version": version,
        "verl_version_source": source,
        "rule_set": rules,
        "global_mini_batch": normalised.global_mini_batch,
        "mini_batch_per_gpu": normalised.mini_batch_per_gpu,
        "micro_batches_per_mini": normalised.micro_batches_per_mini,
    }
