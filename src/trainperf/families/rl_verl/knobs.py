"""An RL case's verl knobs, read from ``Case.extra`` (short keys, so they read well in the id).

An ``rl_verl`` case uses the common fields as: ``batch_size`` = ``data.train_batch_size``
(prompts per step), ``micro_batch_size`` = ``ppo_micro_batch_size_per_gpu`` (None with dynamic
batch size), ``gpus`` = ``trainer.n_gpus_per_node``, ``method`` = ``full`` (the actor is fully
trained), ``profile`` = the data's shape (``gsm8k``). Everything else is in ``extra``:

====== ============================================ =========
key    meaning                                      default
====== ============================================ =========
alg    ``ppo`` (GAE, with a critic) or ``grpo``     required
eng    rollout engine, ``vllm`` or ``sglang``       required
mini   ``ppo_mini_batch_size`` (prompts)            required
n      ``rollout.n`` (responses per prompt)         1
p      prompt length in tokens (fixed)              1024
r      response length in tokens                    1024
tp     rollout tensor parallel size                 1
dyn    dynamic batch size: max tokens per GPU       absent
offl   FSDP param + optimizer offload (``1``)       absent
kl     KL loss, low_var_kl with coefficient 0.001   absent
len    ``natural``: lengths vary (no ignore_eos)    absent
====== ============================================ =========
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from trainperf.case import Case
from trainperf.errors import TrainperfError

FAMILY = "rl_verl"
ALGORITHMS = ("ppo", "grpo")
ENGINES = ("vllm", "sglang")
KNOWN_KEYS = ("alg", "eng", "mini", "n", "p", "r", "tp", "dyn", "offl", "kl", "len")
KL_LOSS_COEF = 0.001
KL_LOSS_TYPE = "low_var_kl"


@dataclass(frozen=True, slots=True, kw_only=True)
class VerlKnobs:
    algorithm: Literal["ppo", "grpo"]
    engine: Literal["vllm", "sglang"]
    train_batch: int
    mini_batch: int
    micro_batch: int | None
    """Per GPU; None with dynamic batch size."""
    rollout_n: int
    prompt_len: int
    response_len: int
    rollout_tp: int
    gpus: int
    max_tokens_per_gpu: int | None
    """Set: dynamic batch size (``use_dynamic_bsz``) with this ``ppo_max_token_len_per_gpu``."""
    offload: bool
    kl_loss: bool
    natural_lengths: bool

    @property
    def use_critic(self) -> bool:
        return self.algorithm == "ppo"

    @property
    def dynamic_batch(self) -> bool:
        return self.max_tokens_per_gpu is not None


def _int(extra: dict[str, str], key: str, case_id: str, default: int | None = None) -> int:
    if key not in extra:
        if default is None:
            raise TrainperfError(
                f"case {case_id}: verl knob '{key}' is missing from extra (see trainperf.families.rl_verl.knobs)"
            )
        return default
    try:
        value = int(extra[key])
    except ValueError:
        raise TrainperfError(f"case {case_id}: verl knob {key}={extra[key]!r} is not an integer") from None
    if value < 1:
        raise TrainperfError(f"case {case_id}: verl knob {key}={value} must be >= 1")
    return value


def knobs_of(case: Case) -> VerlKnobs:
    """The case's verl knobs; a missing, unknown or malformed knob is a one-line error."""
    extra = dict(case.extra)
    unknown = sorted(set(extra) - set(KNOWN_KEYS))
    if unknown:
        raise TrainperfError(
            f"case {case.id}: unknown verl knob(s) {', '.join(unknown)}; known: {', '.join(KNOWN_KEYS)}"
        )
    algorithm, engine = extra.get("alg", ""), extra.get("eng", "")
    if algorithm not in ALGORITHMS:
        raise TrainperfError(f"case {case.id}: alg={algorithm!r}; use one of {', '.join(ALGORITHMS)}")
    if engine not in ENGINES:
        raise TrainperfError(f"case {case.id}: eng={engine!r}; use one of {', '.join(ENGINES)}")
    dynamic = _int(extra, "dyn", case.id) if "dyn" in extra else None
    if dynamic is None and case.micro_batch_size is None:
        raise TrainperfError(
            f"case {case.id}: give micro_batch_size (per GPU) or dynamic batch size (extra dyn=TOKENS)"
        )
    if extra.get("len", "natural") != "natural":
        raise TrainperfError(f"case {case.id}: len={extra['len']!r}; the only value is 'natural'")
    for flag in ("offl", "kl"):
        if extra.get(flag, "1") != "1":
            raise TrainperfError(f"case {case.id}: {flag}={extra[flag]!r}; give 1 or leave it out")
    return VerlKnobs(
        algorithm=algorithm,  # type: ignore[arg-type]
        engine=engine,  # type: ignore[arg-type]
        train_batch=case.batch_size,
        mini_batch=_int(extra, "mini", case.id),
        micro_batch=None if dynamic is not None else case.micro_batch_size,
        rollout_n=_int(extra, "n", case.id, 1),
        prompt_len=_int(extra, "p", case.id, 1024),
        response_len=_int(extra, "r", case.id, 1024),
        rollout_tp=_int(extra, "tp", case.id, 1),
        gpus=case.gpus,
        max_tokens_per_gpu=dynamic,
        offload="offl" in extra,
        kl_loss="kl" in extra,
        natural_lengths="len" in extra,
    )
