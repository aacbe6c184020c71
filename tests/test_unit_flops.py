"""Unit tests of trainperf.plan.flops / plan.headroom / run.headroom_fill: model FLOPs, MFU and headroom,
each against figures worked out by hand from the shipped model configs (arithmetic in the test)."""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path

import pytest

from trainperf.case import Case
from trainperf.case_record import CaseRecord
from trainperf.cliff_record import CliffRecord
from trainperf.config_record import EffectiveConfig
from trainperf.measure.hardware import load_classes
from trainperf.plan.flops import attention_length, kwh_per_million_tokens, model_shape, token_flops
from trainperf.plan.headroom import LimitInputs, case_limits, cliff_headroom, mfu_cell
from trainperf.result import CaseResult, MetricValue
from trainperf.run.headroom_fill import attach_limits, limit_inputs
from trainperf.run_record import RunRecord
from trainperf.store.baselines import BaselineStore
from trainperf.synth.model_configs import load_model_fixture

# qwen3_tiny: hidden 64, intermediate 128, 2 layers, 4 heads x 16, 2 kv heads x 16, vocab 2048.
# Per layer: q 64*64 + k 64*32 + v 64*32 + o 64*64 + gate/up/down 3*64*128 = 4096+2048+2048+4096+24576
# = 36864; two layers 73728; head 2048*64 = 131072; N = 204800.
TINY_N = 2 * (64 * 64 + 64 * 32 + 64 * 32 + 64 * 64 + 3 * 64 * 128) + 2048 * 64
# LoRA per unit rank: sum of d_in + d_out: (64+64)+(64+32)*2+(64+64)+(64+128)*3 = 1024 per layer.
TINY_LORA_PER_RANK = 2 * 1024


def _shape(model: str):
    shape = model_shape(load_model_fixture(model)["config"])
    assert shape is not None
    return shape


def test_dense_shape_counts_projections_and_head() -> None:
    shape = _shape("qwen3_tiny")
    assert TINY_N == 204_800
    assert (shape.matmul_params, shape.lora_per_rank, shape.layers, shape.attention_width) == (
        204_800,
        2048,
        2,
        64,
    )
    # Qwen3-8B: per layer 4096^2*2 (q, o) + 4096*1024*2 (k, v) + 3*4096*12288 = 192,937,984;
    # 36 layers = 6,945,767,424; head 151936*4096 = 622,329,856; N = 7,568,097,280.
    assert _shape("qwen3_8b").matmul_params == 7_568_097_280


def test_moe_counts_active_experts_only() -> None:
    shape = _shape("gpt_oss_120b")
    # gpt-oss-120b: attention 2880*4096*2 + 2880*512*2 = 26,542,080; router 2880*128 = 368,640;
    # 4 routed experts of 3*2880*2880 = 99,532,800; per layer 126,443,520, 36 layers 4,551,966,720;
    # head 201088*2880 = 579,133,440: N = 5,131,100,160 (OpenAI publishes 5.1B active).
    assert shape.matmul_params == 5_131_100_160
    assert shape.experts == "top 4 of 128"


def test_full_training_is_six_n_plus_attention() -> None:
    flops = token_flops(_shape("qwen3_tiny"), method="full", lora_params=0, seq_len=100)
    # 6 * 204800 = 1,228,800; attention 12 * 2 layers * 64 * 100 = 153,600.
    assert flops.parameter_flops == 1_228_800
    assert flops.attention_flops == 153_600
    assert flops.total == 1_382_400
    assert flops.formula.startswith("6·N + 12·L·d_attn·s")


def test_lora_freezes_the_base_weights() -> None:
    lora = 8 * TINY_LORA_PER_RANK  # 16,384
    flops = token_flops(_shape("qwen3_tiny"), method="lora", lora_params=lora, seq_len=100)
    # 4 * 204800 + 6 * 16384 = 819,200 + 98,304 = 917,504; plus attention 153,600.
    assert flops.parameter_flops == 917_504
    assert flops.total == 1_071_104
    assert "no weight gradient" in flops.formula


def test_attention_length_weights_long_samples() -> None:
    # Samples of 100 and 300 tokens: (100^2 + 300^2) / 400 = 100,000 / 400 = 250.
    assert attention_length([100, 300]) == 250.0
    assert attention_length([]) == 0.0


def _inputs(**changes) -> LimitInputs:
    base = {
        "family": "sft_hf",
        "kind": "sft",
        "method": "full",
        "gpus": 1,
        "shape": _shape("qwen3_tiny"),
        "lora_params": 0,
        "attention_seq_len": 100.0,
        "tokens_per_step": 400.0,
        "tokens_per_s": 1e6,
        "energy_per_token_j": 0.5,
        "peak_tflops": 989.0,
    }
    base.update(changes)
    return LimitInputs(**base)


def test_mfu_against_the_class_peak() -> None:
    limits = case_limits(_inputs())
    # 1,382,400 FLOPs/token * 1e6 tok/s = 1.3824 TFLOP/s; / 989 = 0.0013978; per step 400 tokens.
    assert limits.achieved_tflops == pytest.approx(1.3824)
    assert limits.mfu == pytest.approx(1.3824 / 989)
    assert limits.model_tflop_per_step == pytest.approx(1_382_400 * 400 / 1e12)
    # 0.5 J/token * 1e6 tokens / 3.6e6 J/kWh = 0.13889 kWh per million tokens.
    assert limits.kwh_per_mtok == pytest.approx(0.5 / 3.6)
    assert kwh_per_million_tokens(3.6) == pytest.approx(1.0)
    assert mfu_cell(limits) == "0.1%"
    # Two GPUs: the peak doubles, the MFU halves.
    assert case_limits(_inputs(gpus=2)).mfu == pytest.approx(1.3824 / 1978)


def test_cpu_class_has_no_peak_so_mfu_is_not_made_up() -> None:
    cpu = load_classes()["cpu"]
    assert cpu.bf16_dense_tflops is None
    limits = case_limits(_inputs(peak_tflops=cpu.bf16_dense_tflops))
    assert limits.mfu is None
    assert limits.mfu_note == "n/a: the class's hardware file gives no bf16_dense_tflops peak"
    assert limits.achieved_tflops == pytest.approx(1.3824)  # still measured
    assert mfu_cell(limits) == "n/a"


def test_rl_and_emulated_cases_say_why() -> None:
    rl = case_limits(_inputs(family="rl_verl", kind="rl", framework_mfu=0.412))
    assert rl.mfu is None and "generation" in rl.mfu_note
    assert mfu_cell(rl) == "41.2% (verl)"
    emulated = case_limits(_inputs(emulated="maxq"))
    assert emulated.mfu is None and "emulated" in emulated.mfu_note
    local = case_limits(_inputs(attention_seq_len=None))
    assert local.model_flops_per_token == 1_228_800 and "attention term left out" in local.flops_note


def test_cliff_headroom() -> None:
    assert (
        cliff_headroom("batch_size", 4, 12, 13).text == "batch_size 4 of largest fitting 12 (3x, OOM at 13)"
    )
    assert cliff_headroom("batch_size", 4, None, 1).headroom is None


def _tiny_result(case: Case, **metrics: float) -> CaseResult:
    return CaseResult(
        case_id=case.id,
        case=CaseRecord.of(case),
        gpu_class="cpu",
        outcome="ok",
        metrics={name: MetricValue(value, "") for name, value in metrics.items()},
        effective_config=EffectiveConfig(trainable_params=16_384),
        runs=[RunRecord(steps_requested=4)],
    )


def test_attach_limits_from_a_result_and_a_stored_cliff(tmp_path: Path) -> None:
    case = Case(
        family="sft_hf", model="qwen3_tiny", method="lora", profile="maxlen", batch_size=4, max_seq_len=512
    )
    store = BaselineStore(tmp_path)
    searched = case.replace(batch_size=1)
    cliff = _tiny_result(searched)
    cliff.case_id = f"{searched.id}-cliff-batch_size"
    cliff.gpu_class = "h100"
    cliff.cliff = CliffRecord("batch_size", 1, 512, largest_fit=16, smallest_oom=17)
    store.save(cliff, "test")
    result = _tiny_result(case, tokens_per_s=2000.0)
    inputs = limit_inputs(case, result, load_classes()["cpu"])
    # maxlen: every sample as long as the case allows, so s = 512 and 4 samples x 512 tokens a step.
    assert inputs.attention_seq_len == 512 and inputs.tokens_per_step == 2048
    attach_limits(case, result, load_classes()["h100"], store)
    assert result.limits is not None
    # 4*204800 + 6*16384 + 12*2*64*512 = 917,504 + 786,432 = 1,703,936 FLOPs/token; at 2000 tok/s
    # 3.407872 GFLOP/s = 0.003407872 TFLOP/s, of 989.
    assert result.limits.model_flops_per_token == 1_703_936
    assert result.limits.mfu == pytest.approx(0.003407872 / 989)
    assert result.limits.cliff_headroom is not None
    assert result.limits.cliff_headroom.text == "batch_size 4 of largest fitting 16 (4x, OOM at 17)"


def test_verl_own_mfu_is_read_from_its_steps() -> None:
    from trainperf.measure.measurement import measure_run

    steps = [
        {"step": k, "t_end": float(k), "duration_s": 1.0, "tokens": 100, "mfu_actor": 0.40 + k / 100}
        for k in range(1, 8)
    ]
    run = measure_run({"steps": steps}, [], samples_per_step=4, idle_mem_b=None)
    assert run.info.warmup_steps is not None
    steady = [0.40 + k / 100 for k in range(1 + run.info.warmup_steps, 8)]
    assert run.info.framework_mfu_actor == pytest.approx(statistics.median(steady))
    case = Case(family="rl_verl", model="qwen2_5_0_5b", method="full", profile="gsm8k", batch_size=64)
    result = CaseResult(
        case_id=case.id, case=CaseRecord.of(case), gpu_class="h100", outcome="ok",
        metrics={"tokens_per_s": MetricValue(1000.0, "tok/s")},
        runs=[dataclasses.replace(run.info, steps_requested=7)],
    )  # fmt: skip
    attach_limits(case, result, load_classes()["h100"], BaselineStore(Path("/nonexistent")))
    assert result.limits is not None and result.limits.mfu is None
    assert result.limits.framework_mfu == pytest.approx(run.info.framework_mfu_actor)
    assert mfu_cell(result.limits).endswith("(verl)")
