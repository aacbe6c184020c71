"""Judging a result: metrics, statistics, verdicts, the environment fingerprint (no I/O)."""
