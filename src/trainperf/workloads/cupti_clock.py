"""The device's own record of its kernels, copies and sets, read from CUPTI's activity API directly.

The PyTorch profiler reads the same records, but it also records every CUDA runtime call, links each
launch to its kernel and builds an event per record: about 30 us a kernel to read back, 6.8 s for one
TRL GRPO step of 226,000 kernels (14% of its run). Here CUPTI is asked for the device's work alone
(concurrent kernels, memcpy, memset) through the CUPTI library the process already has loaded (the
one PyTorch's profiler uses, so that both agree on one instance), into buffers this reader owns, and
the records are decoded at the window's end (``traces.cupti_records``): a few microseconds a record.

CUPTI calls back into Python only to ask for a buffer and to hand one back; buffers are large, so a
window asks for a few. The Activity API is process-wide and is not shared with a running profiler: the
kernel window never overlaps a trace's profiled steps (``traces.kernel_steps.kernel_window``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import time
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainperf.traces.cupti_records import RECORDED_KINDS, RecordError, decode_record
from trainperf.traces.kernel_steps import DeviceActivity

SUCCESS = 0
MAX_LIMIT_REACHED = 12
"""``cuptiActivityGetNextRecord``'s answer at a buffer's end."""
FLUSH_FORCED = 1
BUFFER_BYTES = 32 * 1024 * 1024
"""One buffer holds about 150,000 kernel records: a window asks for a few."""
ALIGNMENT = 8
FLUSH_WAIT_S = 2.0
"""A forced flush hands every buffer back before it returns; this only bounds a CUPTI that does not."""

_REQUEST = ctypes.CFUNCTYPE(
    None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)
)
_COMPLETE = ctypes.CFUNCTYPE(
    None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t
)


@dataclass(slots=True)
class Recording:
    """What a window recorded, and what CUPTI lost of it: a step missing records is not measured."""

    activities: list[DeviceActivity] = field(default_factory=list)
    dropped: int = 0
    """Records CUPTI dropped (a full buffer it could not replace)."""
    unreturned: int = 0
    """Buffers CUPTI took and never handed back."""

    @property
    def lost(self) -> str:
        """Why this recording is incomplete, or ''."""
        parts = [f"{self.dropped} record(s) dropped"] if self.dropped else []
        parts += [f"{self.unreturned} buffer(s) not handed back"] if self.unreturned else []
        return "CUPTI lost part of the window: " + ", ".join(parts) if parts else ""


class CuptiUnavailable(RuntimeError):
    """No CUPTI library answers in this process: the clock reads through the profiler instead."""


def loaded_library(maps: Path = Path("/proc/self/maps")) -> str | None:
    """The CUPTI library this process has mapped (PyTorch's CUDA build links one), else None."""
    try:
        lines = maps.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
        if "libcupti" in Path(path).name:
            return path
    return None


def readable_ranges(maps_text: str) -> list[tuple[int, int]]:
    """The address ranges ``/proc/self/maps`` marks readable: a kernel record's name pointer is read
    only inside one, so that a record layout this reader misreads is an error, never a crash."""
    ranges = []
    for line in maps_text.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[1].startswith("r") and "-" in fields[0]:
            low, high = fields[0].split("-", 1)
            ranges.append((int(low, 16), int(high, 16)))
    return sorted(ranges)


def inside(ranges: list[tuple[int, int]], address: int) -> bool:
    index = bisect_right(ranges, (address, 1 << 64)) - 1
    return index >= 0 and ranges[index][0] <= address < ranges[index][1]


def open_library() -> ctypes.CDLL:
    """The process's CUPTI, or the first one the loader finds; ``CuptiUnavailable`` where none loads."""
    candidates = [loaded_library(), "libcupti.so", ctypes.util.find_library("cupti")]
    errors = []
    for name in [c for c in candidates if c]:
        try:
            return ctypes.CDLL(name)
        except OSError as exc:
            errors.append(f"{name}: {exc}")
    raise CuptiUnavailable("no CUPTI library loads" + (f" ({'; '.join(errors)})" if errors else ""))


class CuptiActivityReader:
    """Records the device's work between ``start`` and ``stop``; ``stop`` returns it as intervals."""

    def __init__(self, library: ctypes.CDLL, kernel_name: Callable[[str], str]) -> None:
        self.lib = library
        self.demangle = kernel_name
        self._buffers: dict[int, ctypes.Array[ctypes.c_char]] = {}
        self._completed: list[tuple[int, int, int, int]] = []
        """(buffer address, valid bytes, context, stream) as CUPTI handed them back."""
        self._names: dict[int, str] = {}
        self._readable: list[tuple[int, int]] = []
        self._enabled: list[int] = []
        # ctypes keeps a callback alive only while a Python reference to it exists.
        self._on_request = _REQUEST(self._request)
        self._on_complete = _COMPLETE(self._complete)
        self.lib.cuptiActivityGetNextRecord.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.POINTER(ctypes.c_void_p),
        ]
        self.lib.cuptiActivityGetNumDroppedRecords.argtypes = [
            ctypes.c_void_p,
            ctypes.c_uint32,
            ctypes.POINTER(ctypes.c_size_t),
        ]

    def _request(self, buffer: Any, size: Any, max_records: Any) -> None:
        block = ctypes.create_string_buffer(BUFFER_BYTES + ALIGNMENT)
        address = ctypes.addressof(block)
        aligned = (address + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
        self._buffers[aligned] = block
        buffer[0] = aligned
        size[0] = BUFFER_BYTES
        max_records[0] = 0  # as many as fit

    def _complete(self, context: int | None, stream: int, buffer: int | None, _size: int, valid: int) -> None:
        self._completed.append((int(buffer or 0), int(valid), int(context or 0), int(stream)))

    def _check(self, code: int, call: str) -> None:
        if code != SUCCESS:
            raise RuntimeError(f"{call} returned CUPTI error {code}")

    def start(self) -> None:
        self._check(self.lib.cuptiActivityRegisterCallbacks(self._on_request, self._on_complete), "register")
        for kind in RECORDED_KINDS:
            self._check(self.lib.cuptiActivityEnable(ctypes.c_int(kind)), f"enable kind {kind}")
            self._enabled.append(kind)

    def stop(self) -> Recording:
        """Every recorded interval; the device must be synchronised first."""
        for kind in self._enabled:
            self.lib.cuptiActivityDisable(ctypes.c_int(kind))
        self._enabled.clear()
        self._check(self.lib.cuptiActivityFlushAll(ctypes.c_uint32(FLUSH_FORCED)), "flush")
        deadline = time.monotonic() + FLUSH_WAIT_S
        while len(self._completed) < len(self._buffers) and time.monotonic() < deadline:
            time.sleep(0.01)
        self._readable = readable_ranges(Path("/proc/self/maps").read_text())
        recording = Recording(unreturned=max(0, len(self._buffers) - len(self._completed)))
        for address, valid, context, stream in self._completed:
            recording.activities.extend(self._decode(address, valid))
            recording.dropped += self._dropped(context, stream)
        self._buffers.clear()
        self._completed.clear()
        return recording

    def _decode(self, address: int, valid: int) -> list[DeviceActivity]:
        if not address or not valid:
            return []
        data = ctypes.string_at(address, valid)
        record = ctypes.c_void_p()
        found: list[DeviceActivity] = []
        while True:
            code = self.lib.cuptiActivityGetNextRecord(address, valid, ctypes.byref(record))
            if code == MAX_LIMIT_REACHED:
                return found
            self._check(code, "get next record")
            activity = decode_record(data, int(record.value or 0) - address, self._name)
            if activity is not None:
                found.append(activity)

    def _dropped(self, context: int, stream: int) -> int:
        count = ctypes.c_size_t(0)
        code = self.lib.cuptiActivityGetNumDroppedRecords(context or None, stream, ctypes.byref(count))
        return int(count.value) if code == SUCCESS else 0

    def _name(self, pointer: int) -> str:
        """CUPTI keeps one copy of each kernel's mangled name for the process's life: decoded once."""
        name = self._names.get(pointer)
        if name is None:
            if not inside(self._readable, pointer):
                raise RecordError(f"a kernel record's name points outside readable memory ({pointer:#x})")
            raw = ctypes.string_at(pointer).decode("utf-8", "replace")
            name = self._names[pointer] = self.demangle(raw)
        return name
