"""What moved inside a step's kernel time, from the kernel summaries both sides recorded anyway
(``result.KernelSummary``: each group's time per step and the top kernels of a run's window).

An A/B row, a bisection's step or a comparison whose kernel time moved says which groups and which
kernels moved, e.g. ``dtype conversion +202.3 ms, GEMM +3.1 ms; kernels: elementwise_kernel<cast>
+123.7 ms, ...``, without a profiled run of its own: every run's kernel window records them.
"""

from __future__ import annotations

from trainperf.result import KernelShare, KernelSummary

MIN_CHANGE_MS = 0.05
"""A group or a kernel that moved less than this per step is not named."""
GROUPS_SHOWN = 3
KERNELS_SHOWN = 3
NAME_CHARS = 60


def deltas(current: dict[str, float], reference: dict[str, float]) -> dict[str, float]:
    """Each name's change in ms per step, the largest move first; what moved too little is left out."""
    names = set(current) | set(reference)
    changes = {name: current.get(name, 0.0) - reference.get(name, 0.0) for name in names}
    moved = {name: change for name, change in changes.items() if abs(change) >= MIN_CHANGE_MS}
    return dict(sorted(moved.items(), key=lambda kv: (-abs(kv[1]), kv[0])))


def group_deltas(current: KernelSummary, reference: KernelSummary) -> dict[str, float]:
    """Each group's change in ms per step, the largest move first."""
    return deltas(current.groups_ms, reference.groups_ms)


def kernel_deltas(current: KernelSummary, reference: KernelSummary) -> list[tuple[KernelShare, float, bool]]:
    """The top kernels whose time per step moved most: (the kernel, its change, whether it is new in
    the current side's top list). A side's top list is cut at its smallest entry, so a kernel on one
    side's list only is bounded by the other list's smallest entry: one new on the list grew by at
    least its time above the reference's smallest entry, one that left it shrank by at least its
    time above the current's smallest entry; the least it moved is what is said, and nothing where
    even the direction is unknown."""
    before = {k.name: k for k in reference.top}
    after = {k.name: k for k in current.top}
    floor_before = min((k.ms for k in reference.top), default=0.0)
    floor_after = min((k.ms for k in current.top), default=0.0)
    moved: list[tuple[KernelShare, float, bool]] = []
    for name in set(before) | set(after):
        if name in after and name in before:
            moved.append((after[name], after[name].ms - before[name].ms, False))
        elif name in after and after[name].ms > floor_before:
            moved.append((after[name], after[name].ms - floor_before, True))
        elif name in before and before[name].ms > floor_after:
            moved.append((before[name], floor_after - before[name].ms, False))
    moved = [entry for entry in moved if abs(entry[1]) >= MIN_CHANGE_MS]
    return sorted(moved, key=lambda entry: (-abs(entry[1]), entry[0].name))


def kernel_changes(current: KernelSummary | None, reference: KernelSummary | None) -> str:
    """``dtype conversion +202.3 ms, GEMM +3.1 ms; kernels: <name> (<group>) +123.7 ms, new in the top
    20``, led by the processes' parts where both sides have them (verl: ``in training +110.2 ms,
    rollout +2.8 ms; ...``); '' where either side recorded no kernels or nothing moved enough to name."""
    if current is None or reference is None or not (current.groups_ms and reference.groups_ms):
        return ""
    both = current.roles_ms and reference.roles_ms
    roles = list(deltas(current.roles_ms, reference.roles_ms).items()) if both else []
    parts = ["in " + ", ".join(f"{role} {delta:+.1f} ms" for role, delta in roles)] if roles else []
    groups = list(group_deltas(current, reference).items())[:GROUPS_SHOWN]
    parts += [", ".join(f"{group} {delta:+.1f} ms" for group, delta in groups)] if groups else []
    kernels = kernel_deltas(current, reference)[:KERNELS_SHOWN]
    if kernels:
        top = len(reference.top)
        named = [
            f"{_short(kernel.name)} ({kernel.group}) {delta:+.1f} ms"
            + (f", new in the top {top}" if new else "")
            for kernel, delta, new in kernels
        ]
        parts.append("kernels: " + ", ".join(named))
    return "; ".join(parts)


def _short(name: str) -> str:
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 3] + "..."
