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

# Families that spread one process over all of a case's GPUs themselves (verl starts its Ray
# workers, one per GPU, and its rollout engine's TP groups): a multi-GPU case of theirs is one
# child that sees every GPU of the case, never a torchrun rank per GPU (each rank would start a
# whole verl trainer of its own).
SELF_DISTRIBUTING = frozenset({"rl_verl"})
