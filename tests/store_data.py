"""Synthetic results and run folders for the results-history tests (no training, no GPU)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from trainperf.case_record import CaseRecord
from trainperf.config_record import EffectiveConfig
from trainperf.fingerprint_record import Fingerprint
from trainperf.result import CaseResult, MetricValue
from trainperf.store.results import save_result
from trainperf.stored_verdict import StoredVerdict

CASE_IDS_FOR_EXPORT = ("sft_hf-qwen3_8b-lora-short-b4", "sft_hf-qwen3_8b-lora-maxlen-b4")
GPU = {
    "hostname": "runner-a",
    "gpu_name": "NVIDIA H100 80GB HBM3",
    "gpu_uuid": "GPU-aaaa",
    "driver": "580.159.04",
    "cuda_driver": "13.0",
    "cpu_model": "Intel(R) Xeon(R) Processor",
    "power_limit_w": 700.0,
    "torch": "2.11.0",
    "transformers": "5.17.0",
    "peft": "0.21.0",
    "trl": "1.16.0",
}


def make_result(
    case_id: str,
    created: str,
    step_s: float,
    *,
    fingerprint: dict[str, Any] | None = None,
    seed: int = 0,
    verdict: str = "pass",
    outcome: str = "ok",
    steps: int = 12,
    cv: float = 0.003,
) -> CaseResult:
    rng = random.Random(seed)
    samples = [step_s * (1 + rng.gauss(0, cv)) for _ in range(steps)]
    keys = [f"{k + 2}:4096" for k in range(steps)]
    metrics = (
        {
            "step_time_s": MetricValue(sorted(samples)[steps // 2], "s", samples, [step_s], keys),
            "tokens_per_s": MetricValue(
                4096 / step_s, "tok/s", [4096 / s for s in samples], [4096 / step_s], keys
            ),
            "peak_allocated_gib": MetricValue(21.5, "GiB", None, [21.5]),
            "energy_per_token_j": MetricValue(0.09, "J/tok", None, [0.09]),
        }
        if outcome == "ok"
        else {}
    )
    return CaseResult(
        case_id=case_id,
        case=CaseRecord(),
        gpu_class="h100",
        outcome=outcome,
        metrics=metrics,
        effective_config=EffectiveConfig(trainable_params=43_646_976, attn_implementation="sdpa"),
        fingerprint=Fingerprint.from_dict(fingerprint or GPU),
        verdict=StoredVerdict(verdict=verdict),
        created=created,
    )


def write_run_folder(
    folder: Path, started: str, results: list[CaseResult], fingerprint: dict[str, Any] | None = None
) -> Path:
    """A run folder as a pytest session leaves it: run.json and results/<case>.json."""
    fp = fingerprint or GPU
    record = {
        "sessions": [
            {"started": started, "argv": ["pytest", "-m", "h100"], "gpu_class": "h100", "fingerprint": fp}
        ]
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.json").write_text(json.dumps(record))
    for result in results:
        save_result(folder / "results" / f"{result.case_id}.json", result)
    return folder


def nightly(day: int) -> str:
    return f"2026-{1 + day // 28:02d}-{1 + day % 28:02d}T02:00:00+00:00"
