"""What a fresh runner's first night writes before its cases can start (pure: results and what this
runner's cache holds in, figures and lines out; ``trainperf cost`` reads the folders and the disk).

Some cases train on synthetic inputs that the suite writes once into the cache under
``TRAINPERF_CACHE_DIR`` and every later run reuses: unsloth's 4-bit checkpoints (gpt-oss-120b's is
58 GiB, written in 99 s on an H200 host), verl's model folders. A runner with a warm cache never pays
for them again, so a baseline's wall time leaves them out; a fresh runner (a new machine, a cloud
instance, a wiped disk) pays for each once, inside the first case that needs it, and needs the room
for all of them. Each run records the entries it used with the size and writing time their writer
measured (``workloads.protocol.CachedInput``), also when it found them cached.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from trainperf.result import CaseResult
from trainperf.workloads.protocol import CACHED_INPUTS, CachedInput


@dataclass(frozen=True, slots=True)
class InputNeed:
    """One cached input and the cases that use it."""

    kind: str
    key: str
    bytes: int | None
    build_s: float | None
    case_ids: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.kind}/{self.key}"


@dataclass(frozen=True, slots=True)
class FreshRunnerCost:
    needs: list[InputNeed]
    """Every cached input the cases use, the largest first."""
    missing: list[InputNeed]
    """Those not in this runner's cache: what its next night writes first."""
    free_b: int | None
    """Free space where this runner's cache lives (None: not known)."""


def inputs_needed(results: Iterable[CaseResult]) -> list[InputNeed]:
    """The cached inputs the results' runs recorded, each once, with the largest size and writing time
    any run recorded for it (an entry's files do not change under its key), the largest first."""
    found: dict[tuple[str, str], list[CachedInput]] = {}
    users: dict[tuple[str, str], list[str]] = {}
    for result in results:
        for run in result.runs:
            # A stored list with an entry this trainperf cannot read is kept aside whole
            # (``RunRecord.unread``): its readable entries still count.
            kept_aside = run.unread.get(CACHED_INPUTS)
            for record in run.cached_inputs or CachedInput.read_all(kept_aside):
                ident = (record.kind, record.key)
                found.setdefault(ident, []).append(record)
                if result.case_id not in users.setdefault(ident, []):
                    users[ident].append(result.case_id)
    needs = []
    for (kind, key), records in found.items():
        size = _largest(r.bytes for r in records)
        needs.append(
            InputNeed(
                kind, key, None if size is None else int(size), _largest(r.build_s for r in records),
                tuple(users[(kind, key)]),
            )
        )  # fmt: skip
    return sorted(needs, key=lambda need: (-(need.bytes or 0), need.name))


def _largest(values: Iterable[int | float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return max(known) if known else None


def fresh_runner_cost(
    needs: list[InputNeed], present: Collection[str], free_b: int | None
) -> FreshRunnerCost:
    """``present``: the names (``kind/key``) this runner's cache holds complete."""
    return FreshRunnerCost(needs, [need for need in needs if need.name not in present], free_b)


def _sized(needs: list[InputNeed]) -> str:
    size = sum(need.bytes or 0 for need in needs)
    seconds = sum(need.build_s or 0.0 for need in needs)
    unknown = sum(1 for need in needs if need.build_s is None or need.bytes is None)
    text = f"{len(needs)} cached input(s), {size / 1e9:.1f} GB, written in {seconds / 60:.1f} GPU-min"
    return text + (f" ({unknown} without a recorded size or time)" if unknown else "")


def fresh_runner_lines(cost: FreshRunnerCost, cache_dir: str) -> list[str]:
    """The report: what a fresh runner writes first, what this runner still lacks, and whether it fits."""
    if not cost.needs:
        return []
    lines = [f"fresh runner: its first night writes {_sized(cost.needs)} before the cases that use them"]
    lines += [
        f"  {need.name}: {_size(need.bytes)}, {_seconds(need.build_s)}, for {', '.join(need.case_ids)}"
        for need in cost.needs
    ]
    if not cost.missing:
        lines.append(f"  this runner's cache ({cache_dir}) holds all of them")
        return lines
    lines.append(f"  this runner's cache ({cache_dir}) lacks {_sized(cost.missing)}")
    wanted = sum(need.bytes or 0 for need in cost.missing)
    if cost.free_b is not None and wanted > cost.free_b:
        lines.append(
            f"  they do not fit: {cost.free_b / 1e9:.1f} GB free there; point TRAINPERF_CACHE_DIR at a disk "
            f"(or a memory-backed folder) with {wanted / 1e9:.0f} GB free"
        )
    return lines


def _size(size: int | None) -> str:
    return "size not recorded" if size is None else f"{size / 1e9:.1f} GB"


def _seconds(seconds: float | None) -> str:
    return "time not recorded" if seconds is None else f"{seconds:.0f} s"


def first_writers(missing: list[InputNeed], order: list[str]) -> dict[str, float]:
    """GPU-seconds each case of ``order`` (the night's cases, in the order they run) spends writing
    the missing inputs it is the first to use: a night's projection counts each write once, where it
    happens. Inputs without a recorded time add nothing."""
    extra: dict[str, float] = {}
    for need in missing:
        first = next((case_id for case_id in order if case_id in need.case_ids), None)
        if first is not None and need.build_s is not None:
            extra[first] = extra.get(first, 0.0) + need.build_s
    return extra


def night_line(missing: list[InputNeed], cache_dir: str) -> str | None:
    """The night's line when its cases need inputs this runner's cache lacks."""
    if not missing:
        return None
    return (
        f"trainperf: fresh runner: tonight's cases first write {_sized(missing)} into {cache_dir} "
        "(counted in the night's projection)"
    )
