"""Candidate environments: a base environment with some pins changed (``trainperf env create --pin``,
``trainperf ab --pin-b``, ``trainperf bisect``).

A candidate is a small virtual environment layered over the base one: its own site-packages holds
the pinned packages and whatever the resolver had to move for them, and a ``.pth`` line adds the
base environment's site-packages behind it (``site.addsitedir``, so the base's own ``.pth`` files,
editable installs included, still apply). Everything else is the base's, which is what an A/B or a
bisection of one upgrade needs, and building one takes seconds. pip resolves the pins against the
base's installed packages (``pip --python CANDIDATE install``); what else moved is read back by
comparing the installed versions of the two environments, never guessed from pip's output.

Before anything is measured, a candidate must show that it can run: it installs (no resolver
conflict, no version that refuses the installed torch or Python), pip declares no conflict among
what is installed, and the training stack imports. A candidate that fails one of these is a
``BrokenEnvironment``: the package and a one-line cause, a verdict rather than a crash.

Candidates are cached by their pins under ``.venvs/candidates/`` (rebuilt when the base changes).
Offline, pip installs from a wheelhouse (``--no-index --find-links DIR``).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from trainperf.errors import TrainperfError
from trainperf.families.envs import VENVS_DIR, normalise

CANDIDATE_VENVS = VENVS_DIR / "candidates"
BASE_PTH = "_trainperf_base_env.pth"
STACK_IMPORTS = ("torch", "transformers", "peft", "trl", "datasets", "accelerate")
"""What every SFT and TRL case imports; a candidate that cannot import these cannot run a case."""
_WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")
_CONFLICT = re.compile(
    r"^(?P<who>\S+) (?P<have>\S+) requires (?P<need>.+?), but you have (?P<got>.+?)(\.| which)"
)
_SITE_PROBE = (
    "import json, site, sys; print(json.dumps([p for p in site.getsitepackages() if 'site-packages' in p]))"
)
# Every installed distribution's version, the first found on sys.path winning (as imports do), and
# the import names of the distributions asked for (top-level modules, from packages_distributions).
_INSTALLED_PROBE = """\
import importlib.metadata as m, json, sys
seen = {}
for dist in m.distributions():
    name = dist.metadata["Name"]
    if name:
        seen.setdefault(name.lower().replace("_", "-").replace(".", "-"), dist.version)
print(json.dumps({"python": sys.version.split()[0], "packages": seen}))
"""
_IMPORT_PROBE = """\
import importlib, importlib.metadata as m, sys, traceback
tops = m.packages_distributions()
wanted = {n.lower().replace("_", "-") for n in sys.argv[2:]}
modules = list(dict.fromkeys(sys.argv[1].split(",") + sorted(
    top for top, dists in tops.items() if not top.startswith("_")
    and any(d.lower().replace("_", "-") in wanted for d in dists))))
for name in modules:
    try:
        importlib.import_module(name)
    except BaseException as exc:
        line = f"{type(exc).__name__}: {exc}".splitlines()[0]
        print(f"import {name}: {line}", file=sys.stderr)
        sys.exit(3)
"""


class BrokenEnvironment(TrainperfError):
    """A candidate that cannot run the cases: which package, and the one-line cause."""

    def __init__(self, package: str, cause: str) -> None:
        self.package = package
        self.cause = " ".join(cause.split())[:300]
        super().__init__(f"broken-environment: {package}: {self.cause}")


@dataclass(frozen=True, slots=True)
class CandidateOptions:
    base_python: str
    """The interpreter whose environment every candidate is layered over."""
    wheelhouse: Path | None = None
    """Install offline from this folder of wheels."""
    root: Path = CANDIDATE_VENVS
    allow_conflicts: bool = False
    """Measure a candidate even when pip declares a conflict among what is installed."""
    imports: tuple[str, ...] = STACK_IMPORTS


@dataclass(frozen=True, slots=True)
class Candidate:
    python: Path
    pins: dict[str, str]
    moved: list[tuple[str, str | None, str | None]] = field(default_factory=list)
    """Packages other than the pins whose version differs from the base: (name, base, candidate)."""
    conflicts: list[str] = field(default_factory=list)
    """pip's declared conflicts among the installed packages (measured anyway when allowed)."""

    def describe(self) -> str:
        pins = ", ".join(f"{name} {version}" for name, version in self.pins.items())
        moved = "; ".join(f"{n} {a or 'absent'} -> {b or 'removed'}" for n, a, b in self.moved)
        return f"{pins}" + (f" (also moved: {moved})" if moved else " (nothing else moved)")


def parse_pins(texts: Sequence[str]) -> dict[str, str]:
    """``NAME==VERSION`` items as {normalised name: version}; one line naming the form otherwise."""
    pins: dict[str, str] = {}
    for text in texts:
        name, sep, version = text.partition("==")
        if not sep or not name.strip() or not version.strip() or any(c in version for c in "<>=,;"):
            raise TrainperfError(f"--pin {text!r} is not NAME==VERSION: give e.g. --pin transformers==5.24.0")
        pins[normalise(name)] = version.strip()
    return pins


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


def candidate_path(options: CandidateOptions, pins: Mapping[str, str]) -> Path:
    return options.root / "+".join(f"{name}-{version}" for name, version in sorted(pins.items()))


def installed_versions(python: str | Path) -> dict[str, str]:
    """Every distribution an interpreter sees, by normalised name (the first on its path wins)."""
    out = _run([str(python), "-c", _INSTALLED_PROBE], f"reading the packages of {python}")
    packages: dict[str, str] = json.loads(out.strip().splitlines()[-1])["packages"]
    return {normalise(name): version for name, version in packages.items()}


def moved_packages(
    base: Mapping[str, str], candidate: Mapping[str, str], pins: Mapping[str, str]
) -> list[tuple[str, str | None, str | None]]:
    """Packages other than the pins whose version the candidate changed (added or removed too)."""
    names = sorted((base.keys() | candidate.keys()) - pins.keys())
    return [(n, base.get(n), candidate.get(n)) for n in names if base.get(n) != candidate.get(n)]


def declared_conflicts(pip_output: str) -> list[str]:
    """pip's 'X requires Y, but you have Z' lines (its check after an install, or ``pip check``)."""
    lines = []
    for raw in pip_output.splitlines():
        line = raw.strip()
        if _CONFLICT.match(line) or " has requirement " in line:
            lines.append(line.rstrip("."))
    return lines


def _run(command: Sequence[str], what: str, timeout_s: float = 900) -> str:
    completed = subprocess.run(list(command), capture_output=True, text=True, timeout=timeout_s, check=False)
    if completed.returncode != 0:
        raise TrainperfError(f"{what}: {_last_error(completed)}")
    return completed.stdout


def _last_error(completed: subprocess.CompletedProcess[str]) -> str:
    lines = completed.stderr.strip().splitlines() or completed.stdout.strip().splitlines() or ["no output"]
    errors = [line for line in lines if line.startswith("ERROR")] or lines
    return errors[-1][:300]


def _layer_lines(base_python: str) -> str:
    paths: list[str] = json.loads(
        _run([base_python, "-c", _SITE_PROBE], f"reading {base_python}'s site-packages")
    )
    if not paths:
        raise TrainperfError(f"{base_python} has no site-packages folder to layer the environments over")
    return "".join(f"import site; site.addsitedir({path!r})\n" for path in paths)


def _install_command(options: CandidateOptions, python: Path, pins: Mapping[str, str]) -> list[str]:
    """The base environment's pip, installing into the candidate (``pip --python``)."""
    source = ["--no-index", "--find-links", str(options.wheelhouse)] if options.wheelhouse else []
    requirements = [f"{name}=={version}" for name, version in pins.items()]
    return [
        options.base_python, "-m", "pip", "--python", str(python), "install",
        "--disable-pip-version-check", *source, *requirements,
    ]  # fmt: skip


def _missing_offline(error: str, options: CandidateOptions) -> str | None:
    """Offline, a wheel the wheelhouse lacks is missing input (the fix names it), not a broken version."""
    if options.wheelhouse is None:
        return None
    match = re.search(r"No matching distribution found for (\S+)", error)
    if not match:
        return None
    wanted = match.group(1)
    name = re.split(r"[<>=!~;\[]", wanted, maxsplit=1)[0]
    exact = wanted.split("==", 1)[1] if "==" in wanted else "*"
    return (
        f"{wanted} is not in the wheelhouse {options.wheelhouse}: add "
        f"{normalise(name).replace('-', '_')}-{exact}-*.whl "
        "and any requirement of it the base environment lacks (on a machine with internet: pip download "
        "--no-deps --only-binary=:all: -d DIR NAME==VERSION)"
    )


def _blamed(error: str, pins: Mapping[str, str]) -> str:
    """The pinned package a pip error names (the first pin if it names none)."""
    lowered = error.lower().replace("_", "-")
    for name in pins:
        if name in lowered:
            return f"{name} {pins[name]}"
    name, version = next(iter(pins.items()))
    return f"{name} {version}"


def _install(options: CandidateOptions, python: Path, pins: Mapping[str, str]) -> list[str]:
    """Install the pins; the declared conflicts pip reports afterwards. Broken or missing input raises."""
    completed = subprocess.run(
        _install_command(options, python, pins), capture_output=True, text=True, timeout=1800, check=False
    )
    if completed.returncode != 0:
        error = _last_error(completed)
        missing = _missing_offline(error, options)
        if missing:
            raise TrainperfError(missing)
        raise BrokenEnvironment(_blamed(error, pins), f"does not install: {error.removeprefix('ERROR: ')}")
    return declared_conflicts(completed.stderr + "\n" + completed.stdout)


def check_runs(python: Path, pins: Mapping[str, str], imports: Sequence[str]) -> None:
    """The stack and the pinned packages import in the candidate; BrokenEnvironment naming the first
    that does not (an import error, a version that refuses the installed torch, a removed API)."""
    completed = subprocess.run(
        [str(python), "-c", _IMPORT_PROBE, ",".join(imports), *pins],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if completed.returncode != 0:
        cause = (completed.stderr.strip().splitlines() or ["the import probe failed with no output"])[-1]
        raise BrokenEnvironment(_blamed(cause, pins) if pins else "the environment", cause)


def _cached(python: Path, pins: Mapping[str, str], layer: str) -> bool:
    """A candidate already built for these pins over this same base environment."""
    if not python.is_file():
        return False
    pth = next(python.parent.parent.glob(f"lib/python*/site-packages/{BASE_PTH}"), None)
    if pth is None or pth.read_text() != layer:
        return False  # made over another base environment: rebuilt
    try:
        installed = installed_versions(python)
    except TrainperfError:
        return False
    return all(installed.get(name) == version for name, version in pins.items())


def ensure_candidate(
    options: CandidateOptions,
    pins: Mapping[str, str],
    *,
    say: Callable[[str], None] = print,
    prefix: Path | None = None,
) -> Candidate:
    """The candidate environment of ``pins`` over the base, built unless cached, shown to run.

    Raises ``BrokenEnvironment`` when it cannot run the cases, ``TrainperfError`` for missing input."""
    if not pins:
        raise TrainperfError("a candidate needs at least one pin: give --pin NAME==VERSION")
    prefix = prefix or candidate_path(options, pins)
    python = prefix / "bin" / "python"
    layer = _layer_lines(options.base_python)
    conflicts: list[str] = []
    if _cached(python, pins, layer):
        say(f"{_label(pins)}: cached environment {prefix}")
        conflicts = _check_conflicts(options, python)
    else:
        say(f"{_label(pins)}: building {prefix} over {options.base_python}")
        _run(
            [options.base_python, "-m", "venv", "--clear", "--without-pip", str(prefix)], f"creating {prefix}"
        )
        next((prefix / "lib").glob("python*/site-packages")).joinpath(BASE_PTH).write_text(layer)
        conflicts = _install(options, python, pins)
    installed = installed_versions(python)
    wrong = {n: installed.get(n) for n, v in pins.items() if installed.get(n) != v}
    if wrong:
        raise TrainperfError(f"{prefix} does not hold {_label(pins)} after installing it ({wrong})")
    # Only conflicts that involve the pins: the base environment's own are not the candidate's doing.
    involved = [c for c in conflicts if any(name in c.lower().replace("_", "-") for name in pins)]
    if involved and not options.allow_conflicts:
        raise BrokenEnvironment(_blamed(involved[0], pins), f"declared conflict: {involved[0]}")
    check_runs(python, pins, options.imports)
    moved = moved_packages(installed_versions(options.base_python), installed, pins)
    return Candidate(python, dict(pins), moved, conflicts)


def _check_conflicts(options: CandidateOptions, python: Path) -> list[str]:
    completed = subprocess.run(
        [options.base_python, "-m", "pip", "--python", str(python), "check", "--disable-pip-version-check"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    return declared_conflicts(completed.stdout)


def _label(pins: Mapping[str, str]) -> str:
    return ", ".join(f"{name} {version}" for name, version in pins.items())
