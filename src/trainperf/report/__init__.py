"""Human-readable reports of a run: terminal table and markdown summary."""
