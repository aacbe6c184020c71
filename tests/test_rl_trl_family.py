"""TRL GRPO (family ``rl_trl``): case shape and TRL's batch rules, the reward, the phase clock, what
the hooks need of GRPOTrainer (methods, config fields, the layouts trl 1.0.0-1.16.0 return), and the
tiny case end to end (real GRPO steps on the CPU)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from child_run import run_child_spec

from trainperf.case import Case
from trainperf.errors import TrainperfError
from trainperf.families import family_of, preflight
from trainperf.families.rl_trl import GrpoShape, grpo_shape, preflight_grpo
from trainperf.ground.catalogue import load_catalogue
from trainperf.synth.tokenizer import build_tokenizer
from trainperf.workloads import phases as phases_module
from trainperf.workloads.phases import PhaseClock
from trainperf.workloads.protocol import SkipCase

# Imported at collection (it imports torch, hence numpy): an in-process pytester run elsewhere in
# the session restores sys.modules afterwards, and numpy cannot be imported a second time.
from trainperf.workloads.rl_trl import even_token_reward, prompt_texts
from trainperf.workloads.trl_hooks import (
    GRPO_CONFIG_FIELDS,
    GrpoStepLog,
    check_grpo_config,
    check_log_prob_kernel,
    check_trl,
    generated_ids,
)

ROOT = Path(__file__).resolve().parents[1]
TINY = Case(
    family="rl_trl",
    model="qwen3_tiny",
    method="lora",
    profile="fixed",
    batch_size=8,
    prompt_len=16,
    completion_len=16,
    num_generations=4,
    gpu_classes=("cpu",),
)


def catalogue_cases() -> list[Case]:
    return [case for case in load_catalogue(ROOT).values() if case.family == "rl_trl"]


def test_rl_knobs_name_the_id_and_sft_ids_do_not_change() -> None:
    assert TINY.id == "rl_trl-qwen3_tiny-lora-fixed-b8-p16-c16-g4"
    sft = Case(family="sft_hf", model="qwen3_8b", method="lora", profile="long", batch_size=4)
    assert sft.id == "sft_hf-qwen3_8b-lora-long-b4"
    assert Case.from_dict(json.loads(TINY.to_json())) == TINY


def test_shape_counts_prompts_and_tokens() -> None:
    shape = grpo_shape(TINY.replace(grad_accum=2))
    assert (shape.completions_per_step, shape.prompts_per_step, shape.tokens_per_step) == (16, 4, 16 * 32)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"num_generations": 1}, "at least 2"),
        ({"num_generations": 3}, "divisible by num_generations 3"),
        ({"completion_len": None}, "needs prompt_len, completion_len and num_generations"),
        ({"prompt_len": 0}, "must be >= 1"),
        ({"gpus": 2}, "gpus=1"),
        ({"method": "qlora"}, "supports methods lora, full"),
        ({"profile": "short"}, "supports profile 'fixed'"),
        ({"completion_len": 5000}, "max_position_embeddings 4096"),
    ],
)
def test_preflight_predicts_what_trl_would_refuse(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(TrainperfError, match=message):
        preflight_grpo(TINY.replace(**changes))
    with pytest.raises(
        TrainperfError, match=message
    ):  # the runner's pre-flight: a config_error before launch
        preflight(TINY.replace(**changes))


def test_catalogue_cases_pass_preflight_and_get_no_sft_estimate() -> None:
    cases = catalogue_cases()
    assert {c.method for c in cases} == {"lora", "full"}
    assert any(c.gpu_classes == ("cpu",) for c in cases)
    for case in cases:
        preflight(case)
        assert (
            family_of(case.family).memory_estimate(case, 10) is None
        )  # the SFT-shaped estimate does not model an RL step


def test_even_token_reward() -> None:
    assert even_token_reward([[2, 4, 5, 7], [1], []], prompts=["x"] * 3) == [0.5, 0.0, 0.0]


def test_prompts_have_exactly_prompt_len_tokens_and_are_deterministic() -> None:
    texts = prompt_texts(5, 16, 2048, seed=0)
    assert texts == prompt_texts(5, 16, 2048, seed=0) and len(set(texts)) == 5
    ids = build_tokenizer(2048)(text=texts)["input_ids"]
    assert [len(row) for row in ids] == [16] * 5


class _Trl0191Trainer:
    """The methods of trl 0.19.1's GRPOTrainer the hooks look for: no ``_generate`` (generation
    was inline in ``_generate_and_score_completions``), ``training_step`` inherited."""

    generation_config = object()

    def training_step(self) -> None: ...
    def _prepare_inputs(self) -> None: ...
    def _calculate_rewards(self) -> None: ...
    def _generate_and_score_completions(self) -> None: ...


class _Trl1Trainer(_Trl0191Trainer):
    def _generate(self) -> None: ...


def test_trl_check_names_the_missing_method_and_the_releases_that_have_it() -> None:
    check_trl("1.0.0", _Trl1Trainer())  # no version number is refused as such
    check_trl("2.3.0", _Trl1Trainer())
    with pytest.raises(
        TrainperfError, match=r"^trl 0\.19\.1: GRPOTrainer has no _generate, .*trl 1\.0\.0 to 1\.16\.0"
    ):
        check_trl("0.19.1", _Trl0191Trainer())
    no_config = _Trl1Trainer()
    no_config.generation_config = None  # type: ignore[assignment]
    with pytest.raises(TrainperfError, match="has no generation_config"):
        check_trl("1.0.0", no_config)


def test_grpo_config_check_names_the_missing_fields() -> None:
    # The installed GRPOConfig passes in the end-to-end test below (the child checks it before building it).
    fields = {"output_dir", "max_steps", *GRPO_CONFIG_FIELDS}
    check_grpo_config("1.0.0", fields)
    # trl 0.16.0's GRPOConfig had neither field yet
    with pytest.raises(
        TrainperfError,
        match=r"^trl 0\.16\.0: GRPOConfig has no steps_per_generation, loss_type, which .*1\.16\.0 have it",
    ):
        check_grpo_config("0.16.0", fields - {"steps_per_generation", "loss_type"})


# trl's modules as each release lays them out, for the log-probability kernel check (None in
# sys.modules makes the import fail, as importing trl 1.15's Triton-only kernel does without Triton)
TRL_UTILS_BEFORE_FUSED_HEAD = SimpleNamespace()  # trl 1.0.0-1.14.2
TRL_UTILS_FUSED_HEAD = SimpleNamespace(add_fused_lm_head=lambda *a, **k: None)  # trl 1.15.0, 1.16.0
KERNEL_TRITON_ONLY = SimpleNamespace()  # trl 1.15.0, where Triton imports
KERNEL_WITH_FALLBACK = SimpleNamespace(_use_triton=lambda device: False)  # trl 1.16.0


@pytest.mark.parametrize(
    ("utils", "kernel", "device", "skip"),
    [
        (TRL_UTILS_BEFORE_FUSED_HEAD, None, "cpu", None),
        (TRL_UTILS_FUSED_HEAD, KERNEL_WITH_FALLBACK, "cpu", None),
        (TRL_UTILS_FUSED_HEAD, KERNEL_TRITON_ONLY, "cuda", None),
        (TRL_UTILS_FUSED_HEAD, None, "cpu", r"and this torch build has no Triton"),
        (
            TRL_UTILS_FUSED_HEAD,
            KERNEL_TRITON_ONLY,
            "cpu",
            r"Triton runs it on CUDA or XPU devices, not on cpu",
        ),
    ],
)
def test_log_prob_kernel_check_skips_only_a_release_that_cannot_train_here(
    monkeypatch: pytest.MonkeyPatch, utils: Any, kernel: Any, device: str, skip: str | None
) -> None:
    monkeypatch.setitem(sys.modules, "trl.trainer.utils", utils)
    monkeypatch.setitem(sys.modules, "trl.kernels.chunked_logprob", kernel)
    if skip is None:
        check_log_prob_kernel("1.15.0", device)
        return
    with pytest.raises(
        SkipCase, match=rf"^trl 1\.15\.0: GRPOTrainer computes log-probabilities only .*{skip}.*1\.16\.0"
    ):
        check_log_prob_kernel("1.15.0", device)


PROMPTS = [[5, 6, 7], [5, 6, 7], [8, 9, 10], [8, 9, 10]]
COMPLETIONS = [[11, 12], [13, 14], [15, 16], [17, 18]]
TEXTS = ["w11 w12", "w13 w14", "w15 w16", "w17 w18"]
TOKENS = torch.tensor(8)
# _generate's return, release by release (read from each wheel's grpo_trainer.py): the items after the
# ids moved, so the hooks may rely on positions 0 and 1 only.
RELEASE_LAYOUTS = {
    # (prompt_ids, completion_ids, tool_mask, completions, total_completion_tokens, logprobs, extra_fields)
    "1.0.0": (PROMPTS, COMPLETIONS, None, TEXTS, TOKENS, None, {}),
    # ... then images, tool_images
    "1.1.0-1.8.0": (PROMPTS, COMPLETIONS, None, TEXTS, TOKENS, None, {}, None, []),
    # total_completion_tokens gone
    "1.9.0-1.16.0": (PROMPTS, COMPLETIONS, None, TEXTS, None, {}, None, []),
}


@pytest.mark.parametrize("releases", sorted(RELEASE_LAYOUTS))
def test_generated_ids_reads_every_release_layout(releases: str) -> None:
    assert generated_ids(releases, RELEASE_LAYOUTS[releases]) == (PROMPTS, COMPLETIONS)


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ({"prompt_ids": PROMPTS, "completion_ids": COMPLETIONS}, "returned a dict, where"),
        ((PROMPTS,), "returned a tuple of 1, where"),
        # padded tensors: their rows all have the padded length, so the length checks would pass blind
        ((PROMPTS, torch.tensor(COMPLETIONS), None), "returned a Tensor at position 1"),
        (([torch.tensor(row) for row in PROMPTS], COMPLETIONS), "returned a list of Tensor at position 0"),
        ((PROMPTS[::2], COMPLETIONS), "returned 2 prompt rows for 4 completions"),
    ],
)
def test_generated_ids_refuses_a_layout_it_would_misread(output: Any, message: str) -> None:
    with pytest.raises(TrainperfError, match=rf"^trl 9\.0\.0: GRPOTrainer\._generate {message}.*1\.16\.0"):
        generated_ids("9.0.0", output)


def _step_log(force_length: bool = True) -> GrpoStepLog:
    # 4 completions per step (2 prompts x 2 generations) of 3 + 2 tokens
    return GrpoStepLog(GrpoShape(3, 2, 2, 4), force_length, trl_version="1.9.0")


def test_step_log_counts_a_step_from_any_release_layout() -> None:
    log = _step_log()
    log.generated(RELEASE_LAYOUTS["1.0.0"])
    log.scored(torch.tensor([[0.5], [1.0], [0.0], [0.5]]))
    assert log.close_step() == {"prompt_tokens": 12, "completion_tokens": 8, "reward_mean": 0.5}
    log.generated(RELEASE_LAYOUTS["1.9.0-1.16.0"][:2])
    assert log.close_step()["completion_tokens"] == 8


def test_step_log_refuses_unforced_lengths_short_steps_and_flat_rewards() -> None:
    log = _step_log()
    with pytest.raises(TrainperfError, match=r"completions of \[1, 2\] tokens where exactly 2 were forced"):
        log.generated((PROMPTS, [[1], [2, 3], [4, 5], [6, 7]]))
    log = _step_log()
    log.generated((PROMPTS[:2], COMPLETIONS[:2]))  # half the step's completions went through _generate
    with pytest.raises(TrainperfError, match=r"saw 2 completions generated in a step that trains on 4"):
        log.close_step()
    with pytest.raises(TrainperfError, match=r"_calculate_rewards returned a Tensor, where"):
        log.scored(torch.tensor([0.5, 1.0]))


def test_phase_clock_charges_nested_time_to_the_innermost_phase(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [50.0]  # the clock's time, moved by the test: exact figures however loaded the host is

    def elapse(seconds: float) -> None:
        now[0] += seconds

    monkeypatch.setattr(phases_module, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    syncs: list[float] = []
    clock = PhaseClock(sync=lambda: syncs.append(now[0]))
    with clock.phase("update"):
        elapse(0.02)
        with clock.phase("prepare"), clock.phase("gen"):
            elapse(0.05)
        elapse(0.02)
    elapse(0.01)
    clock.charge_since_last_edge("update")
    phases = clock.take()
    assert phases == pytest.approx({"update": 0.05, "prepare": 0.0, "gen": 0.05})
    assert len(syncs) == 7  # every edge synchronised (the device's queue is charged where it was filled)
    assert clock.take() == {}
    with clock.phase("gen"), pytest.raises(RuntimeError, match="still open"):
        clock.charge_since_last_edge("update")


def test_tiny_grpo_child_end_to_end(tmp_path: Path) -> None:
    """Real GRPO steps on the CPU through the child entry point: phases, tokens, forced lengths."""
    steps = 3
    result = run_child_spec(tmp_path, {"case": TINY.to_dict(), "steps": steps, "device": "cpu", "seed": 0})
    assert result["outcome"] == "ok"
    records = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert len(records) == steps
    for record in records:
        assert set(record["phases"]) == {"gen", "reward", "prepare", "update"}
        assert all(v > 0 for v in record["phases"].values())
        assert sum(record["phases"].values()) <= record["duration_s"]
        # 8 completions of exactly 16 tokens (generation forced to run to it) after 16-token prompts
        assert (record["prompt_tokens"], record["completion_tokens"], record["tokens"]) == (128, 128, 256)
        assert 0.0 <= record["reward_mean"] <= 1.0
    effective = result["effective_config"]
    assert effective["lora_layers"] == 14 and effective["trainable_params"] < effective["total_params"]
    assert effective["generation_use_cache"] is True and effective["generation_min_new_tokens"] == 16
    assert effective["beta"] == 0.0 and effective["num_generations"] == 4
