"""Decided before a launch: the memory estimate, the OOM-cliff bisection."""
