"""Where results live: baselines, run results, the results history (SQLite or PostgreSQL)."""
