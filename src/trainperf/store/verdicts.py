"""The verdicts of a class's case results in the results history: what a nightly's promotion reads
(``plan.tiers.promoted``: a case whose last result did not pass runs the next nights)."""

from __future__ import annotations

import sqlalchemy as sa

from trainperf.store.db import Store, cases, runs


def class_verdicts(store: Store, gpu_class: str, *, before: str) -> list[tuple[str, str, str]]:
    """Each case result of the class's runs (every runner) that started before ``before``, oldest
    first: its case id, when it was made and its verdict ("" when it has none). Slowdowns planted to
    check the gate and emulated runs are left out."""
    query = (
        sa.select(cases.c.case_id, cases.c.created, cases.c.verdict)
        .join(runs, runs.c.id == cases.c.run_id)
        .where(
            runs.c.gpu_class == gpu_class,
            runs.c.started < before,
            runs.c.kind.in_(["pytest", "cliff"]),
            cases.c.variant == "",
            cases.c.planted == 0,
            cases.c.emulated.is_(None),
        )
        .order_by(cases.c.created, cases.c.id)
    )
    with store.reading() as conn:
        return [
            (str(case_id), str(created), str(verdict or ""))
            for case_id, created, verdict in conn.execute(query)
        ]
