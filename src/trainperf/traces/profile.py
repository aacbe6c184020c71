"""A baseline's profile summary: where one step's time and memory go, small enough to store in the
baseline file (the raw trace is not kept there).

Built from a trace's analysis (``traces.analysis``) and the child's allocator summary. The time the
accelerator is busy per step is given in nine groups, the existing kernel/operator categories
mapped as below; on the CPU class that busy time is the main thread's operator self time and
"host-side" time is the time outside any operator (the CPU has no separate device to wait on).
"""

from __future__ import annotations

from typing import Any

GROUPS = (
    "GEMM",
    "attention",
    "elementwise/normalisation",
    "optimizer",
    "quantisation",
    "communication",
    "memcpy/memset",
    "dtype conversion",
    "other",
)
GROUP_OF = {
    "matmul": "GEMM",
    "attention": "attention",
    "elementwise": "elementwise/normalisation",
    "reduction/norm": "elementwise/normalisation",
    "optimizer": "optimizer",
    "quantization": "quantisation",
    "communication": "communication",
    "memory": "memcpy/memset",
    "conversion": "dtype conversion",
    "other": "other",
}
TOP_KERNELS = 20
MIB = 2**20


def _per_step(value: Any, steps: int) -> float:
    return float(value or 0.0) / steps


def profile_summary(
    trace_summary: dict[str, Any], memory: dict[str, Any] | None, *, scope: str | None = None
) -> dict[str, Any]:
    """The stored summary of one profiled run: per-step GPU time by group, host-side time, the top
    kernels (operators on the CPU) and the allocator's largest blocks (or why there are none).
    ``scope``: what the profiled window covers when it is not a whole step (a verl stage)."""
    steps = max(1, int(trace_summary.get("steps") or 1))
    groups = dict.fromkeys(GROUPS, 0.0)
    for category, ms in (trace_summary.get("categories_ms") or {}).items():
        groups[GROUP_OF.get(category, "other")] += _per_step(ms, steps)
    on_gpu = trace_summary.get("kind") == "gpu"
    host_key = "idle_host_bound_ms" if on_gpu else "idle_ms"
    # On the CPU the autograd engine's own time between operators is host-side, not operator work.
    engine_ms = 0.0 if on_gpu else float(trace_summary.get("autograd_engine_ms") or 0.0)
    return {
        "kind": trace_summary.get("kind"),
        "steps": steps,
        "step_ms": _per_step(trace_summary.get("window_ms"), steps),
        "busy_ms": _per_step(float(trace_summary.get("busy_ms") or 0.0) - engine_ms, steps),
        "host_side_ms": _per_step(float(trace_summary.get(host_key) or 0.0) + engine_ms, steps),
        "idle_other_ms": _per_step(trace_summary.get("idle_other_ms"), steps) if on_gpu else 0.0,
        "device_ms": groups,
        "top_kernels": [
            {
                "name": kernel["name"],
                "group": GROUP_OF.get(kernel.get("category", "other"), "other"),
                "ms": _per_step(kernel.get("total_ms"), steps),
                "count": kernel.get("count", 0),
            }
            for kernel in (trace_summary.get("top") or [])[:TOP_KERNELS]
        ],
        "memory": memory or {"n/a": "no allocator summary (CPU run, or the child recorded none)"},
        **({"scope": scope} if scope else {}),
    }
