"""Do the two kernel-record readers agree, and what does each cost to read back? (GPU only)

    python benchmarks/kernel_clock_check.py [--tiny N] [--json FILE]

The same fixed work (matrix products, elementwise kernels, a copy, a set, then N tiny kernels, as a
generation loop launches them) is recorded once through each reader (``--perf-kernel-clock cupti`` and
``profiler``), framed by the marker kernel as a run's window is. Printed per reader: the records read,
the read-back time (from the synchronised end of the work to the figures), the framed step's kernel
time and its groups, and the kernels whose summed time differs between the readers by more than 1%.
Exit 1 where the two disagree (kernel time beyond 1%, or a kernel name only one reader saw).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch

from trainperf.traces.kernel_steps import DeviceActivity, in_nanoseconds, kernel_times
from trainperf.workloads.kernel_clock import start_recorder


def work(tiny: int) -> None:
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    for _ in range(20):
        a = torch.nn.functional.gelu(a @ a.T / 64)
    b = torch.empty_like(a)
    b.copy_(a)
    b.zero_()
    x = torch.zeros(16, device="cuda")
    for _ in range(tiny):
        x.add_(1.0)


def record(clock: str, tiny: int) -> tuple[list[DeviceActivity], float, str]:
    """One recording of the work, framed by two markers as a run's window is; its records in
    nanoseconds (``in_nanoseconds``: converted where another profiler left CUPTI's clock in ticks)."""
    recorder, note = start_recorder(clock)
    marks = [time.perf_counter_ns()]
    torch.cuda._sleep(0)
    work(tiny)
    torch.cuda.synchronize()
    marks.append(time.perf_counter_ns())
    torch.cuda._sleep(0)
    began = time.perf_counter()
    torch.cuda.synchronize()
    activities, converted = in_nanoseconds(recorder.stop(), marks)
    return list(activities), time.perf_counter() - began, "; ".join(p for p in (note, converted) if p)


def totals(activities: list[DeviceActivity]) -> dict[str, tuple[float, int]]:
    found: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for a in activities:
        entry = found[a.name]
        entry[0] += (a.end_ns - a.start_ns) / 1e6
        entry[1] += 1
    return {name: (ms, int(count)) for name, (ms, count) in found.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", type=int, default=100_000, help="tiny kernels after the products")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    work(10)  # first-time kernels and the allocator, outside both recordings
    torch.cuda.synchronize()
    summary: dict[str, dict[str, object]] = {}
    kernels: dict[str, dict[str, tuple[float, int]]] = {}
    for clock in ("cupti", "profiler", "cupti"):
        activities, read_s, note = record(clock, args.tiny)
        times = kernel_times(activities, first_step=1)
        step = times.steps[0] if times.steps else None
        busy = step.busy_ms if step else float("nan")
        print(
            f"{clock:<8} records {len(activities):>8,}  read back {read_s:7.3f} s  "
            f"kernel time {busy:10.3f} ms  {times.error or ''} {note}"
        )
        if step:
            print(f"{'':9}groups {json.dumps(step.groups_ms)}")
        summary.setdefault(clock, {"records": len(activities), "read_back_s": [], "kernel_ms": []})
        summary[clock]["read_back_s"].append(round(read_s, 4))  # type: ignore[union-attr]
        summary[clock]["kernel_ms"].append(round(busy, 4))  # type: ignore[union-attr]
        kernels[clock] = totals(activities)
    direct, profiler = kernels["cupti"], kernels["profiler"]
    # The same names and counts must be seen; durations are of separate executions (about 1% apart).
    differing = [
        (name, direct.get(name), profiler.get(name))
        for name in sorted(set(direct) | set(profiler))
        if (direct.get(name) or (0, -1))[1] != (profiler.get(name) or (0, -2))[1]
    ]
    for name, a, b in differing[:20]:
        print(f"  differs: {name[:90]}  cupti {a}  profiler {b}")
    busy_direct = summary["cupti"]["kernel_ms"][-1]  # type: ignore[index]
    busy_profiler = summary["profiler"]["kernel_ms"][0]  # type: ignore[index]
    change = busy_direct / busy_profiler - 1
    agree = abs(change) <= 0.01 and not differing
    print(
        f"kernel time, last cupti over profiler: {change:+.3%}; "
        f"{len(differing)} kernel name(s) or count(s) differ"
    )
    if args.json:
        args.json.write_text(
            json.dumps({"summary": summary, "differing": differing[:50]}, indent=1, default=str)
        )
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
