"""Runner hygiene with a fake NVML reading: foreign processes and throttling are found and reported."""

from __future__ import annotations

import os

from trainperf.measure.hygiene import GpuState, check, judge, throttle_names
from trainperf.run.case_notes import gpu_notes
from trainperf.run_record import RunRecord


def test_idle_gpu_at_full_clocks_is_clean() -> None:
    state = GpuState(
        "0",
        processes=(),
        sm_clock_mhz=1980,
        sm_clock_max_mhz=1980,
        power_limit_w=700.0,
        clock_event_reasons=0x1,
    )
    hygiene = judge([state])
    assert hygiene.clean and hygiene.problems() == []
    assert hygiene.record().to_dict()["gpus"][0]["power_limit_w"] == 700.0


def test_foreign_process_and_throttle_are_problems() -> None:
    busy = GpuState("1", processes=((4242, 3 * 2**30), (os.getpid(), None)), clock_event_reasons=0x40 | 0x1)
    hygiene = check(["1"], read=lambda device: busy)
    assert not hygiene.clean
    assert hygiene.foreign == {"1": [(4242, 3 * 2**30)]}  # this process itself is never foreign
    assert hygiene.throttled == {"1": ["hw_thermal_slowdown"]}
    assert hygiene.problems() == [
        "GPU 1 busy before the case: pid 4242 (3.0 GiB)",
        "GPU 1 throttled before the case: hw_thermal_slowdown",
    ]


def test_benign_clock_reasons_are_not_throttling() -> None:
    assert throttle_names(0x1 | 0x2 | 0x10 | 0x100) == []
    assert throttle_names(0x4 | 0x80) == ["sw_power_cap", "hw_power_brake_slowdown"]
    assert throttle_names(None) == []


def test_problems_reach_the_case_notes() -> None:
    hygiene = judge([GpuState("0", processes=((99, None),), clock_event_reasons=0x8)])
    notes = gpu_notes([RunRecord(gpu_before=hygiene.record())])
    assert notes == [
        "run 1: GPU 0 held by foreign process(es) 99 before it started (noisy neighbour?)",
        "run 1: GPU 0 throttled before it started (hw_slowdown)",
    ]
