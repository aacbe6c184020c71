"""A real run of the tiny CPU catalogue in a folder of its own, for the fault matrix: start it, cut
it, find what it left behind, resume it. Everything here is a real pytest process and real
training children; only the fault is planted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainperf.errors import TrainperfError
from trainperf.measure.ownership import tag_of
from trainperf.store.results import load_result

CATALOGUE = """
import pytest
from trainperf.case import Case
from trainperf.ground.catalogue import params

KNOBS = {"family": "sft_hf", "model": "qwen3_tiny", "method": "lora", "profile": "short", "batch_size": 4}
CASES = [Case(**KNOBS, gpu_classes=("cpu",)), Case(**{**KNOBS, "batch_size": 2}, gpu_classes=("cpu",))]

@pytest.mark.parametrize("case", params(CASES))
def test_case(case, trainperf):
    trainperf(case)
"""
FIRST, SECOND = "sft_hf-qwen3_tiny-lora-short-b4", "sft_hf-qwen3_tiny-lora-short-b2"


Row = Callable[..., None]
"""Records a fault-matrix row's figures: ``row(fault=..., exit_status=..., user_sees=...)``."""


def tagged_by(owner_pid: int) -> list[int]:
    """Live processes started by the session ``owner_pid`` (their TRAINPERF_OWNER tag names it)."""
    return tagged_with(f"{owner_pid}:")


def tagged_with(prefix: str) -> list[int]:
    """Live processes whose TRAINPERF_OWNER tag starts with ``prefix`` (zombies are not counted:
    they hold nothing and are gone once their parent reaps them)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        tag = tag_of(int(entry.name))
        try:
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and tag is not None and tag.startswith(prefix):
            found.append(int(entry.name))
    return found


def seconds_until_gone(owner_pid: int, limit_s: float = 15.0) -> float:
    """How long until no process of ``owner_pid``'s session is left (``limit_s`` if some stay)."""
    started = time.monotonic()
    while tagged_by(owner_pid) and time.monotonic() - started < limit_s:
        time.sleep(0.05)
    return time.monotonic() - started


STARTED: list[int] = []  # every drill session of this test process: what a row's teardown sweeps
MOST_NEIGHBOURS = 16  # the most cores the drills fill with busy loops


def busy_neighbours(count: int, lifetime_s: int = 300) -> list[int]:
    """Busy loops that are not the suite's: detached from this process (their parent is not it),
    without a suite tag. The caller kills them (``kill_all``); each also ends by itself after
    ``lifetime_s``, so that a test session killed before its clean-up leaves no loop behind to
    crowd every later run of the host."""
    env = {k: v for k, v in os.environ.items() if k != "TRAINPERF_OWNER"}
    body = f"import time\nend = time.monotonic() + {lifetime_s}\nwhile time.monotonic() < end: pass"
    loop = f"{sys.executable} -c '{body}' >/dev/null 2>&1 & echo $!;"
    started = subprocess.run(
        ["sh", "-c", " ".join([loop] * count)], env=env, capture_output=True, text=True, check=True
    )
    return [int(pid) for pid in started.stdout.split()]


def kill_all(pids: Sequence[int]) -> None:
    """Never leave a training process on the test machine, whatever the test found."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@dataclass
class Drill:
    """One run folder's worth of a fault drill under ``root``."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)
    output: Path | None = None
    sessions: list[int] = field(default_factory=list)  # the pid of every pytest session it started

    def __post_init__(self) -> None:
        (self.root / "test_catalogue.py").write_text(CATALOGUE)
        (self.root / "baselines").mkdir(exist_ok=True)  # empty (a missing folder is refused as a typo)
        self.output = self.output or self.root / "reports"

    def command(self, *extra: str, select: str = "") -> list[str]:
        selection = ["-k", select] if select else []
        return [
            sys.executable, "-m", "pytest", "-m", "cpu", "-q", "-p", "no:cacheprovider", "test_catalogue.py",
            *selection, "--perf-output", str(self.output), "--perf-baselines", "baselines",
            "--perf-progress-interval", "1", *extra,
        ]  # fmt: skip

    def _env(self) -> dict[str, str]:
        return {**os.environ, **self.env}

    def start(self, *extra: str, select: str = "") -> subprocess.Popen[str]:
        process = subprocess.Popen(
            self.command(*extra, select=select),
            cwd=self.root,
            env=self._env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.sessions.append(process.pid)
        STARTED.append(process.pid)
        return process

    def run(self, *extra: str, select: str = "", timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """A whole session, output and error together (as the user's terminal shows them)."""
        process = self.start(*extra, select=select)
        try:
            out, _ = process.communicate(timeout=timeout)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        return subprocess.CompletedProcess(process.args, process.returncode, out, "")

    def processes_left(self, grace_s: float = 15.0) -> list[int]:
        """Processes of this drill's sessions still alive after ``grace_s`` (found by their suite
        tag, which everything a session starts inherits): what a fault left behind."""
        deadline = time.monotonic() + grace_s
        while True:
            left = [pid for session in self.sessions for pid in tagged_by(session)]
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(0.05)

    def run_dir(self) -> Path:
        assert self.output is not None
        folders = sorted(p for p in self.output.iterdir() if p.is_dir())
        assert folders, f"no run folder under {self.output}"
        return folders[-1]

    def result(self, case_id: str) -> dict[str, object]:
        loaded: dict[str, object] = json.loads((self.run_dir() / "results" / f"{case_id}.json").read_text())
        return loaded


def wait_for(process: subprocess.Popen[str], *needles: str, limit_s: float = 240) -> str:
    """Read the run's output until a line holds every needle; what was read. Fails past the limit."""
    assert process.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + limit_s
    for line in process.stdout:
        seen.append(line)
        if all(needle in line for needle in needles):
            return "".join(seen)
        if time.monotonic() > deadline:
            break
    raise AssertionError(f"never saw {needles}: " + "".join(seen[-30:]))


def wait_for_file(path: Path, limit_s: float = 240) -> None:
    deadline = time.monotonic() + limit_s
    while not path.is_file():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def one_line_error(output: str) -> bool:
    """No traceback of the suite's own reached the user (Python's, pytest's internal error, or
    pytest's report of an exception: its source lines and ``E   `` lines)."""
    pytest_repr = any(line.startswith("E   ") for line in output.splitlines())
    return (
        "Traceback (most recent call last)" not in output
        and "INTERNALERROR" not in output
        and not pytest_repr
    )


def run_folder(output: Path) -> Path | None:
    """The newest run folder under ``output``; None when the run made none."""
    folders = sorted(p for p in output.iterdir() if p.is_dir()) if output.is_dir() else []
    return folders[-1] if folders else None


def stored_runs(run_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Each finished case's measured runs, read before a fault: what must survive it unchanged."""
    return {
        path.stem: json.loads(path.read_text())["runs"]
        for path in sorted((run_dir / "results").glob("*.json"))
    }


def damaged_results(run_dir: Path, kept: Mapping[str, list[dict[str, Any]]]) -> tuple[int, list[str]]:
    """How many result files the folder holds, and what is wrong with its results: a file the suite's own
    reader refuses or that names another case, a result finished before the fault (``kept``, from
    ``stored_runs``) that is gone or whose measured runs changed."""
    files = sorted((run_dir / "results").glob("*.json"))
    problems = []
    for path in files:
        try:
            result = load_result(path)
        except TrainperfError as exc:
            problems.append(f"{path.name} unreadable: {str(exc)[-120:]}")
            continue
        if result.case_id != path.stem:
            problems.append(f"{path.name} holds the result of {result.case_id}")
        elif path.stem in kept and [run.to_dict() for run in result.runs] != kept[path.stem]:
            problems.append(f"{path.name}: the runs measured before the fault changed")
    problems += [
        f"{case}: finished before the fault, now missing"
        for case in kept
        if not (run_dir / "results" / f"{case}.json").is_file()
    ]
    return len(files), problems


def case_verdicts(run_dir: Path) -> dict[str, str]:
    """Each readable result's verdict (its outcome when it has no verdict)."""
    found = {}
    for path in sorted((run_dir / "results").glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except ValueError:
            continue
        found[path.stem] = str((data.get("verdict") or {}).get("verdict") or data.get("outcome"))
    return found


def settle(
    drill: Drill,
    note: Callable[..., None],
    kept: Mapping[str, list[dict[str, Any]]] | None = None,
    grace_s: float = 15.0,
) -> None:
    """What a fault left, measured: the processes of the drill's sessions still alive after
    ``grace_s`` (by their suite tag), the run folder's results (each must read back whole, those
    finished before the fault unchanged) and each case's verdict. A row that left a process or
    damaged a result fails here, after its figures went to ``note``; the processes are ended."""
    left = drill.processes_left(grace_s)
    described = [f"pid {pid} ({_command(pid)})" for pid in left]
    kill_all(left)
    assert drill.output is not None
    folder = run_folder(drill.output)
    count, problems = damaged_results(folder, kept or {}) if folder else (0, [])
    results = f"{count} of {count} intact" if not problems else f"damaged: {'; '.join(problems)}"
    if kept:
        results += f" ({len(kept)} finished before the fault)"
    note(
        processes_left=len(left),
        results=results if folder else "no run folder",
        verdicts=case_verdicts(folder) if folder else {},
    )
    assert not left, f"processes left by the run: {described}"
    assert not problems, f"results damaged: {problems}"


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:120]
    except OSError:
        return "gone"
