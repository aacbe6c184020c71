"""The synthetic 4-bit checkpoint of gpt-oss: experts split per expert as NF4 linears and routers in
bf16 under ``router.linear``, the layout of unsloth's pre-quantised gpt-oss (synth/moe_checkpoint.py
names the sources). A tiny gpt-oss is written on the CPU and loaded back by transformers' own
bitsandbytes path with its expert and router classes swapped for that layout, as unsloth-zoo
does before a 4-bit load."""

from __future__ import annotations

import json
from collections import namedtuple
from pathlib import Path
from typing import Any

import pytest
import required

torch = required.module("torch", "make setup (torch from ci/envs/cpu.txt or ci/envs/hf.txt)")
required.module("bitsandbytes", "pip install -e '.[qlora]'")

from trainperf.synth.cache import LOCKS_FOLDER
from trainperf.synth.model_configs import load_model_fixture
from trainperf.synth.moe_checkpoint import SplitExperts, SplitRouter
from trainperf.synth.quantized_checkpoint import draw_weight, ensure_checkpoint

CPU = torch.device("cpu")
GPT_OSS = load_model_fixture("gpt_oss_120b")["config"]
# gpt-oss-120b's config cut down to 2 layers of 4 experts: every other field as published.
TINY = {
    **GPT_OSS,
    "hidden_size": 64,
    "intermediate_size": 64,
    "head_dim": 16,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "layer_types": ["sliding_attention", "full_attention"],
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
    "experts_per_token": 2,
    "sliding_window": 8,
    "vocab_size": 2048,
    "eos_token_id": 2,
    "pad_token_id": 0,
}
NF4_KEYS = ("absmax", "quant_map", "nested_absmax", "nested_quant_map", "quant_state.bitsandbytes__nf4")


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    info = ensure_checkpoint(
        "gpt_oss_tiny", TINY, device=CPU, root=tmp_path_factory.mktemp("cache"), say=lambda _: None
    )
    # per layer: q, k, v, o and 4 experts x (gate_up, down); lm_head and routers stay bf16
    assert info.marker["quantized_linears"] == 2 * (4 + 2 * 4)
    return info.path


def _tensors(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    shards = set(json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"].values())
    return {name: t for shard in shards for name, t in load_file(str(folder / shard)).items()}


def test_experts_are_split_per_expert_in_nf4_and_routers_stay_bf16(written: Path) -> None:
    tensors = _tensors(written)
    expert = "model.layers.1.mlp.experts.gate_up_projs.3"
    # the keys unsloth tells its split layout by (".experts.gate_up_projs."), never the fused name
    assert not any(k.endswith((".experts.gate_up_proj", ".experts.down_proj")) for k in tensors)
    assert {f"{expert}.weight.{key}" for key in NF4_KEYS} <= set(tensors)
    assert tensors[f"{expert}.weight"].dtype == torch.uint8
    assert tensors[f"{expert}.weight"].numel() == 2 * 64 * 64 // 2  # [2I, H] at two values a byte
    assert (tensors[f"{expert}.bias"].dtype, tensors[f"{expert}.bias"].shape) == (torch.bfloat16, (128,))
    down = "model.layers.0.mlp.experts.down_projs.0"
    assert (tensors[f"{down}.bias"].shape, tensors[f"{down}.weight"].numel()) == ((64,), 64 * 64 // 2)
    router = tensors["model.layers.0.mlp.router.linear.weight"]
    assert (router.dtype, router.shape) == (torch.bfloat16, (4, 64))
    assert 0.01 < router.float().std().item() < 0.03  # gpt-oss's own router initialisation (0.02)
    assert tensors["model.layers.0.self_attn.sinks"].dtype == torch.bfloat16
    assert tensors["lm_head.weight"].dtype == torch.bfloat16


def test_transformers_loads_it_with_the_split_classes(written: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import bitsandbytes.functional as bnb_functional
    from transformers import AutoModelForCausalLM
    from transformers.models.gpt_oss import modeling_gpt_oss

    # unsloth-zoo installs its split classes into this module before a 4-bit load; these have its layout
    monkeypatch.setattr(modeling_gpt_oss, "GptOssExperts", SplitExperts)
    monkeypatch.setattr(modeling_gpt_oss, "GptOssTopKRouter", SplitRouter)
    model, loading = AutoModelForCausalLM.from_pretrained(
        str(written), device_map={"": "cpu"}, local_files_only=True, output_loading_info=True
    )
    assert not loading["missing_keys"] and not loading["unexpected_keys"], loading
    down = model.model.layers[1].mlp.experts.down_projs[2]
    assert type(down).__name__ == "Linear4bit" and type(down.weight).__name__ == "Params4bit"
    router = model.model.layers[1].mlp.router.linear.weight
    assert type(router).__name__ == "Parameter"  # loaded as written, not initialised again
    assert torch.equal(router, draw_weight("model.layers.1.mlp.router.linear.weight", (4, 64), CPU, 0.02, 0))
    restored = bnb_functional.dequantize_4bit(down.weight.data, down.weight.quant_state).float()
    drawn = draw_weight(
        "model.layers.1.mlp.experts.down_projs.2.weight", restored.shape, CPU, 0.02, 0
    ).float()
    assert restored.shape == (64, 64)
    assert (restored - drawn).abs().mean() / drawn.abs().mean() < 0.15  # NF4's error, not another tensor


def test_gpt_oss_120b_on_a_disk_too_small_is_one_line_before_any_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainperf.synth import cache, quantized_checkpoint

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(
        cache.shutil, "disk_usage", lambda _path: usage(10**12, 10**12 - 50 * 10**9, 50 * 10**9)
    )
    with pytest.raises(quantized_checkpoint.NotEnoughDisk) as raised:
        ensure_checkpoint("gpt_oss_120b", GPT_OSS, device=CPU, root=tmp_path, say=lambda _: None)
    line = str(raised.value)
    # 115.6 B of the 116.8 B parameters in NF4 (~59 GB), embeddings and head in bf16 (~2.3 GB)
    assert "\n" not in line and "needs about 65.2 GB" in line and "TRAINPERF_CACHE_DIR" in line, line
    assert [p for p in tmp_path.iterdir() if p.name != LOCKS_FOLDER] == []  # nothing half-written left behind
