"""The environment verl runs in: its file logger, full Hydra errors, quiet Ray in a folder of its own,
vLLM's compile cache, and the modules verl itself imports in every process it starts
(``VERL_USE_EXTERNAL_MODULES``, read by verl's package ``__init__`` in the driver and each Ray
worker, which inherit this environment):
the critic's SDPA loader where flash-attn is missing, a planted regression when one is asked for,
the kernel window's hook (``verl.kernel_hook``) when kernel time is recorded.
What those add is written to ``env.txt`` beside the run's overrides.

Each run's Ray is its own: ``ray.init()`` without an address joins the cluster that ``RAY_ADDRESS``
names, or the last one ``ray start`` recorded in Ray's folder (``<RAY_TMPDIR>/ray/ray_current_cluster``),
and only starts a new one when there is neither. A run given neither (``RAY_ADDRESS`` dropped, a fresh
``RAY_TMPDIR``) starts a Ray that no neighbour joins and that joins none: verl runs on other GPUs of
the host, or a developer's cluster, go on beside it. Its token is its own too (``RAY_AUTH_TOKEN``,
which every process of that Ray inherits): Ray 2.59 turns token authentication on for a new local
Ray and, without a token, writes one to ``~/.ray/auth_token``, which every Ray of the user then reads;
two runs starting at once could each write their own, and a file left there changes how every later
Ray on the machine authenticates (the self-tests' Ray cluster refused its client with
``InvalidAuthToken`` after one appeared). Ray 2.59 gives a second Ray on a host the next
free dashboard port and runs its agent without HTTP when the agent's port is taken
(``docs/measurements/2026-11-28-cpu-ray-side-by-side``).
"""

from __future__ import annotations

import os
import secrets
import tempfile
from pathlib import Path

from trainperf.synth.cache import cache_root
from trainperf.workloads import verl_sdpa_critic
from trainperf.workloads.verl import kernel_hook, plant_hook
from trainperf.workloads.verl.kernel_folder import DIR_VARIABLE, WINDOW_VARIABLE, Window
from trainperf.workloads.verl.overrides import Attention
from trainperf.workloads.verl.setup import cache_environment

RECORDED = ("PYTHONPATH", "VERL_USE_EXTERNAL_MODULES", plant_hook.VARIABLE, DIR_VARIABLE, WINDOW_VARIABLE)
RAY_HOME_PREFIX = "trainperf-ray-"
SOCKET_ROOM = 40
"""The longest folder a run's Ray may live in: Ray's sockets sit about 66 characters below it
(``ray/session_<date>_<time>_<us>_<pid>/sockets/plasma_store``) and a Unix socket's path ends at 107."""


def ray_home() -> Path:
    """A fresh folder for one run's Ray: under the system's temporary folder where its path is short
    enough for Ray's sockets, else under ``/tmp``."""
    root = tempfile.gettempdir()
    if len(root) + len(RAY_HOME_PREFIX) + 9 > SOCKET_ROOM:
        root = "/tmp"
    return Path(tempfile.mkdtemp(prefix=RAY_HOME_PREFIX, dir=root))


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


def kernel_env(folder: Path, window: Window, env: dict[str, str]) -> dict[str, str]:
    """The kernel window's hook in every verl process, agreeing through ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    return {
        **with_module(env, kernel_hook.MODULE_NAME, kernel_hook.SOURCE_ROOT),
        DIR_VARIABLE: str(folder),
        WINDOW_VARIABLE: window.to_env(),
    }


def verl_environment(
    metrics_file: Path,
    work: Path,
    attention: Attention,
    *,
    ray_folder: Path,
    plant: str | None = None,
    kernels: tuple[Path, Window] | None = None,
) -> dict[str, str]:
    """This process's environment as verl gets it, its Ray in ``ray_folder`` (module docstring)."""
    env = dict(
        os.environ,
        VERL_FILE_LOGGER_PATH=str(metrics_file),
        HYDRA_FULL_ERROR="1",
        RAY_DEDUP_LOGS="0",
        RAY_USAGE_STATS_ENABLED="0",
        RAY_TMPDIR=str(ray_folder),
        RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN=secrets.token_hex(32),
    )
    env.pop("RAY_ADDRESS", None)
    # vLLM's compiled graphs kept across cases and nights (verl turns the cache off): verl.setup.
    env.update(cache_environment(env, cache_root("vllm")))
    if attention.needs_critic_shim:
        env.update(critic_shim_env(work, env))
    if plant:
        env.update(plant_env(plant, env))
    if kernels is not None:
        env.update(kernel_env(*kernels, env))
    if attention.needs_critic_shim or plant or kernels is not None:
        (work / "env.txt").write_text("".join(f"{key}={env[key]}\n" for key in RECORDED if key in env))
    return env
