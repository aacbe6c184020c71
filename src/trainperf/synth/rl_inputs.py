"""Hermetic inputs of an RL run, written as files because verl reads files (child side).

- A model folder: ``config.json`` from ``fixtures/models/`` (special token ids moved into the
  synthetic tokenizer's range, which changes no shape), random weights written as safetensors
  shard by shard (one tensor at a time on the CPU, never the whole model), ``generation_config.json``,
  and the local word-level tokenizer (``tokenizer.json`` + ``tokenizer_config.json`` with a chat
  template), so that ``AutoTokenizer.from_pretrained(folder)`` and vLLM/SGLang load it offline.
- A GSM8K-shaped parquet in the schema of verl's ``examples/data_preprocess/gsm8k.py``
  (``data_source``, ``prompt`` as a chat list, ``ability``, ``reward_model`` {style,
  ground_truth}, ``extra_info``) whose prompts are exactly ``prompt_len`` tokens once verl has
  applied the chat template.

Initialisation follows the architecture's ``_init_weights`` for dense decoders (normal with
``initializer_range`` for matrices, ones for norms, zeros for biases), drawn per tensor from a
seeded generator so that the same case gets the same weights in every run. The model folder is
therefore cached (``ensure_model_folder``, under ``TRAINPERF_CACHE_DIR/models``, keyed by the
config, the seed and the format) and shared by every run and engine: the 14B Phi-4 folder is
29 GB and takes minutes to draw, which a run folder per case and engine would repeat.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainperf.synth import cache
from trainperf.synth.model_configs import load_model_fixture
from trainperf.synth.tokenizer import FIRST_REGULAR_ID, SPECIAL_TOKENS, build_tokenizer, regular_id_end

SHARD_BYTES = 2 << 30
FORMAT_VERSION = 1
"""Bump when the files ``write_model_folder`` writes change, so that older cache entries are not reused."""
DATA_SOURCE = "trainperf/synthetic_gsm8k"
SPECIAL_IDS = {f"{name}_token_id": SPECIAL_TOKENS.index(f"<{name}>") for name in ("pad", "bos", "eos")}


@dataclass(frozen=True, slots=True)
class ModelFolder:
    path: Path
    parameters: int
    shards: int
    tokenizer: Path
    """The tokenizer alone, in a folder without config.json (see TOKENIZER_SUBFOLDER)."""


# transformers 5 (5.9 and 5.17 at least) loads the tokenizer of a folder whose config.json says
# model_type "qwen2" as Qwen2Tokenizer whatever tokenizer_config.json names
# (MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS in tokenization_auto.py): a byte-level BPE rebuilt
# from our word vocabulary that encodes every synthetic word to nothing. On an H100, verl's
# Qwen2.5 prompts came out 6 tokens long instead of 512. The tokenizer is also saved on its own,
# where AutoTokenizer reads tokenizer_config.json, and verl is pointed at it (tokenizer_path).
TOKENIZER_SUBFOLDER = "tokenizer"


def model_config(name: str, dtype: str = "bfloat16") -> dict[str, Any]:
    """The fixture's config.json, with the special ids of the synthetic tokenizer."""
    config = dict(load_model_fixture(name)["config"])
    config.update(SPECIAL_IDS, torch_dtype=dtype)
    config.pop("dtype", None)
    return config


def _init_tensor(name: str, shape: tuple[int, ...], std: float, generator: Any, dtype: Any) -> Any:
    import torch

    if name.endswith("bias"):
        return torch.zeros(shape, dtype=dtype)
    if "norm" in name:
        return torch.ones(shape, dtype=dtype)
    return torch.randn(shape, generator=generator, dtype=torch.float32).mul_(std).to(dtype)


def write_model_folder(name: str, folder: Path, *, dtype: str = "bfloat16", seed: int = 0) -> ModelFolder:
    """Write a loadable checkpoint of fixture ``name`` with random weights into ``folder``."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoModelForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    config = model_config(name, dtype)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    (folder / "generation_config.json").write_text(
        json.dumps({k: v for k, v in SPECIAL_IDS.items()}, indent=2)
    )
    hf_config = AutoConfig.from_pretrained(folder)
    with torch.device("meta"):
        skeleton = AutoModelForCausalLM.from_config(hf_config)
    torch_dtype = getattr(torch, dtype)
    planned = sum(parameter.numel() for parameter in skeleton.parameters())
    cache.require_room(
        folder, planned * torch_dtype.itemsize,
        f"the synthetic {name} checkpoint ({planned / 1e9:.1f}B parameters, {dtype})", instead="a local model_path",
    )  # fmt: skip
    std = float(getattr(hf_config, "initializer_range", 0.02))
    generator = torch.Generator().manual_seed(seed)
    writer = _ShardWriter(folder, save_file)
    total = 0
    # named_parameters lists a tied lm_head once (as the embedding), as the hub checkpoints store it.
    for tensor_name, parameter in skeleton.named_parameters():
        tensor = _init_tensor(tensor_name, tuple(parameter.shape), std, generator, torch_dtype)
        writer.add(tensor_name, tensor)
        total += tensor.numel()
    weight_map = writer.close()
    index = {"metadata": {"total_size": writer.total_bytes}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index, indent=1, sort_keys=True))
    tokenizer = build_tokenizer(int(config["vocab_size"]))
    # At the root too: an engine that loads the tokenizer from the model path (vLLM) needs one,
    # and uses it only to detokenise (verl hands it token ids).
    for target in (folder, folder / TOKENIZER_SUBFOLDER):
        _save_tokenizer(tokenizer, target)
    return ModelFolder(folder, total, len(set(weight_map.values())), folder / TOKENIZER_SUBFOLDER)


def model_cache_key(name: str, config: dict[str, Any], seed: int) -> str:
    """``<name>-<hash>``: the hash covers the config (dtype included), the seed and the format."""
    return cache.entry_key(name, {"config": config, "seed": seed, "format": FORMAT_VERSION})


def ensure_model_folder(
    name: str,
    *,
    dtype: str = "bfloat16",
    seed: int = 0,
    root: Path | None = None,
    say: Callable[[str], None] = print,
) -> tuple[ModelFolder, cache.CacheEntry]:
    """The cached model folder of fixture ``name`` (written first if needed) and its cache entry."""
    key = model_cache_key(name, model_config(name, dtype), seed)

    def build(folder: Path) -> dict[str, Any]:
        written = write_model_folder(name, folder, dtype=dtype, seed=seed)
        return {"parameters": written.parameters, "shards": written.shards, "format": FORMAT_VERSION}

    entry = cache.ensure_entry(root or cache.cache_root("models"), key, build, say=say)
    folder = ModelFolder(
        entry.path,
        int(entry.marker["parameters"]),
        int(entry.marker["shards"]),
        entry.path / TOKENIZER_SUBFOLDER,
    )
    return folder, entry


def _save_tokenizer(tokenizer: Any, folder: Path) -> None:
    tokenizer.save_pretrained(folder)
    # transformers 5 saves the template as chat_template.jinja; older loaders (an engine's own
    # transformers) read it from tokenizer_config.json, so it goes there too.
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    tokenizer_config.setdefault("chat_template", tokenizer.chat_template)
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2))


class _ShardWriter:
    """Tensors into safetensors files of at most ``SHARD_BYTES``: one shard in memory at a time."""

    def __init__(self, folder: Path, save_file: Any) -> None:
        self.folder, self.save_file = folder, save_file
        self.current: dict[str, Any] = {}
        self.size = 0
        self.total_bytes = 0
        self.files: list[str] = []
        self.weight_map: dict[str, str] = {}

    def add(self, name: str, tensor: Any) -> None:
        nbytes = tensor.numel() * tensor.element_size()
        if self.current and self.size + nbytes > SHARD_BYTES:
            self._write()
        self.current[name] = tensor
        self.size += nbytes
        self.total_bytes += nbytes

    def _write(self) -> None:
        filename = f"part-{len(self.files) + 1:05d}.safetensors"
        self.save_file(self.current, str(self.folder / filename), metadata={"format": "pt"})
        self.weight_map.update(dict.fromkeys(self.current, filename))
        self.files.append(filename)
        self.current, self.size = {}, 0

    def close(self) -> dict[str, str]:
        """Write the last shard and rename all to the hub's ``model-0000k-of-0000N`` names."""
        if self.current:
            self._write()
        count = len(self.files)
        renamed = {old: f"model-{i + 1:05d}-of-{count:05d}.safetensors" for i, old in enumerate(self.files)}
        for old, new in renamed.items():
            (self.folder / old).rename(self.folder / new)
        return {key: renamed[old] for key, old in self.weight_map.items()}


def chat_prompt(words: list[str]) -> list[dict[str, str]]:
    return [{"role": "user", "content": " ".join(words)}]


def template_overhead(tokenizer: Any) -> int:
    """Tokens the chat template adds around an empty user message (generation prompt included)."""
    return len(_chat_ids(tokenizer, chat_prompt([])))


def _chat_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if hasattr(ids, "keys"):  # transformers 5 returns a BatchEncoding
        ids = ids["input_ids"]
    return list(ids)


def write_gsm8k_parquet(path: Path, tokenizer: Any, *, rows: int, prompt_len: int, seed: int = 0) -> int:
    """``rows`` synthetic prompts, each exactly ``prompt_len`` tokens after the chat template.

    Words are drawn from the regular vocabulary with a seeded generator (no numpy, no torch);
    the ground truth is one of the prompt's words, so the rule reward can be earned."""
    import random

    import pyarrow as pa
    import pyarrow.parquet as pq

    content_len = prompt_len - template_overhead(tokenizer)
    if content_len < 1:
        raise ValueError(f"prompt length {prompt_len} is shorter than the chat template itself")
    vocab = regular_id_end(len(tokenizer))
    rng = random.Random(seed)
    records: list[dict[str, Any]] = []
    for index in range(rows):
        words = [f"w{rng.randrange(FIRST_REGULAR_ID, vocab)}" for _ in range(content_len)]
        answer = words[rng.randrange(content_len)]
        question = " ".join(words)
        records.append({
            "data_source": DATA_SOURCE,
            "prompt": chat_prompt(words),
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": answer},
            "extra_info": {"split": "train", "index": index, "answer": answer, "question": question},
        })  # fmt: skip
    got = len(_chat_ids(tokenizer, records[0]["prompt"])) if records else prompt_len
    if got != prompt_len:  # a tokenizer that splits or drops the synthetic words
        raise ValueError(
            f"a synthetic prompt of {content_len} words is {got} tokens with {type(tokenizer).__name__}, "
            f"not {prompt_len}: synthetic prompts need trainperf's own tokenizer; with a real "
            "checkpoint's tokenizer give the case a dataset_path"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(records), path)
    return content_len
