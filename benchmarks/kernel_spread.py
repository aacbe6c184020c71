"""Kernel time, host time and the host index of every run in some run folders, and each case's spread
across runs and GPUs: the figures the kernel-time tolerance is set from (docs/verdicts.md).

    python benchmarks/kernel_spread.py RUN_FOLDER... [--json FILE]

One line per fresh child (its run folder, GPU, planted change, kernel clock on or off, kernel ms, host
ms, step s, the child's wall s, host index, SM MHz, the case's verdict), then per case: kernel time's
median, its spread (max/min - 1) and robust CV over the runs with the clock on and no plant, the GPUs
they ran on, and what the clock cost (the median wall time and step time of its runs against those
with it off).
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trainperf.measure.step_parts import step_parts


@dataclass(frozen=True, slots=True)
class Row:
    case: str
    folder: str
    gpu: str
    gpu_class: str
    planted: str
    clock: bool
    kernel_ms: float | None
    host_ms: float | None
    step_s: float | None
    wall_s: float | None
    host_index: float | None
    sm_mhz: float | None
    verdict: str
    parts: str
    keys: tuple[str, ...] = ()
    per_key: tuple[float, ...] = ()
    contaminated: bool = False
    stack: str = ""
    reader: str = ""
    """How the child read its kernel records (cupti, profiler)."""
    read_back_s: float | None = None
    """What reading them back added to the run (the child's own figure)."""
    sibling_busy: float | None = None
    """How busy the host index's core's SMT siblings were while it ran (its ``cpu_context``)."""


def steady_steps(run: dict[str, Any], steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The steady timed steps, as the suite measures them (no profiled or window steps)."""
    timed = [s for s in steps if not s.get("profiled") and not s.get("kernel_window")]
    return timed[int(run.get("warmup_steps") or 1) :]


def _timed_steady(run: dict[str, Any], steps: list[dict[str, Any]]) -> list[float]:
    return [float(s["duration_s"]) for s in steady_steps(run, steps)]


def rows_of(result_path: Path) -> list[Row]:
    """One row per fresh child of a result file, read from the child's own folder where it is kept."""
    data = json.loads(result_path.read_text())
    run_root = result_path.parent.parent
    verdict = data.get("verdict") or {}
    rows = []
    for run in data.get("runs") or []:
        folder = run_root / str(run.get("dir", ""))
        child = _read(folder / "result.json")
        steps = child.get("steps") or []
        kernel = child.get("kernel_time") or {}
        groups = run.get("kernel_groups_ms")
        steady = _timed_steady(run, steps)
        step_s = statistics.median(steady) if steady else None
        # The suite's own split of the run (trainperf.measure.step_parts), as its verdicts read it.
        window = [s for s in steps if s.get("kernel_window")]
        parts, _why = step_parts(steady_steps(run, steps), window, kernel or None)
        rows.append(
            Row(
                case=data["case_id"],
                folder=result_path.parents[3].name,
                gpu=str((data.get("fingerprint") or {}).get("gpu_uuid") or "-")[-8:],
                gpu_class=str(data.get("gpu_class") or "-"),
                planted=str(data.get("planted") or ""),
                clock=bool(kernel) or bool(groups),
                kernel_ms=parts.kernel_median if parts else None,
                host_ms=parts.host_ms if parts else None,
                step_s=step_s,
                wall_s=run.get("wall_s"),
                host_index=(run.get("host_index") or {}).get("index"),
                sm_mhz=run.get("sm_clock_median_mhz"),
                verdict=str(verdict.get("verdict", "?")),
                parts=str(verdict.get("parts", "") or kernel.get("error") or run.get("kernel_time") or ""),
                keys=tuple(parts.keys) if parts else (),
                per_key=tuple(parts.kernel_ms) if parts else (),
                contaminated=bool(run.get("contamination")),
                stack=" ".join(f"{k} {(data.get('fingerprint') or {}).get(k)}" for k in ("torch", "trl")),
                reader=str(kernel.get("clock") or ("profiler" if kernel else "")),
                read_back_s=kernel.get("read_back_s"),
                sibling_busy=((run.get("host_index") or {}).get("cpu_context") or {}).get("siblings_busy"),
            )
        )
    return rows


def _read(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
        return data
    except (OSError, ValueError):
        return {}


def _f(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def spread(values: list[float]) -> tuple[float, float] | None:
    """(max/min - 1, robust CV) of some values; None for fewer than two."""
    if len(values) < 2:
        return None
    centre = statistics.median(values)
    mad = statistics.median(abs(v - centre) for v in values)
    return max(values) / min(values) - 1, 1.4826 * mad / centre


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--json", type=Path, help="write every row and summary here too")
    parser.add_argument(
        "--baselines", type=Path, help="a class's baselines folder: each run's kernel time against it"
    )
    parser.add_argument("--tolerance", type=float, default=0.008, help="kernel time's tolerance (fraction)")
    args = parser.parse_args()
    rows = [
        row for run in args.runs for path in sorted(run.glob("*/results/*.json")) for row in rows_of(path)
    ]
    rows += [row for run in args.runs for path in sorted(run.glob("results/*.json")) for row in rows_of(path)]
    print(
        f"{'case':<44} {'folder':<24} {'class':<5} {'gpu':<8} {'plant':<10} {'clk':<3} {'kernel ms':>10} {'host ms':>9} "
        f"{'step s':>7} {'wall s':>7} {'read s':>6} {'host idx':>8} {'sib':>4} {'SM MHz':>6}  verdict / parts"
    )
    for row in rows:
        print(
            f"{row.case[:44]:<44} {row.folder[:24]:<24} {row.gpu_class[:5]:<5} {row.gpu:<8} {row.planted[:10]:<10} "
            f"{(row.reader or 'on') if row.clock else 'off':<3} {_f(row.kernel_ms, 3):>10} "
            f"{_f(row.host_ms, 1):>9} {_f(row.step_s, 4):>7} {_f(row.wall_s, 1):>7} "
            f"{_f(row.read_back_s, 2):>6} {_f(row.host_index, 3):>8} {_f(row.sibling_busy, 2):>4} "
            f"{_f(row.sm_mhz, 0):>6}  {row.verdict} {row.parts}"
        )
    summaries = summarise(rows)
    print()
    for line in summaries:
        print(line["line"])
    if args.baselines:
        print()
        for line in against_baselines(rows, args.baselines, args.tolerance):
            print(line)
    if args.json:
        args.json.write_text(json.dumps({"rows": [asdict(r) for r in rows], "cases": summaries}, indent=1))


def read_back_by_reader(rows: list[Row]) -> dict[str, tuple[float, float]]:
    """Per kernel-record reader, the median seconds its read-back took and its median share of a run's
    wall time (the clock's cost target is 2%)."""
    found: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for row in rows:
        if row.read_back_s is not None and row.wall_s:
            found[row.reader or "profiler"].append(
                (float(row.read_back_s), float(row.read_back_s) / row.wall_s)
            )
    return {
        reader: (statistics.median(s for s, _ in pairs), statistics.median(f for _, f in pairs))
        for reader, pairs in sorted(found.items())
    }


def summarise(rows: list[Row]) -> list[dict[str, Any]]:
    by_case: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        # Kernel time compares within one GPU class, one window's batches and one stack (an H200's
        # kernels are not an H100's spread); a throttled run is not its spread.
        window = ",".join(row.keys) if row.keys else "no window"
        by_case[f"{row.case} [{row.gpu_class}; {window}; {row.stack}]"].append(row)
    out = []
    for case, group in sorted(by_case.items()):
        clean = [
            r for r in group if r.clock and not r.planted and not r.contaminated and r.kernel_ms is not None
        ]
        kernels = [r.kernel_ms for r in clean if r.kernel_ms is not None]
        line = f"{case}: {len(kernels)} run(s) on {len({r.gpu for r in clean})} GPU(s)"
        found = spread(kernels)
        if found:
            line += (
                f"; kernel ms median {statistics.median(kernels):.3f}, spread {found[0]:.3%}, "
                f"robust CV {found[1]:.3%}"
            )
        off = [r for r in group if not r.clock and not r.planted]
        on = [r for r in group if r.clock and not r.planted]
        cost: dict[str, float] = {}
        for name in ("wall_s", "step_s"):
            a = [getattr(r, name) for r in on if getattr(r, name) is not None]
            b = [getattr(r, name) for r in off if getattr(r, name) is not None]
            if a and b:
                cost[name] = statistics.median(a) / statistics.median(b) - 1
        if cost:
            line += "; clock on vs off: " + ", ".join(f"{k} {v:+.2%}" for k, v in cost.items())
        read_back = read_back_by_reader(on)
        if read_back:
            line += "; read back: " + ", ".join(
                f"{reader} {seconds:.2f} s ({share:.2%} of the run)"
                for reader, (seconds, share) in read_back.items()
            )
        out.append(
            {
                "case": case,
                "kernel_ms": kernels,
                "gpus": sorted({r.gpu for r in clean}),
                "spread": found,
                "cost": cost,
                "read_back": read_back,
                "line": line,
            }
        )
    return out


def against_baselines(rows: list[Row], folder: Path, tolerance: float) -> list[str]:
    """Each unplanted run's kernel time against its case's baseline file, step by step of the window:
    the median ratio, beyond the tolerance or not, and a count per case."""
    lines, beyond, judged = [], 0, 0
    for row in rows:
        base = _read(folder / f"{row.case}.json")
        if base.get("gpu_class") not in (None, row.gpu_class):
            continue  # another class's baseline: its kernels are not this GPU's
        value = (base.get("metrics") or {}).get("kernel_ms") or {}
        groups: dict[str, list[float]] = defaultdict(list)
        for key, sample in zip(value.get("keys") or [], value.get("samples") or []):
            groups[key].append(sample)
        ratios = [v / statistics.median(groups[k]) for k, v in zip(row.keys, row.per_key) if k in groups]
        if not ratios:
            continue
        ratio = statistics.median(ratios)
        out = abs(ratio - 1) > tolerance
        same_stack = row.stack == " ".join(
            f"{k} {(base.get('fingerprint') or {}).get(k)}" for k in ("torch", "trl")
        )
        tag = "contaminated, not judged" if row.contaminated else ("BEYOND" if out else "within")
        tag += "" if same_stack else f" (another stack: {row.stack})"
        if not row.planted and not row.contaminated and same_stack:
            judged += 1
            beyond += out
        lines.append(
            f"{row.case:<44} {row.folder[:18]:<18} {row.gpu:<8} {row.planted or '-':<10} "
            f"kernel {ratio - 1:+.2%} [{min(ratios) - 1:+.2%}, {max(ratios) - 1:+.2%}] {tag}"
        )
    lines.append(
        f"unplanted, uncontaminated runs of the baselines' stack against them: {judged}, "
        f"beyond ±{tolerance:.1%}: {beyond}"
    )
    return lines


if __name__ == "__main__":
    main()
