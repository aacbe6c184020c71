"""A planted regression (``--perf-plant``) inside verl's own processes, where its steps run.

verl imports every module named in ``VERL_USE_EXTERNAL_MODULES`` from its package ``__init__``, in
the driver and in each Ray worker; importing this one installs ``workloads.plants.Plant`` for the
kind in ``TRAINPERF_VERL_PLANT``. Only the kinds that act at each attention call are planted this
way (``attention``: extra SDPA passes, ``composite``: the fused op replaced by matmul, softmax,
matmul), in the actor, reference and critic models alike (all Hugging Face models on SDPA where
flash-attn is missing); ``host`` and ``memory`` act at step edges, which verl's workers never see,
and the child refuses them (``rl_verl.refuse_unsupported``). No CUDA call is made here: Ray sets a
worker's visible devices after its process has started.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from trainperf.workloads.plants import Plant

VARIABLE = "TRAINPERF_VERL_PLANT"
MODULE_NAME = __name__
KINDS = ("attention", "composite")
SOURCE_ROOT = Path(__file__).resolve().parents[3]
"""The folder holding the ``trainperf`` package, put on the path of verl's processes."""


def install() -> Plant | None:
    """The plant this process's environment asks for, installed; None when it asks for none."""
    spec = os.environ.get(VARIABLE)
    if not spec:
        return None
    # In verl's log (Ray hands on its workers' output, prefixed with the worker): where it acted.
    print(f"[trainperf] planted {spec} in process {os.getpid()}", flush=True)
    return Plant(spec, torch.device("cuda"))


PLANTED = install()
