"""The direct CUPTI reader on the CPU: records laid out as CUPTI writes them, a library that behaves as
CUPTI's Activity API does (buffers asked for, filled, handed back on a forced flush, walked record by
record), and the fallback to the profiler where no CUPTI answers."""

from __future__ import annotations

import ctypes
import struct
from pathlib import Path
from typing import Any

import pytest
from store_data import make_result, nightly

from trainperf.errors import TrainperfError
from trainperf.ground.settings import resolve
from trainperf.report.summary import kernel_clock_line
from trainperf.run_record import RunRecord
from trainperf.traces.cupti_records import (
    KERNEL_NAME_OFFSET,
    KIND_CONCURRENT_KERNEL,
    KIND_MEMCPY,
    KIND_MEMSET,
    MEMSET_MEMORY_KIND_OFFSET,
    RecordError,
    decode_record,
)
from trainperf.traces.kernel_steps import DeviceActivity, in_nanoseconds, kernel_times
from trainperf.workloads import kernel_clock
from trainperf.workloads.cupti_clock import (
    CuptiActivityReader,
    CuptiUnavailable,
    inside,
    loaded_library,
    readable_ranges,
)

RECORD_BYTES = 160
"""Every fake record takes this many bytes: the reader must not assume a size, CUPTI's walk gives it."""


def kernel_record(start: int, end: int, name_pointer: int) -> bytes:
    record = bytearray(RECORD_BYTES)
    struct.pack_into("<I", record, 0, KIND_CONCURRENT_KERNEL)
    struct.pack_into("<QQ", record, 16, start, end)
    struct.pack_into("<Q", record, KERNEL_NAME_OFFSET, name_pointer)
    return bytes(record)


def memcpy_record(start: int, end: int, copy: int = 8, src: int = 3, dst: int = 3) -> bytes:
    record = bytearray(RECORD_BYTES)
    struct.pack_into("<IBBB", record, 0, KIND_MEMCPY, copy, src, dst)
    struct.pack_into("<QQ", record, 16, start, end)
    return bytes(record)


def memset_record(start: int, end: int, memory_kind: int = 3) -> bytes:
    record = bytearray(RECORD_BYTES)
    struct.pack_into("<I", record, 0, KIND_MEMSET)
    struct.pack_into("<QQ", record, 16, start, end)
    struct.pack_into("<H", record, MEMSET_MEMORY_KIND_OFFSET, memory_kind)
    return bytes(record)


def test_records_decode_to_the_names_and_intervals_the_profiler_shows() -> None:
    names = {0x1000: "void at::native::vectorized_elementwise_kernel<4>()"}
    data = kernel_record(100, 250, 0x1000) + memcpy_record(300, 310) + memset_record(400, 405)
    found = [decode_record(data, offset, names.__getitem__) for offset in (0, RECORD_BYTES, 2 * RECORD_BYTES)]
    assert [(a.name, a.kind, a.start_ns, a.end_ns) for a in found if a] == [
        ("void at::native::vectorized_elementwise_kernel<4>()", "kernel", 100, 250),
        ("Memcpy DtoD (Device -> Device)", "gpu_memcpy", 300, 310),
        ("Memset (Device)", "gpu_memset", 400, 405),
    ]


def test_a_kind_not_asked_for_is_skipped_and_a_record_ending_before_it_starts_is_an_error() -> None:
    other = bytearray(RECORD_BYTES)
    struct.pack_into("<I", other, 0, 5)  # a runtime API record
    assert decode_record(bytes(other), 0, str) is None
    with pytest.raises(RecordError, match="ends before it starts"):
        decode_record(kernel_record(500, 400, 1), 0, str)


def test_a_name_pointer_is_read_only_inside_readable_memory() -> None:
    maps = (
        "7f0000000000-7f0000001000 r-xp 00000000 08:01 1 /usr/lib/libcupti.so.13\n"
        "7f0000002000-7f0000003000 ---p 00000000 00:00 0\n"
        "7f0000004000-7f0000005000 rw-p 00000000 00:00 0 [heap]\n"
    )
    ranges = readable_ranges(maps)
    assert inside(ranges, 0x7F0000000010) and inside(ranges, 0x7F0000004FFF)
    assert not inside(ranges, 0x7F0000002010) and not inside(ranges, 0x10)


def test_the_loaded_cupti_library_is_found_in_the_process_map(tmp_path: Path) -> None:
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f10 r-xp 00000000 08:01 1 /venv/lib/libtorch_cuda.so\n"
        "7f20-7f30 r-xp 00000000 08:01 2 /venv/nvidia/cu13/lib/libcupti.so.13\n"
    )
    assert loaded_library(maps) == "/venv/nvidia/cu13/lib/libcupti.so.13"
    maps.write_text("7f00-7f10 r-xp 00000000 08:01 1 /venv/lib/libtorch_cpu.so\n")
    assert loaded_library(maps) is None
    assert loaded_library(tmp_path / "absent") is None


class FakeCupti:
    """CUPTI's Activity API as the reader uses it: activity is written into buffers the reader hands
    out, and a forced flush hands every buffer back through the completion callback."""

    def __init__(self, records: list[bytes], dropped: int = 0) -> None:
        self.records = records
        self.dropped = dropped
        self.enabled: set[int] = set()
        self.request: Any = None
        self.complete: Any = None
        # Plain functions, as ctypes' are: the reader sets their argtypes.
        self.cuptiActivityGetNextRecord = lambda *args: self._next_record(*args)
        self.cuptiActivityGetNumDroppedRecords = lambda *args: self._dropped(*args)

    def cuptiActivityRegisterCallbacks(self, request: Any, complete: Any) -> int:
        self.request, self.complete = request, complete
        return 0

    def cuptiActivityEnable(self, kind: ctypes.c_int) -> int:
        self.enabled.add(kind.value)
        return 0

    def cuptiActivityDisable(self, kind: ctypes.c_int) -> int:
        self.enabled.discard(kind.value)
        return 0

    def cuptiActivityFlushAll(self, _flag: ctypes.c_uint32) -> int:
        pointer, size, most = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t()
        self.request(ctypes.byref(pointer), ctypes.byref(size), ctypes.byref(most))
        data = b"".join(self.records)
        assert len(data) <= size.value and pointer.value % 8 == 0
        ctypes.memmove(pointer.value, data, len(data))
        self.complete(None, 0, pointer.value, size.value, len(data))
        return 0

    def _next_record(self, buffer: int, valid: int, record: Any) -> int:
        current = record._obj
        following = buffer if not current.value else current.value + RECORD_BYTES
        if following >= buffer + valid:
            return 12
        current.value = following
        return 0

    def _dropped(self, _context: Any, _stream: int, count: Any) -> int:
        count._obj.value = self.dropped
        return 0


def test_the_reader_hands_cupti_buffers_and_reads_every_record_back_into_steps() -> None:
    marker = ctypes.create_string_buffer(b"_ZN2at4cuda12_GLOBAL__N_111spin_kernelEl")
    gemm = ctypes.create_string_buffer(b"sm90_xmma_gemm_bf16bf16_bf16f32")
    mark, work = ctypes.addressof(marker), ctypes.addressof(gemm)
    records = [
        kernel_record(0, 1, mark),
        kernel_record(10, 60, work),
        memcpy_record(70, 80),
        kernel_record(100, 101, mark),
        kernel_record(110, 150, work),
        kernel_record(200, 201, mark),
    ]
    fake = FakeCupti(records)
    reader = CuptiActivityReader(fake, lambda name: name.replace("_ZN2at4cuda12_GLOBAL__N_111", ""))  # type: ignore[arg-type]
    reader.start()
    assert fake.enabled == {1, 2, 10}
    recording = reader.stop()
    assert fake.enabled == set() and recording.lost == ""
    times = kernel_times(recording.activities, first_step=3)
    assert [(s.step, s.busy_ms * 1e6, s.kernels) for s in times.steps] == [(3, 60.0, 2), (4, 40.0, 1)]


def test_records_cupti_dropped_make_the_window_unmeasured_with_the_count() -> None:
    marker = ctypes.create_string_buffer(b"spin_kernel")
    fake = FakeCupti([kernel_record(0, 1, ctypes.addressof(marker))], dropped=3)
    reader = CuptiActivityReader(fake, str)  # type: ignore[arg-type]
    reader.start()
    assert reader.stop().lost == "CUPTI lost part of the window: 3 record(s) dropped"


def test_a_name_pointer_outside_readable_memory_is_an_error_not_a_crash() -> None:
    fake = FakeCupti([kernel_record(0, 1, 0x10)])
    reader = CuptiActivityReader(fake, str)  # type: ignore[arg-type]
    reader.start()
    with pytest.raises(RecordError, match="outside readable memory"):
        reader.stop()


def test_auto_falls_back_to_the_profiler_and_says_why_while_cupti_asked_for_has_no_fallback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[str] = []

    class Profiler:
        name = "profiler"

        def start(self) -> None:
            started.append("profiler")

    def no_cupti() -> Any:
        raise CuptiUnavailable("no CUPTI library loads")

    monkeypatch.setattr(kernel_clock, "CuptiRecorder", no_cupti)
    monkeypatch.setattr(kernel_clock, "ProfilerRecorder", Profiler)
    recorder, note = kernel_clock.start_recorder("auto")
    assert recorder.name == "profiler" and started == ["profiler"]
    assert (
        note
        == "CUPTI directly unavailable (CuptiUnavailable: no CUPTI library loads): read through the profiler"
    )
    with pytest.raises(CuptiUnavailable):
        kernel_clock.start_recorder("cupti")
    assert kernel_clock.start_recorder("profiler")[1] == ""


def test_a_kernel_clock_outside_the_three_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(
        TrainperfError, match=r"--perf-kernel-clock='nvtx' is not valid: .*must be auto, cupti or profiler"
    ):
        resolve({"kernel_clock": "nvtx"}, lambda _name: None, tmp_path)
    assert resolve({}, lambda _name: None, tmp_path).kernel_clock == "auto"


def _marked(scale: float) -> list[DeviceActivity]:
    """Two step markers 2 s apart on the host, a 10 ms kernel between them, in a clock ``scale`` times
    nanoseconds."""
    return [
        DeviceActivity(
            "at::cuda::(anonymous namespace)::spin_kernel(long)",
            "kernel",
            int(1e9 * scale),
            int(1e9 * scale) + 5,
        ),
        DeviceActivity("gemm", "kernel", int(1.5e9 * scale), int((1.5e9 + 1e7) * scale)),
        DeviceActivity(
            "at::cuda::(anonymous namespace)::spin_kernel(long)",
            "kernel",
            int(3e9 * scale),
            int(3e9 * scale) + 5,
        ),
    ]


def test_records_in_nanoseconds_are_kept_and_records_in_another_clock_are_converted_by_the_marker_ratio() -> (
    None
):
    host = [10_000_000_000 - 7_000, 12_000_000_000 - 7_000]  # each marker launched 7 us before it ran
    same, note = in_nanoseconds(_marked(1.0), host)
    assert note == "" and same == _marked(1.0)
    converted, note = in_nanoseconds(_marked(2.0996), host)
    assert "x2.0996 the host's" in note and "converted to nanoseconds" in note
    times = kernel_times(list(converted), first_step=3)
    assert times.steps[0].busy_ms == pytest.approx(10.0, rel=1e-6)
    assert in_nanoseconds(_marked(2.0996)[:1], host) == (_marked(2.0996)[:1], "")


def test_the_summary_says_once_which_cases_kernel_records_were_not_read_as_asked() -> None:
    read_direct = make_result("sft_hf-qwen3_8b-qlora-short-b4", nightly(1), 1.0)
    read_direct.runs = [RunRecord(kernel_clock="cupti"), RunRecord(kernel_clock="cupti")]
    fell_back = make_result("rl_trl-qwen2_5_3b-lora-fixed-b16-p128-c64-g8", nightly(1), 5.0)
    fell_back.runs = [
        RunRecord(
            kernel_clock="profiler",
            kernel_clock_note="CUPTI directly unavailable (CuptiUnavailable: no CUPTI library loads)",
        )
    ]
    assert kernel_clock_line([read_direct]) == []
    expected = (
        "kernel records of 1 case(s) not read as asked (rl_trl-qwen2_5_3b-lora-fixed-b16-p128-c64-g8): "
        "profiler: CUPTI directly unavailable (CuptiUnavailable: no CUPTI library loads)"
    )
    assert kernel_clock_line([read_direct, fell_back]) == [expected]
