"""Child-side entry points, one module per workload family.

Runs only inside the fresh child process the launcher starts (``python -m
trainperf.workloads SPEC``). A family module exposes ``run(spec, recorder) -> dict`` that
returns the family's effective configuration; the common harness in ``child.py`` owns
outcome classification and the result file.
"""

FAMILIES = {
    "sft_hf": "trainperf.workloads.sft_hf",
    "sft_unsloth": "trainperf.workloads.sft_unsloth",
    "rl_verl": "trainperf.workloads.rl_verl",
    "rl_trl": "trainperf.workloads.rl_trl",
}
