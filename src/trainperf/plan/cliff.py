"""OOM cliffs: the largest value of one axis (batch size, sequence length...) that still fits.

The low end is probed first, then the range is bisected (the micro-batch axis over low,
2 low, 4 low...): at most ceil(log2(high - low + 1)) + 1 launches, each a fresh child (a
process that hit OOM is never reused). On the micro-batch axis the low end is the *slowest*
probe (E1: 151 tokens/s per GPU at micro-batch 1 against 349 at 8, for the same work), so
there the search bisects from the middle and reaches the low end only if nothing above it
fits; values the framework rejects before launch (``rejected``, e.g. verl's micro-batch that
does not divide the per-GPU mini-batch) are first cut from the top of the range, at no cost,
so that the first probe lands in the middle of what can run.

Galloping from the low end (low, 2 low, 4 low, ...) then bisecting the last bracket was tried
first and took up to 18 launches on 1..512 against 10 for bisection; on a bounded range the
memory estimate does galloping's job instead: probes it puts clearly over the device are not
launched (they count as OOM and the report says they were skipped). Optionally the result is
confirmed by fresh runs just below (must fit) and just above (must run out of memory) the cliff.

Pure: the probe is a callable, so the search is tested with a fake and run with real children.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from trainperf.case import Outcome
from trainperf.cliff_record import NOT_LAUNCHED, CliffEdges, CliffRecord, Probe
from trainperf.errors import TrainperfError

AXES = ("batch_size", "max_seq_len", "grad_accum", "micro_batch_size")


@dataclass(slots=True)
class Cliff(CliffEdges):
    """A search under way: its edges so far (``CliffEdges``), what it says of them, its record."""

    @property
    def launched(self) -> int:
        return sum(1 for p in self.probes if p.outcome not in NOT_LAUNCHED)

    def describe(self) -> str:
        if self.largest_fit is None:
            return f"{self.axis}: nothing fits, {self.low} already runs out of memory"
        if self.smallest_oom is None:
            return f"{self.axis}: everything fits up to {self.high} (cliff above the range)"
        above = next((p.outcome for p in self.probes if p.value == self.smallest_oom), Outcome.OOM.value)
        cause = "a configuration error" if above == Outcome.CONFIG_ERROR else "OOM"
        return f"{self.axis}: largest fit {self.largest_fit}, {cause} from {self.smallest_oom}"

    def record(self, confirmation: list[Probe], confirmed: bool) -> CliffRecord:
        """The search as a result stores it, with its confirmation runs."""
        return CliffRecord(
            self.axis,
            self.low,
            self.high,
            self.largest_fit,
            self.smallest_oom,
            list(self.probes),
            self.launched,
            self.describe(),
            list(confirmation),
            confirmed,
        )


class ProbeFailed(Exception):
    """A probe ended neither in a fit nor in an OOM (crash, timeout): the cliff is unknown."""


def validate_range(axis: str, low: int, high: int) -> None:
    if axis not in AXES:
        raise TrainperfError(f"cliff axis '{axis}' is not one of {', '.join(AXES)}")
    if low < 1 or high < low:
        raise TrainperfError(f"cliff range {low}..{high} on {axis} is empty: give 1 <= low <= high")


ENDS_A_SEARCH = (Outcome.OOM.value, "skipped-by-estimate")
"""Probe outcomes that bound a cliff search from above (a value that does not fit), not fail it."""


def find_cliff(
    axis: str,
    low: int,
    high: int,
    probe: Callable[[int], Probe],
    *,
    predicted_oom: Callable[[int], str | None] = lambda value: None,
    rejected: Callable[[int], str | None] = lambda value: None,
    known: Mapping[int, Probe] | None = None,
) -> Cliff:
    """Search [low, high]. ``predicted_oom(v)``/``rejected(v)``: why the estimate rules ``v`` out/why
    the framework refuses it unlaunched (a config error); ``known``: probes made, not launched again."""
    validate_range(axis, low, high)
    cliff = Cliff(axis, low, high)
    seen: dict[int, bool] = {}

    def fits(value: int) -> bool:
        if value in seen:
            return seen[value]
        reason = None if value in (known or {}) else predicted_oom(value)
        result = (known or {}).get(value) or (
            Probe(value, False, "skipped-by-estimate", reason) if reason else probe(value)
        )
        cliff.probes.append(result)
        # A configuration the framework itself rejects (verl's micro-batch that does not divide the
        # normalised mini-batch, predicted before launch) bounds the search like an OOM does, as in
        # E1's sweep; at the low end it means the case itself is wrong.
        bounds = ENDS_A_SEARCH + ((Outcome.CONFIG_ERROR.value,) if value > low else ())
        if not result.fits and result.outcome not in bounds:
            raise ProbeFailed(f"{axis}={value}: {result.outcome} {result.note}".strip())
        seen[value] = result.fits
        return result.fits

    values = axis_values(axis, low, high)
    rejected_from: int | None = None
    while values and (reason := rejected(values[-1])):
        rejected_from = values.pop()
        cliff.probes.append(Probe(rejected_from, False, Outcome.CONFIG_ERROR.value, reason))
    if not values:
        raise ProbeFailed(f"{axis}={low}: config_error {cliff.probes[-1].note}".strip())
    if axis == "micro_batch_size":
        good = -1  # a sentinel below the range: the low end is probed last, if at all
    elif fits(values[0]):
        good = 0
    else:
        cliff.smallest_oom = low
        return cliff
    bad = len(values)  # a sentinel above the range, never launched
    while bad - good > 1:
        middle = (good + bad) // 2
        if fits(values[middle]):
            good = middle
        else:
            bad = middle
    if good < 0:
        cliff.smallest_oom = low
        return cliff
    cliff.largest_fit = values[good]
    cliff.smallest_oom = values[bad] if bad < len(values) else rejected_from
    return cliff


def axis_values(axis: str, low: int, high: int) -> list[int]:
    """The values a search may probe: every integer, except on the micro-batch axis, where only
    low, 2 low, 4 low... are meaningful (verl needs a micro-batch that divides the per-GPU
    mini-batch: 17 would be rejected, not measured, and would hide the OOM at 32)."""
    if axis != "micro_batch_size":
        return list(range(low, high + 1))
    values = [low]
    while values[-1] * 2 <= high:
        values.append(values[-1] * 2)
    return values


def confirm_cliff(cliff: Cliff, probe: Callable[[int], Probe]) -> list[Probe]:
    """Fresh runs at the cliff's edges; the cliff holds when the fit fits and the OOM runs out."""
    checks = []
    if cliff.largest_fit is not None:
        checks.append(probe(cliff.largest_fit))
    if cliff.smallest_oom is not None:
        checks.append(probe(cliff.smallest_oom))
    return checks


def confirmed(cliff: Cliff, checks: list[Probe]) -> bool:
    expected = {cliff.largest_fit: True, cliff.smallest_oom: False}
    return all(expected.get(check.value) == check.fits for check in checks)


def verify_cliff(
    stored: CliffRecord,
    probe: Callable[[int], Probe],
    *,
    predicted_oom: Callable[[int], str | None] = lambda value: None,
    rejected: Callable[[int], str | None] = lambda value: None,
) -> tuple[Cliff | None, list[Probe]]:
    """A stored cliff checked at its edges, two launches at most: its largest fit must still fit and
    the next value must still run out of memory (or still be refused, or still be ruled out by the
    estimate). The cliff when both hold; None and the probes made when one does not (then the
    full search runs, reusing them)."""
    cliff = Cliff(stored.axis, stored.low, stored.high, stored.largest_fit, stored.smallest_oom)
    for value, should_fit in ((cliff.largest_fit, True), (cliff.smallest_oom, False)):
        if value is None:
            continue
        if reason := rejected(value):
            result = Probe(value, False, Outcome.CONFIG_ERROR.value, reason)
        elif reason := predicted_oom(value):
            result = Probe(value, False, "skipped-by-estimate", reason)
        else:
            result = probe(value)
        cliff.probes.append(result)
        bounds = (Outcome.OOM.value, *NOT_LAUNCHED)
        if result.fits != should_fit or (not result.fits and result.outcome not in bounds):
            return None, cliff.probes
    return cliff, cliff.probes
