"""Synthetic nightly run folders for the history benchmarks: N nights x C cases x 13 metrics.

Each night is a run folder as a pytest session leaves it (``run.json``, ``results/<case>.json``)
with 16 keyed step times per case and the kernel time of a two-step window. Noise follows the
runners: step-time CV 0.3% on GPU-bound cases, 2-8% on host-bound ones, kernel time 0.1% on all;
from night 200 every fifth case is 3% slower (its GPU work), and on night 120 transformers moves
from 5.17.0 to 5.18.0 (an environment change for the dashboard to mark).
Each result's stored verdict is the one a gate with a 2% step-time tolerance gives it: the slowed
cases read `regressed` from night 200 on (a regressed run is never accepted, so nothing makes the
slower level the new normal until the baseline is re-taken), every other result `pass`.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

from trainperf.case_record import CaseRecord
from trainperf.config_record import EffectiveConfig
from trainperf.fingerprint_record import Fingerprint
from trainperf.result import CaseResult, MetricValue
from trainperf.store.results import save_result
from trainperf.stored_verdict import StoredVerdict

FINGERPRINT = {
    "hostname": "nightly-h100",
    "gpu_name": "NVIDIA H100 80GB HBM3",
    "gpu_uuid": "GPU-0000-synthetic",
    "driver": "580.159.04",
    "cuda_driver": "13.0",
    "cpu_model": "Intel(R) Xeon(R) Processor",
    "power_limit_w": 700.0,
    "torch": "2.11.0",
    "transformers": "5.17.0",
    "peft": "0.21.0",
    "trl": "1.16.0",
    "bitsandbytes": "0.50.2",
}
STEPS = 16
KERNEL_WINDOW = 2
SLOWER_FROM_NIGHT, SLOWER_EVERY, SLOWDOWN = 200, 5, 1.03
UPGRADE_NIGHT = 120


def case_ids(count: int) -> list[str]:
    return [f"sft_hf-synthetic_{i:02d}-lora-{'maxlen' if i % 2 == 0 else 'short'}-b4" for i in range(count)]


def night_start(night: int) -> str:
    start = datetime(2026, 1, 1, 2, 0, tzinfo=timezone.utc) + timedelta(days=night)
    return start.isoformat(timespec="seconds")


def _result(
    case_id: str, index: int, night: int, rng: random.Random, fingerprint: dict[str, object]
) -> CaseResult:
    cv = 0.003 if index % 2 == 0 else 0.02 + 0.06 * rng.random()
    slowed = night >= SLOWER_FROM_NIGHT and index % SLOWER_EVERY == 0
    level = (0.5 + 0.01 * index) * (SLOWDOWN if slowed else 1.0)
    level *= 1 + rng.gauss(0, cv)
    tokens = 4096
    steps = [level * (1 + rng.gauss(0, 0.01)) for _ in range(STEPS)]
    keys = [f"{k + 2}:{tokens}" for k in range(STEPS)]
    rates = [tokens / s for s in steps]
    step = sorted(steps)[STEPS // 2]
    # The GPU's share of the step: the same work every run to within 0.1% whatever the host did,
    # so the planted step shows here on the host-bound cases too.
    kernel_level = 1000 * (0.2 + 0.005 * index) * (SLOWDOWN if slowed else 1.0)
    kernels = [kernel_level * (1 + rng.gauss(0, 0.001)) for _ in range(KERNEL_WINDOW)]
    kernel = sorted(kernels)[KERNEL_WINDOW // 2]

    def one(value: float, unit: str) -> MetricValue:
        return MetricValue(value, unit, None, [value])

    metrics = {
        "step_time_s": MetricValue(step, "s", steps, [step], keys),
        "kernel_ms": MetricValue(kernel, "ms", kernels, [kernel], keys[:KERNEL_WINDOW]),
        "step_time_p25_s": one(sorted(steps)[STEPS // 4], "s"),
        "tokens_per_s": MetricValue(tokens / step, "tok/s", rates, [tokens / step], keys),
        "samples_per_hour": one(4 * 3600 / step, "samples/h"),
        "warmup_s": one(3.0 + rng.random(), "s"),
        "peak_allocated_gib": one(20.0 + index * 0.1, "GiB"),
        "peak_reserved_gib": one(21.0 + index * 0.1, "GiB"),
        "device_mem_peak_gib": one(21.5 + index * 0.1, "GiB"),
        "host_peak_rss_gib": one(2.1 + rng.random() * 0.05, "GiB"),
        "energy_per_token_j": one(0.09 * (1 + rng.gauss(0, 0.01)), "J/tok"),
        "power_mean_w": one(600 + rng.gauss(0, 5), "W"),
        "power_peak_w": one(690 + rng.gauss(0, 3), "W"),
    }
    created = night_start(night).replace("T02:00", f"T02:{min(59, index // 2):02d}")
    return CaseResult(
        case_id=case_id,
        case=CaseRecord(),
        gpu_class="h100",
        outcome="ok",
        metrics=metrics,
        effective_config=EffectiveConfig(trainable_params=43_646_976),
        fingerprint=Fingerprint.from_dict(fingerprint),
        verdict=(
            StoredVerdict("regressed", reason=f"regressed: step_time_s {100 * (SLOWDOWN - 1):+.1f}%")
            if slowed
            else StoredVerdict("pass")
        ),
        created=created,
    )


def write_nights(root: Path, nights: int, cases: int, first_night: int = 0, seed: int = 0) -> list[Path]:
    """The run folders of ``nights`` nights (written once; an existing folder is kept)."""
    folders = []
    ids = case_ids(cases)
    for night in range(first_night, first_night + nights):
        folder = root / f"{night_start(night)[:10]}-h100"
        folders.append(folder)
        if (folder / "run.json").is_file():
            continue
        rng = random.Random(seed * 100_000 + night)
        fingerprint = {**FINGERPRINT, "transformers": "5.18.0" if night >= UPGRADE_NIGHT else "5.17.0"}
        for index, case_id in enumerate(ids):
            save_result(
                folder / "results" / f"{case_id}.json", _result(case_id, index, night, rng, fingerprint)
            )
        record = {
            "sessions": [
                {
                    "started": night_start(night),
                    "argv": ["pytest", "-m", "h100"],
                    "gpu_class": "h100",
                    "fingerprint": fingerprint,
                }
            ]
        }
        (folder / "run.json").write_text(json.dumps(record))
    return folders
