"""OOM cliffs (E1, E2): the largest batch that fits, found by fresh children, gated against baselines.

The tiny CPU cliff runs under a 4 GiB address-space cap, so a CPU really runs out of memory
(the allocator's "can't allocate memory", classified as an OOM) and the search is exercised
end to end on any machine.
"""

from __future__ import annotations

from typing import Any

import pytest

from trainperf.case import Case
from trainperf.ground.catalogue import marks_for

GPU = ("maxq", "h100", "h200")


def sft(model: str, method: str, profile: str, batch: int, classes: tuple[str, ...], **kw: Any) -> Case:
    return Case(
        family="sft_hf",
        model=model,
        method=method,
        profile=profile,
        batch_size=batch,
        gpu_classes=classes,
        **kw,
    )  # type: ignore[arg-type]


CLIFFS = [
    (sft("qwen3_tiny", "lora", "long", 1, ("cpu",), memory_cap_gib=4), "batch_size", 1, 512),
    (sft("qwen3_8b", "lora", "long", 1, GPU, slow=True), "batch_size", 1, 512),
    (sft("qwen3_8b", "qlora", "long", 1, GPU, slow=True), "batch_size", 1, 512),
    (sft("qwen3_32b", "lora", "long", 1, GPU, slow=True), "batch_size", 1, 64),
]


@pytest.mark.parametrize(
    ("case", "axis", "low", "high"),
    [pytest.param(c, a, lo, hi, id=f"{c.id}-cliff-{a}", marks=marks_for(c)) for c, a, lo, hi in CLIFFS],
)
def test_oom_cliff(case: Case, axis: str, low: int, high: int, trainperf: Any) -> None:
    trainperf.cliff(case, axis, low, high)
