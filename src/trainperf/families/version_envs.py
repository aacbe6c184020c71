"""Environments that differ from a base environment in one package's version (``trainperf bisect``).

Each is a small virtual environment layered over the base one: its own site-packages holds only
the bisected package (and whatever of its requirements the base lacks), and a ``.pth`` line adds
the base environment's site-packages behind it (``site.addsitedir``, so the base's own ``.pth``
files, editable installs included, still apply). Everything but the package under test is the
same in every environment, which is what a bisection needs, and building one takes seconds
instead of a full ``trainperf env create``. Environments are cached by package and version
under ``.venvs/bisect/`` and reused by later bisections.

Versions come from the package index (``pip index versions``) or, on an offline runner, from a
local wheelhouse (``--wheelhouse DIR``: the versions its wheel files carry, installed with
``--no-index --find-links DIR``).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from trainperf.errors import TrainperfError
from trainperf.families.env_create import probe_versions
from trainperf.families.envs import VENVS_DIR, normalise

BISECT_VENVS = VENVS_DIR / "bisect"
BASE_PTH = "_trainperf_base_env.pth"
_WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")
_SITE_PROBE = (
    "import json, site, sys; print(json.dumps([p for p in site.getsitepackages() if 'site-packages' in p]))"
)


@dataclass(frozen=True, slots=True)
class VersionEnvOptions:
    base_python: str
    """The interpreter whose environment every version's environment is layered over."""
    wheelhouse: Path | None = None
    """Install offline from this folder of wheels."""
    root: Path = BISECT_VENVS


def wheelhouse_versions(folder: Path, package: str) -> list[str]:
    """The versions of ``package`` that a folder of wheels holds."""
    if not folder.is_dir():
        raise TrainperfError(f"--wheelhouse {folder} is not a folder of wheels")
    wanted = normalise(package)
    found = []
    for path in folder.glob("*.whl"):
        match = _WHEEL.match(path.name)
        if match and normalise(match["name"]) == wanted:
            found.append(match["version"])
    return found


def index_versions(python: str, package: str) -> list[str]:
    """The versions the package index offers (``pip index versions``); one line when it cannot say."""
    command = [python, "-m", "pip", "index", "versions", package, "--pre", "--disable-pip-version-check"]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    for line in completed.stdout.splitlines():
        if line.strip().startswith("Available versions:"):
            return [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()]
    last = (completed.stderr.strip().splitlines() or ["no output"])[-1]
    raise TrainperfError(
        f"the package index lists no versions of {package} ({last[:200]}); check the name, or give "
        "--wheelhouse DIR on an offline runner"
    )


def env_path(options: VersionEnvOptions, package: str, version: str) -> Path:
    return options.root / f"{normalise(package)}-{version}"


def install_command(options: VersionEnvOptions, env_python: Path, package: str, version: str) -> list[str]:
    """The base environment's pip, installing into the layered environment (``pip --python``)."""
    source = ["--no-index", "--find-links", str(options.wheelhouse)] if options.wheelhouse else []
    return [
        options.base_python, "-m", "pip", "--python", str(env_python), "install",
        "--disable-pip-version-check", "--quiet", *source, f"{package}=={version}",
    ]  # fmt: skip


def _run(command: Sequence[str], what: str) -> str:
    completed = subprocess.run(list(command), capture_output=True, text=True, timeout=900, check=False)
    if completed.returncode != 0:
        lines = (
            completed.stderr.strip().splitlines() or completed.stdout.strip().splitlines() or ["no output"]
        )
        errors = [line for line in lines if line.startswith("ERROR")] or lines
        raise TrainperfError(f"{what}: {errors[-1][:300]}")
    return completed.stdout


def _base_site_packages(base_python: str) -> list[str]:
    paths: list[str] = json.loads(
        _run([base_python, "-c", _SITE_PROBE], f"reading {base_python}'s site-packages")
    )
    if not paths:
        raise TrainperfError(f"{base_python} has no site-packages folder to layer the environments over")
    return paths


def _offline_fix(options: VersionEnvOptions, package: str, version: str) -> str:
    if options.wheelhouse is None:
        return ""
    return (
        f" (offline from {options.wheelhouse}: add {normalise(package).replace('-', '_')}-{version}-*.whl, "
        "and any requirement of it the base environment lacks, to the wheelhouse)"
    )


def _layer_lines(base_python: str) -> str:
    return "".join(f"import site; site.addsitedir({path!r})\n" for path in _base_site_packages(base_python))


def _cached(python: Path, package: str, version: str, layer: str) -> bool:
    """An environment already built for this version over this same base environment."""
    if not python.is_file():
        return False
    pth = next(python.parent.parent.glob(f"lib/python*/site-packages/{BASE_PTH}"), None)
    if pth is None or pth.read_text() != layer:
        return False  # made over another base environment: rebuilt
    installed = probe_versions(str(python), (package,))
    return isinstance(installed, dict) and installed.get(package) == version


def ensure_env(
    options: VersionEnvOptions, package: str, version: str, *, say: Callable[[str], None] = print
) -> Path:
    """The interpreter of the environment of ``package==version``, built unless cached."""
    prefix = env_path(options, package, version)
    python = prefix / "bin" / "python"
    layer = _layer_lines(options.base_python)
    if _cached(python, package, version, layer):
        say(f"{package} {version}: cached environment {prefix}")
        return python
    say(f"{package} {version}: building {prefix} over {options.base_python}")
    _run([options.base_python, "-m", "venv", "--clear", "--without-pip", str(prefix)], f"creating {prefix}")
    next((prefix / "lib").glob("python*/site-packages")).joinpath(BASE_PTH).write_text(layer)
    try:
        _run(install_command(options, python, package, version), f"{package} {version} cannot be installed")
    except TrainperfError as exc:
        raise TrainperfError(f"{exc}{_offline_fix(options, package, version)}") from exc
    installed = probe_versions(str(python), (package,))
    if not isinstance(installed, dict) or installed.get(package) != version:
        raise TrainperfError(f"{prefix} does not hold {package} {version} after installing it ({installed})")
    return python
