"""--perf-emulate: a larger GPU stands in for a smaller class, its memory capped to that class's."""

from __future__ import annotations

from typing import Any

import pytest

from trainperf.case_record import CaseRecord
from trainperf.errors import TrainperfError
from trainperf.judge.compare import timing_comparable
from trainperf.measure.detection import Detection, emulate
from trainperf.measure.hardware import load_classes
from trainperf.measure.nvml import DeviceInfo
from trainperf.result import CaseResult
from trainperf.workloads import child
from trainperf.workloads.protocol import ChildSpec

CLASSES = load_classes()


def h200_detection() -> Detection:
    info = DeviceInfo(0, "NVIDIA H200", "GPU-x", 143771 * 2**20, "580.159.04", "13.0", 700.0, "0000:00:00.0")
    return Detection(CLASSES["h200"], "0", info, False)


def test_an_h200_stands_in_for_a_maxq() -> None:
    emulated = emulate(h200_detection(), CLASSES, "maxq")
    assert emulated.gpu_class is not None and emulated.gpu_class.name == "maxq"
    assert emulated.emulated == "maxq" and emulated.device == "0"
    assert "class maxq, emulated" in emulated.describe()


@pytest.mark.parametrize(
    ("name", "message"),
    [("a100", "not a GPU class"), ("cpu", "not a GPU class"), ("h200", "already is class h200")],
)
def test_what_cannot_be_emulated_is_one_line(name: str, message: str) -> None:
    with pytest.raises(TrainperfError, match=message):
        emulate(h200_detection(), CLASSES, name)


def test_a_smaller_gpu_cannot_stand_in_for_a_larger_class() -> None:
    info = DeviceInfo(
        0, "NVIDIA H100 80GB HBM3", "GPU-y", 81559 * 2**20, "580.159.04", "13.0", 700.0, "0000:00:00.0"
    )
    with pytest.raises(TrainperfError, match="needs a GPU with more than its 96 GiB"):
        emulate(Detection(CLASSES["h100"], "0", info, False), CLASSES, "maxq")


def test_emulation_needs_a_gpu() -> None:
    with pytest.raises(TrainperfError, match="NVML sees no GPU"):
        emulate(Detection(CLASSES["cpu"], None, None, False), CLASSES, "maxq")


def test_the_smaller_of_the_case_cap_and_the_emulated_cap_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(child.resource, "setrlimit", lambda kind, limits: calls.append(limits))
    child.apply_memory_cap(ChildSpec(case={"memory_cap_gib": 8}, steps=0, out_dir="", memory_cap_gib=4))
    child.apply_memory_cap(ChildSpec(case={"memory_cap_gib": 2}, steps=0, out_dir="", memory_cap_gib=4))
    child.apply_memory_cap(ChildSpec(case={}, steps=0, out_dir="", memory_cap_gib=None))
    assert calls == [(4 * 2**30, 4 * 2**30), (2 * 2**30, 2 * 2**30)]


def test_emulated_results_are_never_timed_against_a_baseline() -> None:
    baseline = CaseResult(case_id="c", case=CaseRecord(), gpu_class="maxq", outcome="ok")
    result = CaseResult(case_id="c", case=CaseRecord(), gpu_class="maxq", outcome="ok", emulated="maxq")
    comparable, why = timing_comparable(baseline, result, ())
    assert not comparable and "emulated" in why
