"""The order a session hands its cases to pytest-xdist's workers in, so that a host's GPUs end their
night together (pure: expected seconds in, an order and its projected wall time out).

xdist's load scheduler (``--dist load``, what ``-n`` uses) deals the collection in its order: where
there are at least two items per worker it gives each worker a first chunk of consecutive items (two,
or a quarter of its share of a large collection), else one item to each worker in turn; then one item
at a time to whichever worker runs low. Collection order is the catalogue's, so on the first 4-GPU
night (2026-11-28) the longest case (a 32B unsloth QLoRA case, 6 minutes) came last, started after
three minutes and ran alone to the end: the night took 9.8 minutes where its cases fitted 6.

So the cases are dealt longest first, in snake rounds (the worker that got the shortest case of one
round gets the longest of the next), laid out where xdist's first distribution puts each worker's
items; the rest follow longest first, for whichever worker frees first. Ties are broken by key, so
every worker (each collects on its own) reaches the same order, as xdist requires.

A case that needs 2 GPUs takes the first two free at one moment, its worker's and the next one
first (``measure.placement``): the projection counts its time on its worker's GPU and the next one in
the first chunks, and on the two that free first later, an upper bound where another pair frees first.
Where it starts is xdist's to choose (it hands the first chunks to its workers in the order they came
up, not by GPU).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def first_chunk(items: int, workers: int) -> int:
    """How many consecutive items xdist's first distribution gives each worker (1: one in turn)."""
    if items < 2 * workers:
        return 1
    return max(2, (items // workers) // 4)


def worker_order(expected: Mapping[str, float], workers: int) -> list[str]:
    """The keys in the order that gives ``workers`` a balanced night."""
    ranked = sorted(expected, key=lambda key: (-expected[key], key))
    if workers <= 1 or len(ranked) <= workers:
        return ranked
    chunk = first_chunk(len(ranked), workers)
    if chunk == 1:
        # One item to each worker in turn, and a second to the first few: those hold the shortest of
        # the longest cases, and the longest second case goes to the one with the shortest first.
        return ranked[:workers][::-1] + ranked[workers:]
    fill = workers * (chunk - 1)
    firsts, middle, fillers = ranked[:workers], ranked[workers:-fill], ranked[-fill:]
    hands = [[key] for key in firsts]
    # Each worker's first chunk is its long case and some of the shortest (the shortest of all beside
    # the longest), so that no worker waits out a second long case the others could have taken.
    for position, key in enumerate(reversed(fillers)):
        round_number, seat = divmod(position, workers)
        hands[seat if round_number % 2 == 0 else workers - 1 - seat].append(key)
    return [key for hand in hands for key in hand] + middle


def projected_wall_s(
    order: Sequence[str], expected: Mapping[str, float], workers: int, gpus: Mapping[str, int] | None = None
) -> float:
    """The session's wall time if xdist deals ``order`` as described above: each worker's first
    chunk, then each further case to the first worker to free. A 2-GPU case holds its worker's GPU and
    the next one's for its time (later in the night: the two that free first)."""
    if not order:
        return 0.0
    workers = max(1, workers)
    width = {key: (gpus or {}).get(key, 1) for key in order}
    chunk = first_chunk(len(order), workers)
    dealt = len(order) if chunk == 1 else workers * chunk
    loads = [0.0] * workers
    for position, key in enumerate(order[:dealt]):
        worker = position % workers if chunk == 1 else position // chunk
        loads[worker] += expected[key]
        if width[key] > 1 and workers > 1:
            loads[(worker + 1) % workers] += expected[key]
    for key in order[dealt:]:
        loads.sort()
        if width[key] > 1 and workers > 1:
            start = max(loads[0], loads[1])
            loads[0] = loads[1] = start + expected[key]
        else:
            loads[0] += expected[key]
    return max(loads)


__all__ = ["first_chunk", "projected_wall_s", "worker_order"]
