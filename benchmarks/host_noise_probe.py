"""Where a runner's host time moves: between fresh processes, within one process over time, and with the
process pinned to one core or not.

A host-bound training step is the interpreter plus one kernel launch after another. This probe times
exactly that, with nothing of a model: a loop of tiny in-place operations on the device (each a kernel
launch through PyTorch's dispatcher), synchronised at the end, reported as microseconds a launch; and
the suite's host index (``workloads.host_index``) beside it. It answers what a runner's own history
cannot: whether a host-bound case's run-to-run spread is a property of each process (then pinning or
placement helps) or of the machine over time (then only interleaving and repeats do).

    python benchmarks/host_noise_probe.py --processes 12 --long-s 40 --out probe.jsonl

Fresh processes alternate free and pinned (one core, the same for all); then one process samples the
same loop every second for ``--long-s`` seconds. On a machine without a GPU the loop runs on the CPU
(a dispatcher-only figure), so the probe is checked on any host.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

LAUNCHES = 2000
ROUNDS = 5


def _launch_loop_us(device: str, launches: int = LAUNCHES) -> float:
    """Median over ``ROUNDS`` of microseconds per launch of ``launches`` tiny in-place adds, synchronised."""
    import torch

    tensor = torch.zeros(16, device=device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(launches // 4):  # untimed: the first launches' one-time costs
        tensor.add_(1.0)
    sync()
    rounds = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for _ in range(launches):
            tensor.add_(1.0)
        sync()
        rounds.append((time.perf_counter() - started) * 1e6 / launches)
    return statistics.median(rounds)


def _processor() -> int | None:
    try:
        return int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        return None


def _sample(device: str) -> dict[str, object]:
    from trainperf.workloads.host_index import measure_host_index

    index = measure_host_index()  # first, before CUDA starts, as the suite's children do
    launch_us = _launch_loop_us(device)
    return {
        "index": index["index"],
        "index_median": index["median"],
        "launch_us": round(launch_us, 3),
        "cpu": _processor(),
        "allowed": len(os.sched_getaffinity(0)),
        "t": round(time.time(), 2),
    }


def child(mode: str, long_s: float) -> None:
    """One fresh process's figures as JSON lines; ``long`` samples every second for ``long_s``."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if mode != "long":
        print(json.dumps({"mode": mode, "device": device, **_sample(device)}), flush=True)
        return
    ends = time.monotonic() + long_s
    while time.monotonic() < ends:
        started = time.monotonic()
        print(json.dumps({"mode": "long", "device": device, **_sample(device)}), flush=True)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - started)))


def _spread(values: list[float]) -> str:
    if not values:
        return "-"
    low, high, mid = min(values), max(values), statistics.median(values)
    return f"n={len(values)} median {mid:.3f} min {low:.3f} max {high:.3f} max/min-1 {high / low - 1:+.1%}"


def summary(rows: list[dict[str, object]]) -> list[str]:
    """One line per mode and figure: how far its values lie apart."""
    lines = []
    for mode in ("free", "pinned", "long"):
        picked = [r for r in rows if r.get("mode") == mode]
        for figure in ("launch_us", "index"):
            values = [float(r[figure]) for r in picked if isinstance(r.get(figure), (int, float))]
            lines.append(f"{mode:7s} {figure:10s} {_spread(values)}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--processes", type=int, default=12, help="fresh processes, free and pinned alternately"
    )
    parser.add_argument("--long-s", type=float, default=40.0, help="seconds the long-lived process samples")
    parser.add_argument(
        "--core", type=int, default=None, help="the core pinned processes run on (default: the last allowed)"
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="JSON lines of every sample; the summary beside it (.txt)"
    )
    parser.add_argument("--child", choices=("free", "pinned", "long"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.long_s)
        return 0
    core = args.core if args.core is not None else max(os.sched_getaffinity(0))
    rows: list[dict[str, object]] = []
    plan = [("free" if i % 2 == 0 else "pinned") for i in range(args.processes)] + ["long"]
    for mode in plan:
        command = [sys.executable, __file__, "--child", mode, "--long-s", str(args.long_s), "--out", "-"]
        if mode == "pinned":
            command = ["taskset", "-c", str(core), *command]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        found = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not found:
            print(f"probe: a {mode} process failed: {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            return 1
        rows.extend(found)
        print(f"{mode}: {found[-1]}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = "\n".join(summary(rows)) + "\n"
    args.out.with_suffix(".txt").write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
