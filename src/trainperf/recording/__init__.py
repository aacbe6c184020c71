"""A run's side of the results history: the store a session judges against and records each
finished case into as it ends (``session_history.SessionHistory``), and a finished run folder loaded
into the store afterwards (``ingest``: ``trainperf ingest``, ``trainperf merge``). The store's
schema, reads and writes are ``store/``'s; this package decides what of a run goes there."""
