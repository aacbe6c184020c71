"""Child-side entry points, one module per workload family.

Runs only inside the fresh child process the launcher starts (``python -m
trainperf.workloads SPEC``). A family module exposes ``run(spec, recorder) -> dict`` that
returns the family's effective configuration; the common harness in ``child.py`` owns
outcome classification and the result file. Which module runs a family is the family's own
``Family.child`` (``trainperf.families.FAMILIES``): the one registry of families.
"""
