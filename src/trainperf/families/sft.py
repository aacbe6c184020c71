"""The SFT families: TRL's ``SFTTrainer`` with peft (``sft_hf``) and unsloth's ``FastLanguageModel``
(``sft_unsloth``)."""

from __future__ import annotations

from pathlib import Path

from trainperf.case import Case
from trainperf.errors import TrainperfError
from trainperf.families.base import Family, check_model
from trainperf.memory_estimate import MemoryEstimate
from trainperf.plan.estimate import estimate_case
from trainperf.synth.profiles import load_profile


class SftHf(Family):
    name = "sft_hf"
    child = "trainperf.workloads.sft_hf"
    kind = "sft"
    label = "HF"
    compared_methods: tuple[str, ...] = ("lora", "qlora")
    data_sized_by_steps = True

    def preflight(self, case: Case, python: str | None) -> None:
        check_model(case)
        if not case.dataset_path:
            load_profile(case.profile)
        elif not Path(case.dataset_path).is_file():
            raise TrainperfError(
                f"dataset_path {case.dataset_path} does not exist: give a local .jsonl/.json/.parquet file"
            )

    def memory_estimate(self, case: Case, steps: int) -> MemoryEstimate | None:
        return estimate_case(case, steps, self.samples_per_step(case))


class SftUnsloth(SftHf):
    name = "sft_unsloth"
    child = "trainperf.workloads.sft_unsloth"
    label = "unsloth"
    compared_methods = ("qlora",)

    def memory_estimate(self, case: Case, steps: int) -> MemoryEstimate | None:
        # Not modelled: unsloth offloads checkpointed activations to the host (its Qwen3-8B QLoRA
        # peaked at 6.4 GiB on an H100 where the HF recipe's 9.5 GiB is estimated within 3%).
        return None
