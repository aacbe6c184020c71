"""CUPTI activity records as device intervals (pure: bytes in, ``DeviceActivity`` out; no library).

CUPTI writes its activity into buffers the reader hands it, one packed record after another
(``cupti_activity.h``): a 4-byte kind, then the kind's fields. Only the fields every revision of the
kernel (4 to 11), memcpy (4 to 6) and memset (3 to 4) records share are read here; revisions append
or replace trailing fields, so the offsets below hold for any CUPTI of CUDA 11 to 13. The walk from
one record to the next is CUPTI's own (``cuptiActivityGetNextRecord``, in ``workloads.cupti_clock``):
the records' sizes are the library's business.

Names are read as the PyTorch profiler shows them, so that a run's top kernels compare with a
baseline's whichever reader took them: kernels demangled, copies ``Memcpy DtoD (Device -> Device)``,
sets ``Memset (Device)``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from trainperf.traces.kernel_steps import DeviceActivity

KIND_MEMCPY = 1
KIND_MEMSET = 2
KIND_CONCURRENT_KERNEL = 10
RECORDED_KINDS = (KIND_CONCURRENT_KERNEL, KIND_MEMCPY, KIND_MEMSET)
"""What the kernel clock asks CUPTI for: the device's work, no host-side API records."""

KERNEL_NAME_OFFSET = 104
"""The kernel record's ``const char *name`` (after the launch geometry, correlation and grid ids)."""
MEMCPY_KINDS_OFFSET = 4
"""The memcpy record's ``copyKind``, ``srcKind`` and ``dstKind`` bytes."""
MEMSET_MEMORY_KIND_OFFSET = 50
"""The memset record's 16-bit ``memoryKind`` (after ``flags``)."""
HEAD = struct.Struct("<I12xQQ")
"""The kind, then ``start`` and ``end`` (ns) at bytes 16 and 24 of all three records: one read, as a
window holds hundreds of thousands of records."""
POINTER = struct.Struct("<Q")
BYTES = struct.Struct("<BBB")
HALF = struct.Struct("<H")

COPY_KINDS = ("<unknown>", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP")
MEMORY_KINDS = (
    "Unknown",
    "Pageable",
    "Pinned",
    "Device",
    "Array",
    "Managed",
    "Device Static",
    "Managed Static",
)


class RecordError(ValueError):
    """A record that cannot be what its kind says: a layout this reader does not know."""


def _label(table: tuple[str, ...], index: int) -> str:
    return table[index] if 0 <= index < len(table) else table[0]


def memcpy_name(copy_kind: int, src_kind: int, dst_kind: int) -> str:
    return (
        f"Memcpy {_label(COPY_KINDS, copy_kind)} "
        f"({_label(MEMORY_KINDS, src_kind)} -> {_label(MEMORY_KINDS, dst_kind)})"
    )


def memset_name(memory_kind: int) -> str:
    return f"Memset ({_label(MEMORY_KINDS, memory_kind)})"


def decode_record(buffer: bytes, offset: int, kernel_name: Callable[[int], str]) -> DeviceActivity | None:
    """The interval of the record at ``offset``, None for a kind the clock did not ask for.
    ``kernel_name`` turns a kernel record's name pointer into its demangled name."""
    kind, start, end = HEAD.unpack_from(buffer, offset)
    if kind not in RECORDED_KINDS:
        return None
    if end < start:
        raise RecordError(f"a kind-{kind} record ends before it starts ({start} > {end} ns)")
    if kind == KIND_CONCURRENT_KERNEL:
        pointer = POINTER.unpack_from(buffer, offset + KERNEL_NAME_OFFSET)[0]
        return DeviceActivity(kernel_name(pointer), "kernel", start, end)
    if kind == KIND_MEMCPY:
        name = memcpy_name(*BYTES.unpack_from(buffer, offset + MEMCPY_KINDS_OFFSET))
        return DeviceActivity(name, "gpu_memcpy", start, end)
    memory_kind = HALF.unpack_from(buffer, offset + MEMSET_MEMORY_KIND_OFFSET)[0]
    return DeviceActivity(memset_name(memory_kind), "gpu_memset", start, end)
