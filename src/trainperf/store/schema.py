"""The results history's SQL schema: its runs, their case results and each result's metrics.

``SCHEMA_VERSION`` counts its changes; ``store/db.py`` creates it on first use and migrates an
older store up to it.
"""

from __future__ import annotations

import sqlalchemy as sa

SCHEMA_VERSION = 2

metadata = sa.MetaData()

schema_info = sa.Table(
    "trainperf_schema",
    metadata,
    sa.Column("name", sa.String(32), primary_key=True),
    sa.Column("value", sa.String(64), nullable=False),
)

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_key", sa.String(64), nullable=False, unique=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("started", sa.String(32), nullable=False),
    sa.Column("ended", sa.String(32)),
    sa.Column("gpu_class", sa.String(32)),
    sa.Column("runner", sa.String(200), nullable=False),
    sa.Column("runner_env", sa.String(16), nullable=False),
    sa.Column("host", sa.String(200)),
    sa.Column("gpu_name", sa.String(200)),
    sa.Column("gpu_uuid", sa.String(200)),
    sa.Column("driver", sa.String(64)),
    sa.Column("cuda_driver", sa.String(64)),
    sa.Column("cpu_model", sa.String(200)),
    sa.Column("power_limit_w", sa.Float),
    sa.Column("commit_id", sa.String(64)),
    sa.Column("fingerprint", sa.JSON),
    sa.Column("run_dir", sa.Text),
    sa.Column("argv", sa.JSON),
)
sa.Index("runs_started", runs.c.started)

cases = sa.Table(
    "cases",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    sa.Column("result_key", sa.String(64), nullable=False, unique=True),
    sa.Column("case_id", sa.String(300), nullable=False),
    sa.Column("variant", sa.String(32), nullable=False, default=""),
    sa.Column("seq", sa.Integer, nullable=False, default=0),
    sa.Column("created", sa.String(32), nullable=False),
    sa.Column("outcome", sa.String(16), nullable=False),
    sa.Column("verdict", sa.String(32)),
    sa.Column("judged_against", sa.Text),
    sa.Column("accepted", sa.Boolean, nullable=False),
    sa.Column("planted", sa.Float, nullable=False, default=0.0),
    sa.Column("emulated", sa.String(32)),
    sa.Column("config_hash", sa.String(16)),
    sa.Column("effective_config", sa.JSON),
    sa.Column("fingerprint", sa.JSON),
    sa.Column("step_times", sa.JSON),
    sa.Column("steps", sa.Integer),
    # The steps the case's runs were told to run: a planned run (--perf-plan-steps) measures fewer,
    # and its tokens/s and energy per token cover its first steps, so a series breaks where it changes.
    sa.Column("result_path", sa.Text),
    sa.Column("message", sa.Text),
)
sa.Index("cases_case_created", cases.c.case_id, cases.c.created)
sa.Index("cases_run", cases.c.run_id)

metrics = sa.Table(
    "metrics",
    metadata,
    sa.Column("case_row", sa.Integer, sa.ForeignKey("cases.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.Float, nullable=False),
    sa.Column("unit", sa.String(16)),
    sa.Column("count", sa.Integer),
    sa.Column("median", sa.Float),
    sa.Column("mean", sa.Float),
    sa.Column("minimum", sa.Float),
    sa.Column("p10", sa.Float),
    sa.Column("p90", sa.Float),
    sa.Column("robust_cv", sa.Float),
    sa.Column("ci_low", sa.Float),
    sa.Column("ci_high", sa.Float),
    sa.Column("detail", sa.JSON(none_as_null=True)),
    # {"samples": [...], "keys": [...], "per_run": [...]}, only where a metric has samples or several
    # runs: most figures are one number, and a year of nightly history is ~300,000 metric rows.
)
