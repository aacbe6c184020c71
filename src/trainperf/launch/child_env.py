"""A child's command line and environment variables (no process is started here)."""

from __future__ import annotations

import os
from pathlib import Path

from trainperf.families import family_of
from trainperf.launch.bytecode import with_bytecode_cache
from trainperf.measure.ownership import OWNER_ENV, owner_tag
from trainperf.measure.placement import cpu_share
from trainperf.synth.cache import cache_root

LAUNCHER_MODULE = "torch.distributed.run"


def child_command(python: str, gpus: int, spec_path: Path, family: str) -> list[str]:
    """The child's command line: the workload itself, or the launcher with one rank per GPU."""
    workload = ["-m", "trainperf.workloads", str(spec_path)]
    if not family_of(family).launches_ranks(gpus):
        return [python, *workload]
    # --standalone: a private rendezvous on a free local port, so two workers' launchers never meet.
    return [
        python,
        "-m",
        LAUNCHER_MODULE,
        "--standalone",
        "--nnodes=1",
        f"--nproc-per-node={gpus}",
        *workload,
    ]


STORE_SECRETS = ("TRAINPERF_STORE", "PGPASSWORD", "PGPASSFILE", "PGSERVICEFILE")
"""The results store's URL and PostgreSQL's password variables: the parent's to use, never the training
child's (it records nothing in the store, and a workload's logs may print its environment)."""


def child_env(device: str | None, *, isolated: bool = False) -> dict[str, str]:
    """The child's environment variables, less the store's URL and password (``isolated``: a workload
    environment of its own, no PYTHONPATH of the suite's); bytecode cached where the runner writes none."""
    env = {k: v for k, v in os.environ.items() if k not in STORE_SECRETS}
    if isolated:
        env.pop("PYTHONPATH", None)
    env.update(
        PYTHONUNBUFFERED="1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_DATASETS_DISABLE_PROGRESS_BARS="1",
        TOKENIZERS_PARALLELISM="false",
        CUDA_VISIBLE_DEVICES=device if device is not None else "",
        # NVML numbers GPUs in PCI bus order, CUDA by default fastest first: without this, the
        # child's GPU "1" need not be the GPU the parent samples as 1.
        CUDA_DEVICE_ORDER="PCI_BUS_ID",
    )
    # Everything the child starts inherits it: the suite knows its own processes, orphans too.
    env[OWNER_ENV] = owner_tag()
    env.update(share.env() if (share := cpu_share(env)) else {})
    # The child imports this very trainperf, whatever interpreter runs it.
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    return with_bytecode_cache(env, cache_root("bytecode"))
