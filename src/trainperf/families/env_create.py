"""``trainperf env create`` and ``env list``: build an environment from its spec, read its key versions.

The commands are built by a pure function (tested without installing anything) and run one by
one. With ``uv`` on PATH it is used (much faster); otherwise ``python -m venv`` and pip. On a
machine without ``nvidia-smi`` the pinned CPU build of torch (``ci/envs/cpu.txt``) goes in first,
as ``make setup`` does, unless the spec pins torch itself.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from trainperf.errors import TrainperfError
from trainperf.families.envs import ENVS_DIR, EnvSpec, Interpreter, normalise, parse_spec
from trainperf.paths import REPO_ROOT

KEY_PACKAGES = ("torch", "transformers", "peft", "trl", "bitsandbytes", "unsloth", "verl", "vllm", "sglang")
PROBE_TIMEOUT_S = 30.0
# Reads installed metadata only (no imports of the packages themselves): milliseconds, and it
# still answers in an environment whose torch cannot load.
VERSIONS_PROBE = (
    "import importlib.metadata as m, json, sys\n"
    "out = {'python': sys.version.split()[0]}\n"
    "for name in sys.argv[1:]:\n"
    "    try: out[name] = m.version(name)\n"
    "    except m.PackageNotFoundError: pass\n"
    "print(json.dumps(out))\n"
)


@dataclass(frozen=True, slots=True)
class CreateOptions:
    prefix: Path
    """The environment's folder (``.venvs/NAME``)."""
    python: str
    """The base interpreter the environment is made from."""
    uv: str | None
    cpu_only: bool
    wheels: tuple[Path, ...] = ()
    """Install offline from these folders of wheels (``--no-index --find-links``)."""
    system_site_packages: bool = False
    """See the base interpreter's packages (a runner image's CUDA build of torch)."""


def cpu_torch_requirements(envs_dir: Path = ENVS_DIR) -> tuple[str, ...]:
    """The torch pin(s) of ``cpu.txt`` (its ``-r hf.txt`` include is the 'hf' stack, not wanted here)."""
    requirements, _ = parse_spec(envs_dir / "cpu.txt")
    return tuple(
        r for r in requirements if normalise(r.split("==")[0].split(">")[0].split("<")[0]) == "torch"
    )


def creation_commands(
    spec: EnvSpec, options: CreateOptions, requirement_files: tuple[Path, Path]
) -> list[list[str]]:
    """Every command ``env create`` runs, in order. ``requirement_files`` receive the two sections."""
    prefix = str(options.prefix)
    env_python = str(options.prefix / "bin" / "python")
    if options.uv:
        make = [options.uv, "venv", "--python", options.python, prefix]
        install = [options.uv, "pip", "install", "--python", env_python]
    else:
        make = [options.python, "-m", "venv", prefix]
        install = [env_python, "-m", "pip", "install", "--disable-pip-version-check"]
    if options.system_site_packages:
        make.append("--system-site-packages")
    source = [arg for folder in options.wheels for arg in ("--find-links", str(folder))]
    if options.wheels:
        source.insert(0, "--no-index")
    commands = [make]
    if options.cpu_only and "torch" not in spec.pins:
        commands.append([*install, *source, *cpu_torch_requirements(spec.path.parent)])
    # trainperf itself, editable, so that the child imports this checkout; no extras: the spec is the stack.
    commands.append([*install, *source, "-e", str(REPO_ROOT)])
    if spec.requirements:
        commands.append([*install, *source, "-r", str(requirement_files[0])])
    if spec.no_deps:
        commands.append([*install, *source, "--no-deps", "-r", str(requirement_files[1])])
    return commands


def create(spec: EnvSpec, options: CreateOptions, *, say: Callable[[str], None] = print) -> None:
    """Build the environment; a failing step is one line naming the step and the log's last line."""
    if options.prefix.exists() and not (options.prefix / "bin" / "python").exists():
        raise TrainperfError(
            f"{options.prefix} exists but is not a Python environment: remove it, then run again"
        )
    for folder in options.wheels:
        if not folder.is_dir():
            raise TrainperfError(f"--wheels {folder} is not a folder of wheels")
    with tempfile.TemporaryDirectory(prefix=f"trainperf-env-{spec.name}-") as tmp:
        files = (Path(tmp, "requirements.txt"), Path(tmp, "no-deps.txt"))
        files[0].write_text("\n".join(spec.requirements) + "\n")
        files[1].write_text("\n".join(spec.no_deps) + "\n")
        for command in creation_commands(spec, options, files):
            say("+ " + " ".join(command))
            completed = subprocess.run(command, capture_output=True, text=True, check=False)
            if completed.returncode != 0:
                last = (
                    completed.stderr.strip().splitlines()
                    or completed.stdout.strip().splitlines()
                    or ["no output"]
                )[-1]
                raise TrainperfError(
                    f"env create {spec.name}: `{' '.join(command[:4])} ...` failed: {last[:300]}"
                )


def default_options(
    name: str, *, python: str | None, prefix: str | None, wheels: Sequence[str], system_site: bool
) -> CreateOptions:
    from trainperf.families.envs import VENVS_DIR

    return CreateOptions(
        prefix=Path(prefix).absolute() if prefix else VENVS_DIR / name,
        python=python or shutil.which("python3") or "python3",
        uv=shutil.which("uv"),
        cpu_only=shutil.which("nvidia-smi") is None,
        wheels=tuple(Path(w).absolute() for w in wheels),
        system_site_packages=system_site,
    )


def probe_versions(
    python: str, packages: Sequence[str] = KEY_PACKAGES, timeout_s: float = PROBE_TIMEOUT_S
) -> dict[str, str] | str:
    """The interpreter's Python and package versions, or one line saying why they cannot be read."""
    try:
        completed = subprocess.run(
            [python, "-c", VERSIONS_PROBE, *packages],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"broken: cannot run ({type(exc).__name__}: {exc})"
    if completed.returncode != 0:
        last = (completed.stderr.strip().splitlines() or ["no output"])[-1]
        return f"broken: {last[:200]}"
    try:
        versions: dict[str, str] = json.loads(completed.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return "broken: the version probe printed no JSON"
    return versions


def render_list(rows: Sequence[tuple[str, Interpreter | None, dict[str, str] | str]]) -> str:
    """One line per environment: exists or not, its interpreter (and why that one), key versions."""
    lines = []
    for name, interpreter, versions in rows:
        if interpreter is None:
            lines.append(f"{name:12s} missing   (create: trainperf env create {name})")
            continue
        head = f"{name:12s} {'exists':9s} {interpreter.path} [{interpreter.source}]"
        if isinstance(versions, str):
            lines.append(f"{head}\n{'':22s} {versions}")
            continue
        listed = "  ".join(f"{k} {v}" for k, v in versions.items())
        lines.append(f"{head}\n{'':22s} {listed}")
    return "\n".join(lines)
