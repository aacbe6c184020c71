"""The synthetic pre-quantised 4-bit checkpoint: bnb's serialized NF4 format, cached by config hash,
a half-written entry rebuilt and never loaded. Runs on the CPU (bitsandbytes 0.50 quantises NF4 there)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import required

torch = required.module("torch", "make setup (torch from ci/envs/cpu.txt or ci/envs/hf.txt)")
required.module("bitsandbytes", "pip install -e '.[qlora]'")

from test_moe_checkpoint import TINY as GPT_OSS_TINY

from trainperf.synth.cache import LOCKS_FOLDER
from trainperf.synth.model_configs import load_model_fixture
from trainperf.synth.quantized_checkpoint import (
    COMPLETE_MARKER,
    UnsupportedArchitecture,
    cache_key,
    draw_weight,
    ensure_checkpoint,
)

CPU = torch.device("cpu")
TINY = load_model_fixture("qwen3_tiny")["config"]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cache")
    info = ensure_checkpoint("qwen3_tiny", TINY, device=CPU, root=root, say=lambda _: None)
    assert (
        not info.hit and info.marker["quantized_linears"] == 14
    )  # 7 projections x 2 layers; lm_head stays bf16
    return info.path


def test_transformers_loads_it_as_4bit_and_it_round_trips(written: Path) -> None:
    import bitsandbytes.functional as bnb_functional
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config = json.loads((written / "config.json").read_text())
    quant = config["quantization_config"]
    assert (
        quant["bnb_4bit_quant_type"],
        quant["bnb_4bit_use_double_quant"],
        quant["bnb_4bit_compute_dtype"],
    ) == (
        "nf4",
        True,
        "bfloat16",
    )
    model, loading = AutoModelForCausalLM.from_pretrained(
        str(written), device_map={"": "cpu"}, local_files_only=True, output_loading_info=True
    )
    assert not loading["missing_keys"] and not loading["unexpected_keys"]
    down = model.model.layers[1].mlp.down_proj
    assert type(down.weight).__name__ == "Params4bit"
    assert type(model.lm_head.weight).__name__ == "Parameter"
    restored = bnb_functional.dequantize_4bit(down.weight.data, down.weight.quant_state).float()
    drawn = draw_weight("model.layers.1.mlp.down_proj.weight", restored.shape, CPU, 0.02, 0).float()
    assert (restored - drawn).abs().mean() / drawn.abs().mean() < 0.15  # NF4's error, not another tensor
    assert AutoTokenizer.from_pretrained(str(written), local_files_only=True).vocab_size == TINY["vocab_size"]


def test_cache_hit_and_half_written_entry_rebuilt(written: Path) -> None:
    root = written.parent
    again = ensure_checkpoint("qwen3_tiny", TINY, device=CPU, root=root, say=lambda _: None)
    assert again.hit and again.path == written
    # A killed writer leaves a temporary folder: removed, never taken for the entry.
    stale = root / f"{written.name}.tmp-999999999"
    stale.mkdir()
    (stale / "model-00001.safetensors").write_bytes(b"torn")
    # An entry without its completion marker is half-written: rebuilt, not loaded.
    (written / COMPLETE_MARKER).unlink()
    (written / "model-00001.safetensors").write_bytes(b"torn")
    said: list[str] = []
    rebuilt = ensure_checkpoint("qwen3_tiny", TINY, device=CPU, root=root, say=said.append)
    assert not rebuilt.hit and rebuilt.rebuilt_partial and (written / COMPLETE_MARKER).is_file()
    assert not stale.exists()
    assert any("half-written" in line for line in said) and all("\n" not in line for line in said)
    assert os.path.getsize(written / "model-00001.safetensors") > 1000


def test_config_hash_keys_the_cache() -> None:
    changed = dict(TINY, num_hidden_layers=3)
    assert cache_key("qwen3_tiny", TINY, 0) == cache_key("qwen3_tiny", dict(TINY), 0)
    assert cache_key("qwen3_tiny", TINY, 0) != cache_key("qwen3_tiny", changed, 0)
    assert cache_key("qwen3_tiny", TINY, 0) != cache_key("qwen3_tiny", TINY, 1)


def test_fused_experts_of_an_unknown_layout_are_refused_in_one_line(tmp_path: Path) -> None:
    # Qwen3-MoE's experts are fused 3-D tensors in transformers 5; only gpt-oss's 4-bit layout is known
    config = dict(
        TINY, model_type="qwen3_moe", num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32
    )
    with pytest.raises(
        UnsupportedArchitecture,
        match="qwen3_moe: 4 parameters.*fused 3-D tensors.*only for gpt_oss.*model_path",
    ) as raised:
        ensure_checkpoint("qwen3_moe_tiny", config, device=CPU, root=tmp_path)
    assert "\n" not in str(raised.value)
    assert not any(p for p in tmp_path.glob("*/*") if p.parent.name != LOCKS_FOLDER)  # nothing half-written


# dense, and gpt-oss's split experts: per-expert NF4 tensors, bf16 routers and biases
@pytest.mark.parametrize(("name", "config"), [("qwen3_tiny", TINY), ("gpt_oss_tiny", GPT_OSS_TINY)])
def test_the_room_asked_for_matches_what_is_written(
    name: str, config: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainperf.synth import quantized_checkpoint

    asked: list[int] = []
    check = quantized_checkpoint.require_room
    monkeypatch.setattr(
        quantized_checkpoint,
        "require_room",
        lambda folder, needed, what, **kw: (asked.append(needed), check(folder, needed, what, **kw)),
    )
    info = ensure_checkpoint(name, config, device=CPU, root=tmp_path, say=lambda _: None)
    written = json.loads((info.path / "model.safetensors.index.json").read_text())["metadata"]["total_size"]
    assert asked and abs(asked[0] / written - 1) < 0.03, (asked, written)


def test_a_disk_too_small_is_one_line_before_any_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from collections import namedtuple

    from trainperf.synth import cache, quantized_checkpoint

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(cache.shutil, "disk_usage", lambda _path: usage(10**9, 10**9 - 4096, 4096))
    with pytest.raises(
        quantized_checkpoint.NotEnoughDisk,
        match=r"needs about .* GB under .* are free: point TRAINPERF_CACHE_DIR",
    ):
        ensure_checkpoint("qwen3_tiny", TINY, device=CPU, root=tmp_path, say=lambda _: None)
    assert [
        p for p in tmp_path.iterdir() if p.name != LOCKS_FOLDER
    ] == []  # no half-written entry left behind


def test_the_unsloth_case_is_skipped_with_that_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from collections import namedtuple

    from trainperf.case import Case
    from trainperf.synth import cache
    from trainperf.workloads.protocol import SkipCase
    from trainperf.workloads.sft_unsloth import _checkpoint

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(cache.shutil, "disk_usage", lambda _path: usage(10**9, 10**9 - 4096, 4096))
    monkeypatch.setenv("TRAINPERF_CACHE_DIR", str(tmp_path))
    case = Case(
        family="sft_unsloth",
        environment="unsloth",
        model="qwen3_tiny",
        method="qlora",
        profile="short",
        batch_size=4,
    )
    with pytest.raises(SkipCase, match="TRAINPERF_CACHE_DIR"):
        _checkpoint(case, CPU, 0)


def test_unsloth_compiles_outside_the_run_folder_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """unsloth_zoo writes its generated modules where UNSLOTH_COMPILE_LOCATION says, by default
    into the working directory: the case's run folder. A run gets a folder of its own, gone after."""
    from trainperf.workloads.sft_unsloth import _compile_outside_the_run_folder

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("UNSLOTH_COMPILE_LOCATION", raising=False)
    with _compile_outside_the_run_folder():
        folder = Path(os.environ["UNSLOTH_COMPILE_LOCATION"])
        assert folder.is_dir() and not folder.is_relative_to(tmp_path)
        (folder / "UnslothSFTTrainer.py").write_text("# generated\n")
    assert not folder.exists() and "UNSLOTH_COMPILE_LOCATION" not in os.environ
    monkeypatch.setenv("UNSLOTH_COMPILE_LOCATION", str(tmp_path / "mine"))
    with _compile_outside_the_run_folder():
        assert os.environ["UNSLOTH_COMPILE_LOCATION"] == str(tmp_path / "mine")  # the user's is kept
