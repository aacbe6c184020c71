"""The README's commands work as written, from the repository root.

Every command line in the README's fenced code blocks that starts with ``make``, ``pytest``,
``python -m pytest`` or ``trainperf`` is checked here, so the README cannot drift from what works:
pytest commands are collected (``--collect-only``: a GPU class's matrix is listed on any machine),
make targets must exist (``make -n``), and trainperf subcommands must answer ``--help``."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# Shell blocks only: fenced with no language, or sh / bash / shell / console.
FENCE = re.compile(r"^```(?:sh|bash|shell|console)?[ \t]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
CHECKED_PROGRAMS = ("make", "pytest", "python", "python3", "trainperf")


def readme_commands(text: str) -> list[str]:
    """Command lines of the fenced blocks (``$ `` prompts stripped, ``\\`` continuations joined,
    comments dropped) whose program is one of ``CHECKED_PROGRAMS``."""
    commands = []
    for block in FENCE.findall(text):
        joined = re.sub(r"\s*\\\n\s*", " ", block)
        for raw in joined.splitlines():
            line = raw.strip().removeprefix("$ ").split(" #", 1)[0].strip()
            if not line or line.startswith("#"):
                continue
            words = line.split()
            if words[0] not in CHECKED_PROGRAMS:
                continue
            if words[0] in ("python", "python3") and words[1:3] != ["-m", "pytest"]:
                continue
            commands.append(line)
    return commands


COMMANDS = readme_commands(README.read_text())


def _run(argv: list[str], timeout: int = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False)


def test_readme_shows_the_front_door_commands() -> None:
    assert "make cpu" in COMMANDS and "make test" in COMMANDS
    assert any(re.match(r"pytest -m (maxq|h100|h200)\b", c) for c in COMMANDS), (
        "a GPU runner's command is shown"
    )


def test_the_extractor_reads_prompts_continuations_and_comments() -> None:
    text = "```sh\n$ make cpu   # sets up\n# a comment\npytest -m h100 \\\n  -k lora\necho no\n```\n"
    assert readme_commands(text) == ["make cpu", "pytest -m h100 -k lora"]


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_command_works_from_the_root(command: str) -> None:
    words = shlex.split(command)
    if words[0] == "make":
        targets = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        result = _run(["make", "-n", *targets])
        assert result.returncode == 0, f"`{command}`: {result.stderr.strip()}"
    elif words[0] == "trainperf":
        subcommand = [w for w in words[1:2] if not w.startswith("-")]
        result = _run([str(Path(sys.executable).with_name("trainperf")), *subcommand, "--help"])
        assert result.returncode == 0, f"`{command}`: {result.stderr.strip()}"
    else:
        args = words[3:] if words[0].startswith("python") else words[1:]
        result = _run([sys.executable, "-m", "pytest", *args, "--collect-only", "-q", "-p", "no:randomly"])
        out = result.stdout + result.stderr
        assert result.returncode == 0, f"`{command}` does not collect:\n{out[-2000:]}"
        assert re.search(r"\b[1-9]\d* tests? collected|collected [1-9]", out), f"`{command}` collects no case"


def test_pytest_help_shows_every_suite_option_as_written() -> None:
    """argparse %-formats help texts: a bare "5% slowdown" once printed argparse's internals instead."""
    from trainperf.ground.settings import OPTIONS

    shown = subprocess.run(
        [sys.executable, "-m", "pytest", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    ).stdout
    flat = " ".join(shown.split())
    assert "option_strings" not in flat
    for spec in OPTIONS:
        assert spec.cli in flat
        assert " ".join(spec.help.split())[:60] in flat, spec.cli


def test_the_plugin_loads_once_by_entry_point_and_by_name() -> None:
    """Where trainperf is installed its entry point loads the plugin; `-p trainperf.plugin` (how a
    checkout run by PYTHONPATH loads it, and how the upgrade page's commands are written) must then
    be the same plugin, not a second registration that stops pytest before it collects."""
    for extra in ([], ["-p", "trainperf.plugin"]):
        command = [sys.executable, "-m", "pytest", *extra, "perf_tests", "-m", "cpu", "--collect-only", "-q"]
        completed = subprocess.run(
            command, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
        )
        assert completed.returncode == 0, (extra, completed.stdout[-1500:] + completed.stderr[-1500:])
        assert "tests collected" in completed.stdout


def test_a_reader_that_stops_early_gets_no_traceback() -> None:
    """`trainperf baselines | head`: the reader may be gone before the table is written (here it
    reads nothing at all); the command ends quietly with status 0, not with a traceback."""
    command = f"{shlex.quote(sys.executable)} -m trainperf.cli baselines --gpu-class h100 | true"
    completed = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert "Traceback" not in completed.stderr and "BrokenPipe" not in completed.stderr, completed.stderr
