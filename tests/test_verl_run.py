"""The verl run, as far as a CPU without verl can take it: Hydra overrides checked against each
release's config keys, per-phase metrics and their verdicts, the micro-batch cliff bounded by
pre-flight rejections, hermetic inputs on the tiny model, and the child's skip without verl.

Config keys: ``tests/data/verl/ppo_trainer_keys-<version>.txt``, flattened from verl's
``verl/trainer/config/_generated_ppo_trainer.yaml`` of 0.7.0, 0.8.0 and 0.9.1.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trainperf.case import Case
from trainperf.case_record import CaseRecord
from trainperf.families import family_of
from trainperf.families.rl_verl.knobs import knobs_of
from trainperf.families.rl_verl.versions import rule_set
from trainperf.fingerprint_record import Fingerprint
from trainperf.judge.compare import Verdict, compare_case
from trainperf.judge.metrics import METRICS
from trainperf.measure.measurement import measure_run, pool_runs
from trainperf.plan.cliff import Probe, ProbeFailed, find_cliff
from trainperf.result import CaseResult
from trainperf.synth.cache import LOCKS_FOLDER
from trainperf.workloads.verl.overrides import Inputs, overrides

DATA = Path(__file__).parent / "data" / "verl"
SRC = Path(__file__).resolve().parents[1] / "src"
INPUTS = Inputs(
    model_dir=Path("/m"),
    tokenizer_dir=Path("/m/tokenizer"),
    train_parquet=Path("/d.parquet"),
    reward_file=Path("/r.py"),
    work_dir=Path("/w"),
    experiment="x",
)


def rl(alg: str = "ppo", micro: int | None = 16, gpus: int = 1, **knobs: Any) -> Case:
    extra = {"alg": alg, "eng": "vllm", "mini": "32", "tp": "1", **{k: str(v) for k, v in knobs.items()}}
    return Case(
        family="rl_verl",
        model="qwen2_5_0_5b",
        method="full",
        profile="gsm8k",
        batch_size=64,
        micro_batch_size=micro,
        gpus=gpus,
        extra=tuple(extra.items()),
    )


def config_keys(version: str) -> set[str]:
    lines = (DATA / f"ppo_trainer_keys-{version}.txt").read_text().splitlines()
    return {line for line in lines if line and not line.startswith("#")}


CASES = {
    "ppo": rl(),
    "grpo-dyn-offload-kl-natural": rl("grpo", None, 2, n=4, tp=2, dyn=8192, offl=1, kl=1, len="natural"),
}


@pytest.mark.parametrize("version", ["0.7.0", "0.8.0", "0.9.1"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_override_names_a_key_of_that_releases_config(version: str, name: str) -> None:
    args = overrides(knobs_of(CASES[name]), INPUTS, steps=5, rules=rule_set(version))
    keys = [arg.split("=", 1)[0] for arg in args if not arg.startswith("hydra.")]
    assert len(keys) == len(set(keys))
    assert sorted(set(keys) - config_keys(version)) == []


def test_overrides_follow_the_case() -> None:
    ppo = dict(a.split("=", 1) for a in overrides(knobs_of(CASES["ppo"]), INPUTS, steps=5, rules="engine"))
    assert ppo["algorithm.adv_estimator"] == "gae" and ppo["critic.ppo_micro_batch_size_per_gpu"] == "16"
    assert ppo["actor_rollout_ref.rollout.tensor_model_parallel_size"] == "1"  # verl's default is 2
    assert ppo["actor_rollout_ref.rollout.ignore_eos"] == "True"
    assert ppo["reward.custom_reward_function.path"] == "/r.py"
    assert ppo["trainer.total_training_steps"] == "5" and ppo["trainer.logger"] == "[console,file]"
    grpo = dict(
        a.split("=", 1)
        for a in overrides(knobs_of(CASES["grpo-dyn-offload-kl-natural"]), INPUTS, steps=5, rules="workers")
    )
    assert grpo["algorithm.adv_estimator"] == "grpo" and not any(k.startswith("critic.") for k in grpo)
    assert grpo["actor_rollout_ref.actor.use_dynamic_bsz"] == "True"
    assert "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu" not in grpo
    assert grpo["actor_rollout_ref.actor.kl_loss_type"] == "low_var_kl"
    assert grpo["actor_rollout_ref.actor.fsdp_config.optimizer_offload"] == "True"
    assert "actor_rollout_ref.rollout.ignore_eos" not in grpo  # lengths vary naturally
    assert grpo["custom_reward_function.path"] == "/r.py"  # 0.7's top-level key


def steps(gen: list[float], rest: float = 2.0) -> list[dict[str, Any]]:
    return [
        {
            "step": i + 1,
            "t_end": 100.0 + i,
            "duration_s": g + 5.0 + rest,
            "tokens": 1000,
            "phases": {"gen": g, "update_actor": 5.0},
            "throughput": 1000 / (g + 5.0 + rest),
        }
        for i, g in enumerate(gen)
    ]


def test_phases_become_metrics_with_per_step_samples() -> None:
    gen = [20.0, 10.0, 10.2, 9.9, 10.1, 10.0, 9.8, 10.3, 10.0, 10.1, 9.9, 10.0]
    run = measure_run({"steps": steps(gen)}, [], samples_per_step=16, idle_mem_b=None)
    assert run.info.warmup_steps == 1
    assert run.metrics["phase_gen_s"] == pytest.approx(10.0)
    assert run.metrics["phase_update_actor_s"] == 5.0
    assert run.metrics["phase_remainder_s"] == pytest.approx(2.0)
    assert run.metrics["throughput_per_gpu"] == pytest.approx(1000 / 17.0)
    pooled = pool_runs([run])
    assert pooled["phase_gen_s"].samples == gen[1:] and pooled["phase_gen_s"].keys == run.step_keys


def result_of(gen: list[float]) -> CaseResult:
    run = measure_run({"steps": steps(gen)}, [], samples_per_step=16, idle_mem_b=None)
    return CaseResult(
        case_id="c",
        case=CaseRecord(),
        gpu_class="h100",
        outcome="ok",
        fingerprint=Fingerprint(),
        metrics=pool_runs([run]),
    )


def test_a_slower_generation_phase_fails_on_its_own_metric_and_the_remainder_never_gates() -> None:
    base = [10.0 + 0.1 * (i % 3) for i in range(12)]
    slow_gen = result_of([g * 1.5 for g in base])
    verdict = compare_case(slow_gen, result_of(base), METRICS, expectation="ok", timing_comparable=True)
    by_name = {m.metric: m for m in verdict.metrics}
    assert verdict.verdict is Verdict.REGRESSED and "phase_gen_s" in verdict.reason
    assert by_name["phase_gen_s"].note.startswith("paired over 11 steps")
    assert by_name["phase_update_actor_s"].verdict is Verdict.PASS
    assert by_name["throughput_per_gpu"].verdict is Verdict.REGRESSED
    assert not by_name["phase_remainder_s"].gated


def test_an_expected_config_error_passes_without_a_baseline() -> None:
    result = CaseResult(
        case_id="c",
        case=CaseRecord(),
        gpu_class="maxq",
        outcome="config_error",
        fingerprint=Fingerprint(),
        message="x",
    )
    assert not compare_case(result, None, METRICS, expectation="config_error", timing_comparable=True).fails
    assert compare_case(result, None, METRICS, expectation="ok", timing_comparable=True).fails


def test_the_micro_batch_cliff_is_bounded_by_rejections_as_in_e1() -> None:
    """E1 on 2 Max-Q: 16 fits, 32 and 64 run out of memory, >= 128 is rejected before launch."""

    def probe(value: int) -> Probe:
        if value >= 128:
            return Probe(value, False, "config_error", "rejected by pre-flight")
        return Probe(value, value <= 16, "ok" if value <= 16 else "oom")

    cliff = find_cliff("micro_batch_size", 1, 512, probe)
    assert (cliff.largest_fit, cliff.smallest_oom) == (16, 32)
    # Powers of two only (17 would be rejected), from the middle: micro-batch 1, the slowest
    # probe, is never launched when something above it fits; 128 costs nothing (pre-flight).
    assert [p.value for p in cliff.probes] == [16, 128, 32]
    assert cliff.launched == 2
    rejected_only = find_cliff(
        "micro_batch_size", 1, 512, lambda v: Probe(v, v <= 64, "ok" if v <= 64 else "config_error")
    )
    assert rejected_only.describe() == "micro_batch_size: largest fit 64, a configuration error from 128"
    with pytest.raises(ProbeFailed):
        find_cliff("micro_batch_size", 128, 512, lambda v: Probe(v, False, "config_error"))


def test_rejected_micro_batches_are_cut_from_the_top_before_the_first_launch() -> None:
    """The 3B one-GPU case on an H100: mini-batch 128 per GPU, micro-batch 16 runs out of memory."""
    launched: list[int] = []

    def probe(value: int) -> Probe:
        launched.append(value)
        return Probe(value, value <= 8, "ok" if value <= 8 else "oom")

    def rejected(value: int) -> str | None:
        return f"{value} does not divide 128" if value > 128 else None

    cliff = find_cliff("micro_batch_size", 1, 512, probe, rejected=rejected)
    assert (cliff.largest_fit, cliff.smallest_oom) == (8, 16)
    assert launched == [8, 32, 16]  # three launches, none of them the slow micro-batches 1, 2, 4
    assert [p.outcome for p in cliff.probes[:2]] == ["config_error", "config_error"] and cliff.launched == 3

    everything_fits = find_cliff(
        "micro_batch_size", 1, 512, lambda v: Probe(v, True, "ok"), rejected=rejected
    )
    assert everything_fits.describe() == "micro_batch_size: largest fit 128, a configuration error from 256"
    with pytest.raises(ProbeFailed, match="does not divide"):
        find_cliff("micro_batch_size", 256, 512, probe, rejected=rejected)


def test_on_the_micro_batch_axis_nothing_fits_is_found_by_reaching_the_low_end_last() -> None:
    launched: list[int] = []

    def probe(value: int) -> Probe:
        launched.append(value)
        return Probe(value, False, "oom")

    cliff = find_cliff("micro_batch_size", 1, 64, probe)
    assert cliff.largest_fit is None and cliff.smallest_oom == 1
    assert launched[-1] == 1 and len(launched) == len(set(launched)) == 3  # 8, 2, 1 of 1..64


def test_micro_batch_size_appears_in_the_id_only_when_set() -> None:
    sft = Case(family="sft_hf", model="qwen3_8b", method="lora", profile="short", batch_size=4)
    assert sft.id == "sft_hf-qwen3_8b-lora-short-b4"
    assert rl().id == "rl_verl-qwen2_5_0_5b-full-gsm8k-b64-mb16-algppo-engvllm-mini32-tp1"


def test_hermetic_inputs_on_the_tiny_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder vLLM/verl load offline: sharded safetensors, config, tokenizer with a chat
    template; a parquet in verl's gsm8k schema whose prompts are exactly the prompt length."""
    import pyarrow.parquet as pq
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainperf.synth import rl_inputs
    from trainperf.workloads.verl_reward import compute_score

    monkeypatch.setattr(rl_inputs, "SHARD_BYTES", 400_000)  # the tiny model's 1.3 MB in several shards
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = rl_inputs.write_model_folder("qwen3_tiny", tmp_path / "model", dtype="float32")
    assert folder.shards >= 3 and folder.parameters == 336_256
    index = json.loads((folder.path / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) == folder.shards
    tokenizer = AutoTokenizer.from_pretrained(folder.path, local_files_only=True)
    assert json.loads((folder.path / "tokenizer_config.json").read_text())["chat_template"]
    model = AutoModelForCausalLM.from_pretrained(folder.path, local_files_only=True)
    assert sum(p.numel() for p in model.parameters()) == 336_256
    assert model.config.eos_token_id == tokenizer.eos_token_id == 2
    parquet = tmp_path / "train.parquet"
    rl_inputs.write_gsm8k_parquet(parquet, tokenizer, rows=6, prompt_len=48, seed=3)
    rows = pq.read_table(parquet).to_pylist()
    assert len(rows) == 6 and set(rows[0]) == {
        "data_source",
        "prompt",
        "ability",
        "reward_model",
        "extra_info",
    }
    assert rows[0]["reward_model"]["style"] == "rule" and rows[0]["prompt"][0]["role"] == "user"
    for row in rows:
        ids = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=True)
        assert len(ids["input_ids"] if hasattr(ids, "keys") else ids) == 48
    truth = rows[0]["reward_model"]["ground_truth"]
    assert compute_score("s", f"w9 {truth}", truth) == 1.0
    assert compute_score("s", f"{truth} w9", truth) == 0.1
    assert compute_score("s", "w9", truth) == 0.0


def test_the_model_folder_is_written_once_and_shared_by_every_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 14B folder of E3's case is 29 GB and minutes of drawing: one cache entry per config and
    seed serves every run and engine, instead of a copy in each run folder."""
    from safetensors.torch import load_file

    from trainperf.synth import rl_inputs

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    first, entry = rl_inputs.ensure_model_folder(
        "qwen3_tiny", dtype="float32", root=tmp_path, say=lambda _: None
    )
    again, hit = rl_inputs.ensure_model_folder(
        "qwen3_tiny", dtype="float32", root=tmp_path, say=lambda _: None
    )
    assert not entry.hit and hit.hit and again == first and first.parameters == 336_256
    # What a fresh runner pays for it, reported by the run that wrote it and by the one that found it.
    assert (hit.record().kind, hit.record().bytes) == (tmp_path.name, entry.record().bytes)  # root's name
    assert entry.record().bytes and entry.record().bytes > 336_256 * 4
    other_seed, _ = rl_inputs.ensure_model_folder(
        "qwen3_tiny", dtype="float32", seed=1, root=tmp_path, say=lambda _: None
    )
    assert other_seed.path != first.path

    def embedding(folder: Path) -> Any:
        return load_file(str(min(folder.glob("model-*.safetensors"))))["model.embed_tokens.weight"]

    assert not embedding(first.path).equal(embedding(other_seed.path))  # the seed is part of the key
    assert (first.tokenizer / "tokenizer_config.json").is_file()


def test_a_disk_too_small_for_the_model_skips_the_case_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from collections import namedtuple

    from trainperf.synth import cache
    from trainperf.workloads.protocol import SkipCase
    from trainperf.workloads.rl_verl import prepare_inputs

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(cache.shutil, "disk_usage", lambda _path: usage(10**9, 10**9 - 4096, 4096))
    monkeypatch.setenv("TRAINPERF_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(
        SkipCase,
        match=r"synthetic qwen3_tiny checkpoint .* needs about .* TRAINPERF_CACHE_DIR .* local model_path",
    ):
        prepare_inputs(rl().replace(model="qwen3_tiny"), tmp_path / "work", rows=2, prompt_len=32, seed=0)
    left = [p for p in (tmp_path / "cache" / "models").iterdir() if p.name != LOCKS_FOLDER]
    assert not left  # nothing half-written left behind


def test_a_qwen2_model_folder_gives_verl_a_tokenizer_that_keeps_the_synthetic_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen on an H100: transformers 5 loads a folder whose config says model_type qwen2 with
    Qwen2Tokenizer, which encoded every synthetic word to nothing (verl's prompts: 6 tokens, not
    512). verl reads the tokenizer from its own folder (tokenizer_path), where it stays ours."""
    from transformers import AutoTokenizer

    from trainperf.synth import rl_inputs

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = rl_inputs.write_model_folder("qwen3_tiny", tmp_path / "model", dtype="float32")
    config = json.loads((folder.path / "config.json").read_text())
    config.update(model_type="qwen2", architectures=["Qwen2ForCausalLM"])  # Qwen2.5's, on the tiny shapes
    (folder.path / "config.json").write_text(json.dumps(config))
    assert not (folder.tokenizer / "config.json").exists()
    tokenizer = AutoTokenizer.from_pretrained(folder.tokenizer, local_files_only=True)
    assert tokenizer.encode("w100 w200", add_special_tokens=False) == [100, 200]
    assert rl_inputs.write_gsm8k_parquet(tmp_path / "t.parquet", tokenizer, rows=2, prompt_len=40) == 32


def test_synthetic_prompts_refuse_a_tokenizer_that_does_not_keep_their_length(tmp_path: Path) -> None:
    from trainperf.synth import rl_inputs

    class DropsWords:  # what Qwen2Tokenizer did to them: only the template's own tokens remain
        def __len__(self) -> int:
            return 2048

        def apply_chat_template(self, messages: list[dict[str, str]], **kwargs: Any) -> list[int]:
            return [1] * 6

    with pytest.raises(ValueError, match=r"is 6 tokens with DropsWords, not 64.*dataset_path"):
        rl_inputs.write_gsm8k_parquet(tmp_path / "t.parquet", DropsWords(), rows=2, prompt_len=64)
    assert not (tmp_path / "t.parquet").exists()


def test_the_child_skips_with_the_reason_where_verl_is_not_installed(tmp_path: Path) -> None:
    spec = {"case": rl().to_dict(), "steps": 2, "device": "cpu", "seed": 0, "out_dir": str(tmp_path)}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, "-m", "trainperf.workloads", str(tmp_path / "spec.json")],
        env=env,
        check=False,
        timeout=120,
    )
    result = json.loads((tmp_path / "result.json").read_text())
    assert (done.returncode, result["outcome"]) == (4, "skipped")
    assert result["message"].startswith("verl is not installed") and "verl-vllm" in result["message"]


FAKE_MAIN_PPO = """
import importlib, json, os, sys, time
args = dict(a.split("=", 1) for a in sys.argv[1:])
print("(TaskRunner pid=1) {'gpu_memory_utilization': 0.5}", flush=True)
def stamp():
    return time.strftime("%Y-%m-%d %H:%M:%S") + ",000"
print(f"{stamp()}\tINFO worker.py:2024 -- Started a local Ray instance.", flush=True)
print(f"(TaskRunner pid=1) INFO:{stamp()}:train and validate dataloader initialized", flush=True)
print(f"(TaskRunner pid=1) INFO:{stamp()}:actor and ref model engine initialized", flush=True)
print(f"(TaskRunner pid=1) INFO:{stamp()}:all initialize finished, ready to fit", flush=True)
print("compile cache disabled: " + os.environ.get("VLLM_DISABLE_COMPILE_CACHE", "unset"), flush=True)
if "global_profiler.save_path" in args:  # verl's torch profiler: one trace per role and stage
    import gzip
    step = args["global_profiler.steps"].strip("[]")
    os.makedirs(args["global_profiler.save_path"], exist_ok=True)
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 50}]
    for role, stage in (("actor-rollout", "actor-update"), ("value-model", "train-batch"),
                        ("actor-rollout", "actor-compute-log-prob")):  # names as verl 0.9.1 sanitises them
        name = f"{role}_{stage}_step{step}_rank0-of-1_pid7_20261124.json.gz"
        with gzip.open(os.path.join(args["global_profiler.save_path"], name), "wt") as trace:
            json.dump({"traceEvents": events}, trace)
if os.environ.get("TRAINPERF_VERL_PLANT"):  # as a worker's model would call attention
    import torch
    print(f"attention op: {torch.nn.functional.scaled_dot_product_attention.__name__}", flush=True)
if "critic.model.path" in args:  # as verl's worker: a module that bound the loader at its import
    from verl.workers import fsdp_workers
    critic = fsdp_workers.load_valuehead_model(args["critic.model.path"], None, None, False)
    print(f"critic attention: {critic.config._attn_implementation}", flush=True)
mode = os.environ["FAKE_VERL_MODE"]
with open(os.path.join(os.environ["RAY_TMPDIR"], "session.log"), "w") as ray_log:  # as ray.init() would
    ray_log.write(os.environ.get("RAY_ADDRESS", "no address: a Ray of its own"))
with open("ray_home.txt", "w") as told:
    told.write(os.environ["RAY_TMPDIR"])
lines = open(os.environ["FAKE_VERL_SAMPLE"]).read().splitlines()
with open(os.environ["VERL_FILE_LOGGER_PATH"], "w") as log:
    for index in range(int(args["trainer.total_training_steps"])):  # the recording, replayed as needed
        line = json.dumps({**json.loads(lines[index % len(lines)]), "step": index + 1})
        if mode == "oom" and json.loads(line)["step"] == 2:
            print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.32 GiB.", flush=True)
            sys.exit(1)
        record = json.loads(line)  # the recorded run's lengths replaced by this case's, as verl would log them
        record["data"]["prompt_length/mean"] = 6.0 if mode == "short-prompts" else float(args["data.max_prompt_length"])
        record["data"]["response_length/mean"] = float(args["data.max_response_length"])
        log.write(json.dumps(record) + "\\n")
        log.flush()
        time.sleep(0.6)
"""


# verl/__init__.py's plug-in hook (0.9.1), run in every process that imports verl
FAKE_VERL_INIT = """
import importlib, os
for name in filter(None, os.getenv("VERL_USE_EXTERNAL_MODULES", "").split(",")):
    importlib.import_module(name)
"""
# verl's load_valuehead_model as far as attention goes: flash_attention_2 whatever it is asked.
FAKE_VALUEHEAD_LOADER = """
import importlib.util, types
def load_valuehead_model(local_path, torch_dtype, model_config, trust_remote_code):
    if importlib.util.find_spec("flash_attn") is None:
        raise ImportError("FlashAttention2 has been toggled on, but the package flash_attn seems to be not installed")
    return types.SimpleNamespace(config=types.SimpleNamespace(_attn_implementation="flash_attention_2"))
"""


@pytest.fixture
def fake_verl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in ``verl`` package (version 0.9.1) whose ``main_ppo`` replays a recorded JSONL."""
    site = tmp_path / "site"
    package = site / "verl" / "trainer"
    package.mkdir(parents=True)
    (site / "verl" / "__init__.py").write_text(FAKE_VERL_INIT)
    (package / "__init__.py").write_text("")
    (package / "main_ppo.py").write_text(FAKE_MAIN_PPO)
    for sub in ("utils", "workers"):
        (site / "verl" / sub).mkdir()
        (site / "verl" / sub / "__init__.py").write_text("")
    (site / "verl" / "utils" / "model.py").write_text(FAKE_VALUEHEAD_LOADER)
    (site / "verl" / "workers" / "fsdp_workers.py").write_text(
        "from verl.utils.model import load_valuehead_model\n"
    )
    (site / "flash_attn").mkdir()  # a runner with flash-attn: the PPO critic can load
    (site / "flash_attn" / "__init__.py").write_text("")
    info = site / "verl-0.9.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: verl\nVersion: 0.9.1\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), str(SRC)]))
    monkeypatch.setenv("FAKE_VERL_SAMPLE", str(DATA / "v0.9.1-ppo.jsonl"))
    from trainperf.workloads import rl_verl

    monkeypatch.setattr(rl_verl, "require_machine", lambda gpus, device: None)
    return tmp_path


def run_fake(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch, alg: str = "ppo", plant: str | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    from trainperf.workloads import rl_verl
    from trainperf.workloads.protocol import ChildSpec
    from trainperf.workloads.recorder import StepRecorder

    monkeypatch.setenv("FAKE_VERL_MODE", mode)
    case = Case(
        family="rl_verl",
        model="qwen3_tiny",
        method="full",
        profile="gsm8k",
        batch_size=4,
        micro_batch_size=2 if alg == "ppo" else None,
        extra=(
            ("alg", alg),
            ("eng", "vllm"),
            ("mini", "4"),
            ("p", "32"),
            ("r", "32"),
            *((("dyn", "256"),) if alg == "grpo" else ()),
        ),
    )
    out = tmp_path / "out"
    out.mkdir()
    spec = ChildSpec(case=case.to_dict(), steps=3, device="cpu", seed=0, out_dir=str(out), plant=plant)
    recorder = StepRecorder(out / "steps.jsonl", spec)
    return rl_verl.run(spec, recorder), recorder.steps


def test_the_child_tails_verls_jsonl_into_steps_as_they_land(
    fake_verl: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result, steps = run_fake(fake_verl, "ok", monkeypatch)
    assert [s["step"] for s in steps] == [1, 2, 3]
    assert steps[1]["t_end"] - steps[0]["t_end"] > 0.3  # read while verl ran, not all at the end
    assert "update_weights" in steps[0]["phases"]
    assert result["memory"]["peak_allocated_b"] == int(max(s["max_allocated_gib"] for s in steps) * 2**30)
    assert result["effective_config"]["rule_set"] == "engine" and result["versions"]["verl"] == "0.9.1"
    assert result["session_sweep"]["left"] == 0  # what ending verl's session took, recorded
    assert "ray_stop" not in result  # no `ray stop --force`: it would end every Ray on the host
    ray_folder = Path((fake_verl / "out" / "verl" / "ray_home.txt").read_text())
    assert ray_folder.name.startswith("trainperf-ray-") and not ray_folder.exists()  # removed: it ran well
    overrides_used = (fake_verl / "out" / "verl" / "overrides.txt").read_text()
    assert "trainer.total_training_steps=3" in overrides_used
    # verl loads the cached synthetic model; the run folder holds no copy of its weights
    model_path = next(
        line.split("=", 1)[1]
        for line in overrides_used.splitlines()
        if line.startswith("actor_rollout_ref.model.path=")
    )
    assert Path(model_path).parent.name == "models" and not list((fake_verl / "out").rglob("*.safetensors"))
    assert result["effective_config"]["model_source"] == f"synthetic:{Path(model_path).name}"
    # Where the time before the steps went, read from verl's log; vLLM's compile cache handed on.
    assert set(result["setup"]["phases"]) == {"ray_s", "inputs_s", "workers_s", "rollout_s"}
    assert result["setup"]["line"].startswith("set-up ")
    assert "compile cache disabled: 0" in (fake_verl / "out" / "verl.log").read_text()


def test_a_run_of_other_lengths_than_the_case_is_an_error_not_a_measurement(
    fake_verl: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen on an H100: verl ran 6-token prompts for a case of 512 and every phase looked fine."""
    with pytest.raises(
        RuntimeError, match=r"verl's prompts were 6 tokens, the case's are 32.*nothing was baselined"
    ):
        run_fake(fake_verl, "short-prompts", monkeypatch)


def test_the_lengths_verl_ran_are_recorded(fake_verl: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result, steps = run_fake(fake_verl, "ok", monkeypatch)
    assert steps[0]["prompt_length_mean"] == 32.0
    config = result["effective_config"]
    assert (config["prompt_len_measured"], config["response_len_measured"]) == (32.0, 32.0)


def test_an_oom_inside_verl_is_classified_from_its_log(
    fake_verl: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainperf.workloads.child import is_oom
    from trainperf.workloads.rl_verl import VerlOutOfMemory

    with pytest.raises(VerlOutOfMemory) as caught:
        run_fake(fake_verl, "oom", monkeypatch)
    assert is_oom(caught.value)
    assert "after 1/3 steps" in str(caught.value) and "CUDA out of memory in a worker" in str(caught.value)
    ray_folder = (fake_verl / "out" / "verl" / "ray_home.txt").read_text()
    assert f"Ray's logs in {ray_folder}" in str(caught.value)  # kept, and named, for the diagnosis
    assert (Path(ray_folder) / "session.log").read_text() == "no address: a Ray of its own"


@pytest.mark.parametrize(
    ("option", "words"),
    [
        ({"plant_slowdown": 0.5}, "plant-slowdown"),
        ({"memory_cap_gib": 80}, "memory caps"),
        ({"plant": "host:0.3"}, "--perf-plant host acts at step edges.*attention, composite"),
        ({"plant": "memory"}, "--perf-plant memory"),
    ],
)
def test_options_acting_in_the_child_process_are_refused_not_faked(
    option: dict[str, Any], words: str
) -> None:
    from trainperf.workloads.protocol import ChildSpec, SkipCase
    from trainperf.workloads.rl_verl import refuse_unsupported

    with pytest.raises(SkipCase, match=words):
        refuse_unsupported(ChildSpec(case=rl().to_dict(), steps=2, out_dir="", **option))
    refuse_unsupported(
        ChildSpec(case=rl().to_dict(), steps=2, out_dir="", plant_slowdown=0.0, memory_cap_gib=None)
    )


def test_an_rl_train_batch_is_global() -> None:
    assert family_of("rl_verl").samples_per_step(rl(gpus=2)) == 64
    sft = Case(family="sft_hf", model="m", method="lora", profile="short", batch_size=4, gpus=2)
    assert family_of("sft_hf").samples_per_step(sft) == 8


def without_flash_attn(site: Path) -> None:
    import importlib
    import shutil

    shutil.rmtree(site / "flash_attn")
    # find_spec answers from sys.modules first: an earlier test that imported the fake package
    # would make it look installed still (seen when -k picks another order).
    for name in [n for n in sys.modules if n == "flash_attn" or n.startswith("flash_attn.")]:
        del sys.modules[name]
    importlib.invalidate_caches()


def test_with_flash_attn_the_critic_is_verls_own(fake_verl: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result, _ = run_fake(fake_verl, "ok", monkeypatch)
    assert "critic attention: flash_attention_2" in (fake_verl / "out" / "verl.log").read_text()
    assert result["effective_config"]["critic_attention"] == "flash_attention_2"
    assert not (fake_verl / "out" / "verl" / "env.txt").exists()


def test_without_flash_attn_a_ppo_critic_loads_for_real_with_sdpa_through_verls_plugin_hook(
    fake_verl: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen on an H100 (verl 0.9.1, no flash-attn wheel for torch 2.11/CUDA 13): the critic's
    load_valuehead_model asks for flash_attention_2 whatever the overrides say. The child's shim,
    imported by the (fake) verl's __init__ through VERL_USE_EXTERNAL_MODULES before the loader's
    module exists, swaps it as that module loads, so the worker module that binds it gets the SDPA
    one, which loads the run's real synthetic checkpoint with transformers."""
    without_flash_attn(fake_verl / "site")
    result, steps = run_fake(fake_verl, "ok", monkeypatch)
    assert len(steps) == 3
    assert "critic attention: sdpa" in (fake_verl / "out" / "verl.log").read_text()
    config = result["effective_config"]
    assert (config["actor_attention"], config["critic_attention"]) == ("sdpa", "sdpa")
    used = (fake_verl / "out" / "verl" / "overrides.txt").read_text().splitlines()
    assert (
        "VERL_USE_EXTERNAL_MODULES=trainperf_verl_sdpa_critic"
        in (fake_verl / "out" / "verl" / "env.txt").read_text()
    )
    assert (
        "critic.model.use_remove_padding=False" in used and "critic.model.use_remove_padding=True" not in used
    )


def test_a_planted_attention_regression_acts_in_verls_own_processes(
    fake_verl: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child's steps are verl's: the plant reaches verl's processes through verl's plug-in hook
    (imported from a bare working folder, trainperf found through the path it is handed), beside the
    critic's loader where both are needed."""
    import torch

    without_flash_attn(fake_verl / "site")
    monkeypatch.setenv("PYTHONPATH", str(fake_verl / "site"))  # trainperf is not on verl's path by itself
    # the recorder plants in this process too (as in any child); put the fused op back afterwards
    monkeypatch.setattr(
        torch.nn.functional, "scaled_dot_product_attention", torch.nn.functional.scaled_dot_product_attention
    )
    _, steps = run_fake(fake_verl, "ok", monkeypatch, plant="composite")
    assert len(steps) == 3
    log = (fake_verl / "out" / "verl.log").read_text()
    assert "attention op: composite_attention" in log and "critic attention: sdpa" in log
    assert "[trainperf] planted composite in process" in log
    env = (fake_verl / "out" / "verl" / "env.txt").read_text()
    assert "TRAINPERF_VERL_PLANT=composite" in env
    assert "VERL_USE_EXTERNAL_MODULES=trainperf_verl_sdpa_critic,trainperf.workloads.verl.plant_hook" in env


def test_without_a_plant_verls_attention_is_its_own(fake_verl: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_fake(fake_verl, "ok", monkeypatch)
    assert "attention op:" not in (fake_verl / "out" / "verl.log").read_text()


def test_the_critic_shim_says_so_when_verl_renamed_the_loader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainperf.workloads import verl_sdpa_critic

    if importlib.util.find_spec("flash_attn") is not None:
        pytest.skip("flash-attn is installed here: the shim leaves verl alone")
    (tmp_path / "verl" / "utils").mkdir(parents=True)
    (tmp_path / "verl" / "__init__.py").write_text("")
    (tmp_path / "verl" / "utils" / "__init__.py").write_text("")
    (tmp_path / "verl" / "utils" / "model.py").write_text("def load_critic(): pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [n for n in sys.modules if n == "verl" or n.startswith("verl.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    assert verl_sdpa_critic.install()  # verl.utils.model not loaded yet: waits for it
    with pytest.raises(ImportError, match="no load_valuehead_model.*needs flash-attn"):
        importlib.import_module("verl.utils.model")
    assert not any(isinstance(f, verl_sdpa_critic._PatchAfterImport) for f in sys.meta_path)


def test_without_flash_attn_a_grpo_case_runs_on_sdpa_and_says_so(
    fake_verl: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    without_flash_attn(fake_verl / "site")
    monkeypatch.setenv("TRAINPERF_VERL_OVERRIDES", "trainer.logger=[console,file] +extra.knob=1")
    result, steps = run_fake(fake_verl, "ok", monkeypatch, alg="grpo")
    assert len(steps) == 3 and result["effective_config"]["actor_attention"] == "sdpa"
    used = (fake_verl / "out" / "verl" / "overrides.txt").read_text().splitlines()
    assert "++actor_rollout_ref.model.override_config.attn_implementation=sdpa" in used
    assert "actor_rollout_ref.model.use_remove_padding=False" in used
    assert "actor_rollout_ref.model.use_remove_padding=True" not in used  # replaced, not given twice
    assert used[-1] == "+extra.knob=1"


def test_extra_overrides_replace_a_key_already_set_and_append_new_ones() -> None:
    from trainperf.workloads.verl.overrides import merge_overrides

    merged = merge_overrides(["a=1", "b.c=True", "d=3"], ["b.c=False", "++x.y=sdpa", "+z=1"])
    assert merged == ["a=1", "b.c=False", "d=3", "++x.y=sdpa", "+z=1"]


@pytest.mark.parametrize(
    ("engine", "natural", "synthetic", "prompt", "response", "problem"),
    [
        ("vllm", False, True, 512.0, 1024.0, None),
        ("vllm", False, True, 6.0, 1024.0, "prompts were 6 tokens, the case's are 512"),
        ("vllm", False, False, 300.0, 1024.0, None),  # a user's dataset: its own prompt lengths
        ("vllm", False, True, 512.0, 1000.5, "responses were 1000.5 tokens, the case forces 1024"),
        ("sglang", False, True, 512.0, 1000.5, None),  # verl does not pass ignore_eos to SGLang
        ("vllm", True, True, 512.0, 300.0, None),  # natural lengths vary by design
    ],
)
def test_length_checks_follow_what_the_suite_forces(
    engine: str, natural: bool, synthetic: bool, prompt: float, response: float, problem: str | None
) -> None:
    from trainperf.families.rl_verl.knobs import knobs_of
    from trainperf.workloads.verl.lengths import Lengths, length_mismatch

    extra = {"eng": engine, "p": 512, "r": 1024, **({"len": "natural"} if natural else {})}
    knobs = knobs_of(rl("grpo", None, 1, n=4, dyn=8192, **extra))
    found = length_mismatch(knobs, Lengths(prompt, response), synthetic_prompts=synthetic)
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_the_e3_scale_model_phi3_gets_loadable_inputs_at_its_prompt_length(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 8-GPU E3 case builds Phi-4 (model_type phi3, vocab 100,352): shrunk here to two small
    layers, the folder must load as Phi3 and its prompts must be exactly 1,020 tokens."""
    import pyarrow.parquet as pq
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainperf.synth import rl_inputs

    full = rl_inputs.model_config

    def shrunk(name: str, dtype: str = "bfloat16") -> dict[str, Any]:
        config = full(name, dtype)
        config.update(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
        )
        return config

    monkeypatch.setattr(rl_inputs, "model_config", shrunk)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = rl_inputs.write_model_folder("phi_4", tmp_path / "model", dtype="float32")
    model = AutoModelForCausalLM.from_pretrained(folder.path, local_files_only=True)
    assert type(model).__name__ == "Phi3ForCausalLM" and model.config.vocab_size == 100_352
    tokenizer = AutoTokenizer.from_pretrained(folder.tokenizer, local_files_only=True)
    rl_inputs.write_gsm8k_parquet(tmp_path / "train.parquet", tokenizer, rows=2, prompt_len=1020)
    for row in pq.read_table(tmp_path / "train.parquet").to_pylist():
        ids = tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=True)
        assert len(ids["input_ids"] if hasattr(ids, "keys") else ids) == 1020


def test_a_profiled_verl_run_turns_on_verls_own_profiler_and_keeps_the_actors_update_trace(
    fake_verl: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainperf.traces.profile_window import plan_trace
    from trainperf.workloads import rl_verl
    from trainperf.workloads.protocol import ChildSpec
    from trainperf.workloads.recorder import StepRecorder

    monkeypatch.setenv("FAKE_VERL_MODE", "ok")
    case = Case(
        family="rl_verl", model="qwen3_tiny", method="full", profile="gsm8k", batch_size=4, micro_batch_size=2,
        extra=(("alg", "ppo"), ("eng", "vllm"), ("mini", "4"), ("p", "32"), ("r", "32")),
    )  # fmt: skip
    out = fake_verl / "out"
    out.mkdir()
    plan = plan_trace(fake_verl / "traces", "r1", 5, window=family_of("rl_verl").trace_window)
    assert not isinstance(plan, str)
    spec = ChildSpec(
        case=case.to_dict(), steps=5, device="cpu", seed=0, out_dir=str(out), trace=plan.to_spec()
    )
    recorder = StepRecorder(out / "steps.jsonl", spec)
    rl_verl.run(spec, recorder)
    used = (out / "verl" / "overrides.txt").read_text()
    assert "global_profiler.steps=[5]" in used and "critic.profiler.enable=True" in used
    info = recorder.trace_info()
    assert info is not None and plan.path.is_file() and info["file"] == plan.path.name
    assert info["stages"]["train-batch"] and "actor-compute-log-prob" not in info["stages"]
    # The parent's analysis says the profile covers the actor's update, not the whole step.
    from trainperf.traces.collect import collect

    assert collect(info, plan, fake_verl)["profile"]["scope"] == "verl actor update"
    # The step verl profiled is marked and left out of the timing; the one before it is measured
    # (verl's profiler has no warm-up step of its own).
    assert [s["step"] for s in recorder.steps if s.get("profiled")] == [5]


def test_verls_profiler_switches_are_keys_of_the_releases_that_get_them(tmp_path: Path) -> None:
    from trainperf.traces.profile_window import plan_trace
    from trainperf.workloads.verl.profile import place_trace, profiler_overrides, supports_profiling

    plan = plan_trace(tmp_path, "r1", 5)
    assert not isinstance(plan, str)
    keys = set((DATA / "ppo_trainer_keys-0.9.1.txt").read_text().split())
    for override in profiler_overrides(plan, tmp_path / "profile", critic=True):
        assert override.split("=", 1)[0] in keys, override
    assert supports_profiling("0.9.1") and not supports_profiling("0.8.0")
    assert "no actor-update trace for step 5" in place_trace(tmp_path / "profile", plan)["error"]
