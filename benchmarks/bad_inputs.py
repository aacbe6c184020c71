"""Bad inputs as a user types them, each run for real, and what the suite answered: the count of
clear refusals, tracebacks, silent accepts and leaked secrets (docs/faults.md, "Bad input").

    python benchmarks/bad_inputs.py [--only NAME,...] [--json FILE]

Every probe is a whole command (pytest with the plugin on one tiny `cpu` case, or a `trainperf`
command) with one bad value in it. An answer is **clear** when the command exits non-zero (and not
with pytest's "no tests" 5), prints no traceback, and says in one line of at most 400 characters
what was wrong and what to do instead (a word such as "give", "use", "run", "point", "write",
"set" or an option named in it). A probe whose bad value was accepted runs the tiny case (about
10 s); one that ran past 300 s is counted as a silent accept. The secret of the store URL probes
(`s3cret`) must appear nowhere in the output.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASE = "sft_hf-qwen3_tiny-lora-short-b4"
SECRET = "s3cret"
PROBE_TIMEOUT_S = 300
LINE_LIMIT = 400
FIX_WORDS = re.compile(r"\b(give|use|run|point|write|set|pass|install|remove|choose|add|take)\b|--[a-z]")


@dataclass(frozen=True, slots=True)
class Probe:
    name: str
    argv: tuple[str, ...]
    """After the command's head: pytest's options, or a trainperf subcommand and its arguments."""
    pytest: bool = True
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Answer:
    probe: str
    verdict: str
    """clear, unclear, traceback, silent or leak."""
    exit_code: int
    seconds: float
    line: str
    """The line that answered (the error's), or the output's last line."""


def pytest_probes(work: Path) -> list[Probe]:
    bad = {
        "repeats zero": "--perf-repeats=0",
        "repeats word": "--perf-repeats=two",
        "baseline repeats negative": "--perf-baseline-repeats=-1",
        "confirm word": "--perf-confirm=x",
        "steps zero": "--perf-steps=0",
        "timeout negative": "--perf-timeout=-5",
        "silent timeout negative": "--perf-silent-timeout=-5",
        "gpu wait word": "--perf-gpu-wait=soon",
        "confirm negative": "--perf-confirm=-3",
        "plant slowdown negative": "--perf-plant-slowdown=-0.1",
        "plant slowdown over ten": "--perf-plant-slowdown=50",
        "plant unknown": "--perf-plant=nonsense",
        "progress interval word": "--perf-progress-interval=often",
        "kernel steps negative": "--perf-kernel-steps=-1",
        "kernel clock unknown": "--perf-kernel-clock=nvtx",
        "baseline mode unknown": "--perf-baseline=yesterday",
        "history runs zero": "--perf-history-runs=0",
        "shard beyond count": "--perf-shard=3/2",
        "shard words": "--perf-shard=a/b",
        "budget negative": "--perf-budget=-10",
        "night word": "--perf-night=someday",
        "night budget zero": "--perf-night-budget=0",
        "alone bad pattern": "--perf-alone=[",
        "baselines missing": "--perf-baselines=/nonexistent/baselines",
        "resume missing": "--perf-resume=/nonexistent/run",
        "resume empty": "--perf-resume=",
        "python missing": "--perf-python=/nonexistent/bin/python",
        "env malformed": "--perf-env=garbage",
        "gpu class unknown": "--perf-gpu-class=tpu9",
        "emulate unknown": "--perf-emulate=tpu9",
        "store port malformed": f"--perf-store=postgresql://user:{SECRET}@127.0.0.1:notaport/db",
        "store scheme unknown": "--perf-store=mysql://user@host/db",
        "output unwritable": "--perf-output=/proc/trainperf-reports",
        "host lock unwritable": "--perf-host-lock=/proc/trainperf.lock",
    }
    probes = [Probe(name, (value,)) for name, value in bad.items()]
    probes.append(Probe("repeats from the environment", (), env=(("TRAINPERF_REPEATS", "zero"),)))
    probes.append(Probe("unknown marker class", ("-m", "tpu9")))
    return probes


def cli_probes(work: Path) -> list[Probe]:
    listed = work / "list.json"
    listed.write_text("[1, 2, 3]")
    corrupt = work / "corrupt-run"
    (corrupt / "results").mkdir(parents=True)
    (corrupt / "results" / "x.json").write_text("{not json")
    empty = work / "empty"
    empty.mkdir()
    store = f"sqlite:///{work}/h.sqlite"
    # An empty store of the right schema: the probes below ask it for what it does not hold.
    subprocess.run(
        [
            sys.executable,
            "-c",
            f"from trainperf.store.interface import open_history_store; open_history_store({store!r})",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        check=True,
    )
    commands = {
        "ingest a list-shaped result": ("ingest", str(listed), "--store", store),
        "ingest a missing folder": ("ingest", "/nonexistent/run", "--store", store),
        "report a corrupt result": ("report", str(corrupt)),
        "report an empty folder": ("report", str(empty)),
        "compare missing runs": ("compare", "/nonexistent/a", "/nonexistent/b"),
        "history with a bad store port": ("history", CASE, "--store", f"postgresql://u:{SECRET}@h:port/db"),
        "history of an unknown case": ("history", "no-such-case", "--store", store),
        "merge missing folders": (
            "merge",
            "--output",
            str(work / "merged"),
            "/nonexistent/a",
            "/nonexistent/b",
        ),
        "export an unknown format": ("export", "--format", "csv9", "--store", store),
        "cost of a missing folder": ("cost", "/nonexistent/baselines"),
        "baselines of an unknown class": ("baselines", "--gpu-class", "tpu9"),
        "ab with a missing environment": (
            "ab",
            "--env-a",
            "/nonexistent/venv",
            "--env-b",
            "/nonexistent/b",
            "--",
            "-k",
            CASE,
        ),
        "bisect with a malformed range": ("bisect", "trl", "1.6.0-1.7.0", "--", "-m", "cpu"),
        "dashboard into an unwritable folder": (
            "dashboard",
            "--store",
            store,
            "--output",
            "/proc/trainperf-site",
        ),
        "dashboard since a bad date": (
            "dashboard",
            "--store",
            store,
            "--output",
            str(work / "site"),
            "--since",
            "yesterday-ish",
        ),
        "env of an unknown class": ("env", "--gpu-class", "tpu9", "list"),
        "upgrade report of a missing folder": ("upgrade-report", "/nonexistent/ab"),
    }
    return [Probe(name, argv, pytest=False) for name, argv in commands.items()]


def command(probe: Probe, work: Path) -> list[str]:
    if not probe.pytest:
        return [sys.executable, "-m", "trainperf.cli", *probe.argv]
    head = [sys.executable, "-m", "pytest", "perf_tests", "-p", "no:cacheprovider", "-q", "-k", CASE]
    marker = [] if "-m" in probe.argv else ["-m", "cpu"]
    return [*head, *marker, "--perf-output", str(work / "reports"), "--perf-store", "off", *probe.argv]


def classify(probe: str, exit_code: int | None, output: str, seconds: float) -> Answer:
    """The verdict on one answer (pure: the tests feed it outputs)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(("ERROR:", "error:", "trainperf:", "UsageError"))]
    line = errors[0] if errors else (lines[-1] if lines else "")
    code = -1 if exit_code is None else exit_code
    if SECRET in output:
        verdict = "leak"
    elif "Traceback (most recent call last)" in output:
        verdict = "traceback"
    elif exit_code is None or exit_code in (0, 5):
        verdict = "silent"
    elif len(line) <= LINE_LIMIT and FIX_WORDS.search(line):
        verdict = "clear"
    else:
        verdict = "unclear"
    return Answer(probe, verdict, code, round(seconds, 1), line[:LINE_LIMIT])


def run(probe: Probe, work: Path) -> Answer:
    env = {**os.environ, **dict(probe.env), "PYTHONPATH": str(ROOT / "src")}
    started = time.monotonic()
    try:
        done = subprocess.run(
            command(probe, work),
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,  # the exit status is what is judged
        )
        return classify(probe.name, done.returncode, done.stdout + done.stderr, time.monotonic() - started)
    except subprocess.TimeoutExpired:
        return classify(probe.name, None, "", time.monotonic() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated probe names")
    parser.add_argument("--json", type=Path, help="write every answer here too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="trainperf-bad-inputs-") as folder:
        work = Path(folder)
        probes = pytest_probes(work) + cli_probes(work)
        if args.only:
            wanted = set(args.only.split(","))
            probes = [probe for probe in probes if probe.name in wanted]
        answers = []
        for probe in probes:
            answer = run(probe, work)
            answers.append(answer)
            head = f"{answer.verdict:<9} {answer.exit_code:>3} {answer.seconds:>6.1f}s"
            print(f"{head}  {probe.name}: {answer.line}")
    counts = {
        verdict: sum(a.verdict == verdict for a in answers)
        for verdict in ("clear", "unclear", "traceback", "silent", "leak")
    }
    print(f"{len(answers)} bad inputs: " + ", ".join(f"{n} {verdict}" for verdict, n in counts.items()))
    if args.json:
        args.json.write_text(
            json.dumps({"answers": [asdict(a) for a in answers], "counts": counts}, indent=1)
        )
    return 0 if counts["clear"] == len(answers) else 1


if __name__ == "__main__":
    sys.exit(main())
