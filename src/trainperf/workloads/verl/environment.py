"""The environment verl runs in: its file logger, full Hydra errors, quiet Ray, vLLM's compile cache,
and the modules verl itself imports in every process it starts (``VERL_USE_EXTERNAL_MODULES``, read
by verl's package ``__init__`` in the driver and each Ray worker, which inherit this environment):
the critic's SDPA loader where flash-attn is missing, a planted regression when one is asked for.
What those add is written to ``env.txt`` beside the run's overrides.
"""

from __future__ import annotations

import os
from pathlib import Path

from trainperf.synth.cache import cache_root
from trainperf.workloads import verl_sdpa_critic
from trainperf.workloads.verl import plant_hook
from trainperf.workloads.verl.overrides import Attention
from trainperf.workloads.verl.setup import cache_environment

RECORDED = ("PYTHONPATH", "VERL_USE_EXTERNAL_MODULES", plant_hook.VARIABLE)


def with_module(env: dict[str, str], name: str, folder: Path) -> dict[str, str]:
    """Variables that make verl import module ``name`` (found under ``folder``) in every process."""
    modules = [m for m in env.get("VERL_USE_EXTERNAL_MODULES", "").split(",") if m and m != name]
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(folder)]
    return {
        "PYTHONPATH": os.pathsep.join([str(folder), *paths]),
        "VERL_USE_EXTERNAL_MODULES": ",".join([*modules, name]),
    }


def critic_shim_env(work: Path, env: dict[str, str]) -> dict[str, str]:
    """The critic's SDPA loader, copied next to the run (it needs neither trainperf nor its path)."""
    folder = work / "python"
    folder.mkdir(parents=True, exist_ok=True)
    name = verl_sdpa_critic.MODULE_NAME
    (folder / f"{name}.py").write_text(Path(verl_sdpa_critic.__file__).read_text())
    return with_module(env, name, folder)


def plant_env(plant: str, env: dict[str, str]) -> dict[str, str]:
    """The planted regression, installed by ``plant_hook`` as verl's processes import verl."""
    return {
        **with_module(env, plant_hook.MODULE_NAME, plant_hook.SOURCE_ROOT),
        plant_hook.VARIABLE: plant,
    }


def verl_environment(
    metrics_file: Path, work: Path, attention: Attention, *, plant: str | None = None
) -> dict[str, str]:
    """This process's environment as verl gets it (module docstring)."""
    env = dict(
        os.environ,
        VERL_FILE_LOGGER_PATH=str(metrics_file),
        HYDRA_FULL_ERROR="1",
        RAY_DEDUP_LOGS="0",
        RAY_USAGE_STATS_ENABLED="0",
    )
    # vLLM's compiled graphs kept across cases and nights (verl turns the cache off): verl.setup.
    env.update(cache_environment(env, cache_root("vllm")))
    if attention.needs_critic_shim:
        env.update(critic_shim_env(work, env))
    if plant:
        env.update(plant_env(plant, env))
    if attention.needs_critic_shim or plant:
        (work / "env.txt").write_text("".join(f"{key}={env[key]}\n" for key in RECORDED if key in env))
    return env
