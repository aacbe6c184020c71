"""Workload environments: one Python environment per workload family, and which interpreter runs a case.

unsloth, TRL, verl with vLLM and verl with SGLang pin mutually incompatible versions (unsloth
caps transformers at 5.17 and trl at 1.15; verl wants transformers below 5.11; installing SGLang
broke a vLLM environment in E3), so each family names an environment (``Case.environment``)
whose spec is ``ci/envs/<name>.txt``. A spec is a requirements list with one extension: lines
after ``# trainperf: no-deps`` are installed in a second step with ``--no-deps`` (packages whose
declared requirements no resolver can satisfy; the spec pins what they really need).

Which interpreter runs a case of environment NAME, first match wins:
``--perf-python`` (every case), ``--perf-env NAME=PY`` then ``TRAINPERF_ENV_<NAME>`` (a family
pointed at an existing interpreter), ``.venvs/NAME/bin/python`` (made by ``trainperf env create``),
and for ``hf`` only the interpreter running the suite. Otherwise the case is skipped with the
command that creates the environment. Parent side: no torch here.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from trainperf.errors import TrainperfError
from trainperf.paths import REPO_ROOT

ENVS_DIR = REPO_ROOT / "ci" / "envs"
VENVS_DIR = REPO_ROOT / ".venvs"
DEFAULT_ENVIRONMENT = "hf"
NO_DEPS_MARKER = "# trainperf: no-deps"
NOT_ENVIRONMENTS = frozenset({"cpu", "gpu-image"})
"""Files of ``ci/envs`` that are not environments: the CPU torch pin and the GPU image's contents."""
ENV_VAR_PREFIX = "TRAINPERF_ENV_"


@dataclass(frozen=True, slots=True)
class EnvSpec:
    name: str
    path: Path
    requirements: tuple[str, ...]
    """Installed together, dependencies resolved."""
    no_deps: tuple[str, ...]
    """Installed afterwards with ``--no-deps``."""

    @property
    def pins(self) -> dict[str, str]:
        """Exact pins (``name==version``) of both sections, by normalised package name."""
        pins = {}
        for line in (*self.requirements, *self.no_deps):
            if "==" in line and not line.startswith("-"):
                name, version = line.split("==", 1)
                pins[normalise(name)] = version.split(";")[0].strip()
        return pins


@dataclass(frozen=True, slots=True)
class Interpreter:
    """The Python that runs a case's child, and why that one."""

    path: str
    source: str
    isolated: bool
    """An environment of its own: the child does not inherit the suite's PYTHONPATH (which may put
    another environment's packages, e.g. a wheel folder for 'hf', ahead of this one's)."""


def normalise(name: str) -> str:
    """PEP 503 name normalisation: ``Unsloth_Zoo`` and ``unsloth-zoo`` are one package."""
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


def known_environments(envs_dir: Path = ENVS_DIR) -> list[str]:
    return sorted(p.stem for p in envs_dir.glob("*.txt") if p.stem not in NOT_ENVIRONMENTS)


def load_spec(name: str, envs_dir: Path = ENVS_DIR) -> EnvSpec:
    path = envs_dir / f"{name}.txt"
    if name in NOT_ENVIRONMENTS or not path.is_file():
        known = ", ".join(known_environments(envs_dir)) or "none"
        raise TrainperfError(
            f"unknown environment '{name}': no spec {path} (known: {known}); add ci/envs/{name}.txt"
        )
    requirements, no_deps = parse_spec(path)
    return EnvSpec(name, path, requirements, no_deps)


def parse_spec(path: Path, _seen: frozenset[Path] = frozenset()) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(requirements, no-deps requirements) of a spec; ``-r other.txt`` lines are inlined, because
    the sections are written to temporary files where a relative include would not resolve."""
    if path.resolve() in _seen:
        raise TrainperfError(f"{path} includes itself through -r: remove the loop")
    sections: tuple[list[str], list[str]] = ([], [])
    current = 0
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line.lower().replace(" ", "") == NO_DEPS_MARKER.replace(" ", ""):
            current = 1
            continue
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("-r ", "--requirement ")):
            included, included_no_deps = parse_spec(
                path.parent / line.split(None, 1)[1], _seen | {path.resolve()}
            )
            sections[current].extend(included)
            sections[1].extend(included_no_deps)
            continue
        sections[current].append(line)
    return tuple(sections[0]), tuple(sections[1])


def env_var(name: str) -> str:
    """``TRAINPERF_ENV_VERL_VLLM`` for ``verl-vllm``."""
    return ENV_VAR_PREFIX + re.sub(r"[^A-Z0-9]", "_", name.upper())


def parse_overrides(text: str | None) -> dict[str, str]:
    """``--perf-env unsloth=/opt/u/bin/python,verl-vllm=/opt/v/bin/python`` as a dict."""
    overrides: dict[str, str] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        name, sep, python = item.partition("=")
        if not sep or not name.strip() or not python.strip():
            raise TrainperfError(
                f"--perf-env {item!r} is not NAME=PYTHON: give e.g. --perf-env unsloth=/opt/unsloth/bin/python"
            )
        overrides[name.strip()] = os.path.abspath(python.strip())
    return overrides


def venv_python(name: str, venvs_dir: Path = VENVS_DIR) -> Path:
    return venvs_dir / name / "bin" / "python"


def resolve_interpreter(
    environment: str,
    *,
    perf_python: str | None,
    overrides: Mapping[str, str],
    environ: Mapping[str, str],
    venvs_dir: Path = VENVS_DIR,
    current: str = sys.executable,
) -> Interpreter | None:
    """The interpreter for a case of ``environment`` (see the module's docstring); None: it does not exist."""
    if perf_python:
        return Interpreter(perf_python, "--perf-python", isolated=False)
    for python, source in (
        (overrides.get(environment), "--perf-env"),
        (environ.get(env_var(environment)), env_var(environment)),
    ):
        if python:
            python = os.path.abspath(python)
            if not os.path.isfile(python):
                raise TrainperfError(
                    f"{source} {environment}={python} is not a Python interpreter: give the path of its bin/python"
                )
            return Interpreter(python, source, isolated=True)
    candidate = venv_python(environment, venvs_dir)
    if candidate.is_file():
        # Not resolved: a venv's python is a symlink, and following it would leave the venv.
        return Interpreter(os.path.abspath(candidate), f".venvs/{environment}", isolated=True)
    if environment == DEFAULT_ENVIRONMENT:
        return Interpreter(current, "this interpreter", isolated=False)
    return None


def missing_message(environment: str) -> str:
    """The one line a case of a missing environment is skipped with."""
    return (
        f"environment '{environment}' does not exist (no .venvs/{environment}/bin/python): create it with "
        f"`trainperf env create {environment}`, or point it at an interpreter with "
        f"--perf-env {environment}=PY or {env_var(environment)}=PY"
    )
