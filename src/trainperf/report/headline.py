"""The first line of a run's summary and page: how many cases were judged and how, and how many
were not (cut short, never run, skipped), so that a night cut by a time limit never looks calm.

Pure: results and the cases without one in, one line out.
"""

from __future__ import annotations

from collections.abc import Sequence

from trainperf.case import Outcome
from trainperf.result import INTERRUPTED, NOT_RUN, SKIPPED_AT_START, CaseResult, Unjudged, skip_cause


def headline(results: Sequence[CaseResult], unjudged: Sequence[Unjudged] = ()) -> str:
    """``17 cases: 2 judged (1 noisy, 1 pass), 1 interrupted, 12 not run (12 in interrupted shards),
    2 skipped``; failing verdicts first, then the rest by name; why cases were not run, where said."""
    skipped = [r for r in results if r.outcome == Outcome.SKIPPED.value]
    judged = [r for r in results if r not in skipped]
    verdicts: dict[str, int] = {}
    failing: set[str] = set()
    for result in judged:
        verdict = result.verdict.verdict or result.outcome
        verdicts[verdict] = verdicts.get(verdict, 0) + 1
        if result.verdict.fails:
            failing.add(verdict)
    order = sorted(verdicts, key=lambda v: (v not in failing, v))
    tally = ", ".join(f"{verdicts[v]} {v}" for v in order)
    parts = [f"{len(judged)} judged" + (f" ({tally})" if tally else "")]
    if interrupted := sum(1 for case in unjudged if case.state == INTERRUPTED):
        parts.append(f"{interrupted} {INTERRUPTED}")
    if never := [case for case in unjudged if case.state == NOT_RUN]:
        parts.append(f"{len(never)} {NOT_RUN}{_causes(never)}")
    causes = [skip_cause(r.message) for r in skipped]
    causes += [case.cause for case in unjudged if case.state == SKIPPED_AT_START]
    if causes:
        parts.append(f"{len(causes)} skipped{_counted(causes)}")
    total = len(results) + len(unjudged)
    return f"{total} case(s): {', '.join(parts)}"


def _causes(cases: Sequence[Unjudged]) -> str:
    """`` (3 in an interrupted shard, 9 in shards that recorded no end)``: the causes the cases say,
    the commonest first; nothing where none says one."""
    return _counted([case.cause for case in cases])


def _counted(causes: Sequence[str]) -> str:
    counts: dict[str, int] = {}
    for cause in causes:
        if cause:
            counts[cause] = counts.get(cause, 0) + 1
    if not counts:
        return ""
    ordered = sorted(counts.items(), key=lambda kv: -kv[1])
    return " (" + ", ".join(f"{n} {cause}" for cause, n in ordered) + ")"
