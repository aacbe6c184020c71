"""Judging a result: metrics, statistics, verdicts, the environment fingerprint; no I/O but the
tolerance overrides read from pyproject.toml (``metrics.tolerances_from_pyproject``)."""
