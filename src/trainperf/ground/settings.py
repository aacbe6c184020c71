"""Run settings, read straight down: command line > TRAINPERF_* environment > ini > default.

One table of options serves the pytest plugin and the CLI alike.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainperf.errors import TrainperfError
from trainperf.ground.option_values import (
    baseline_mode,
    boolean,
    count,
    fraction,
    kernel_clock,
    night_date,
    plant_spec,
    positive_float,
    positive_int,
    seconds,
)
from trainperf.measure.host_turns import parse_patterns
from trainperf.paths import SESSION_FILE
from trainperf.store.url import normalise_url, store_off
from trainperf.traces.kernel_steps import DEFAULT_WINDOW


@dataclass(frozen=True, slots=True)
class OptionSpec:
    name: str
    """Attribute name; the flag is ``--perf-<name with dashes>``, the variable ``TRAINPERF_<NAME>``."""
    help: str
    default: Any
    parse: Callable[[str], Any] = str
    flag: bool = False

    @property
    def cli(self) -> str:
        return "--perf-" + self.name.replace("_", "-")

    @property
    def env(self) -> str:
        return "TRAINPERF_" + self.name.upper()

    @property
    def ini(self) -> str:
        return "perf_" + self.name


@dataclass(frozen=True, slots=True)
class Shard:
    """The value of ``--perf-shard K/N``: parsed here, where a malformed option is refused at start;
    the fleet's split (``fleet.shard``) and merge read it."""

    index: int
    """1-based: shards 1/N to N/N."""
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """``K/N`` with 1 <= K <= N; a ValueError whose text names the fix."""
    index, slash, count = str(text).strip().partition("/")
    if not slash or not index.strip().isdigit() or not count.strip().isdigit():
        raise ValueError(f"{text!r} is not K/N with whole numbers: give e.g. 1/2 for the first of two shards")
    shard = Shard(int(index), int(count))
    if shard.count < 1 or not 1 <= shard.index <= shard.count:
        raise ValueError(
            f"shard {shard} does not exist: K runs from 1 to N (1/{max(shard.count, 1)} .. "
            f"{max(shard.count, 1)}/{max(shard.count, 1)})"
        )
    return shard


def _shard(text: str) -> str:
    return str(parse_shard(text))  # the canonical K/N


OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec("output", "folder for run folders (one per run)", "reports"),
    OptionSpec("baselines", "baselines folder (<class>/<case-id>.json)", "baselines"),
    OptionSpec(
        "update_baselines", "write baselines from this run and show what changed", False, boolean, flag=True
    ),
    OptionSpec("repeats", "fresh child processes per case (pooled)", 1, positive_int),
    OptionSpec(
        "baseline_repeats",
        "fresh runs per case when writing baselines (a single process can be slow or fast as a whole)",
        3,
        positive_int,
    ),
    OptionSpec(
        "confirm",
        "fresh runs that must confirm a timing regression before it fails (0: fail on the first)",
        2,
        count,
    ),
    OptionSpec(
        "steps",
        "optimizer steps per run, over a case's own count too "
        "(default: the case's own, else 40 on GPU, 16 on CPU)",
        None,
        positive_int,
    ),
    OptionSpec(
        "plan_steps",
        "run a case only as many steps as its baseline's run-to-run noise needs for the gate to catch a "
        "5% slowdown as often as at full length (docs/fleet.md)",
        False,
        boolean,
        flag=True,
    ),
    OptionSpec("timeout", "wall-clock limit per child, seconds", 1800.0, positive_float),
    OptionSpec("gpu_class", "use this GPU class instead of the detected one", None),
    OptionSpec("strict", "fail on noisy, new, and environment changes too", False, boolean, flag=True),
    OptionSpec(
        "emulate",
        "cap memory to this smaller GPU class (e.g. maxq on an H200): its memory and OOM verdicts; "
        "timing is not gated and nothing is baselined",
        None,
    ),
    OptionSpec("resume", "resume this run folder: cases with results there are judged, not re-run", None),
    OptionSpec(
        "plant_slowdown",
        "make every step this fraction slower (to check the gate); never baselined",
        0.0,
        fraction,
    ),
    OptionSpec(
        "plant",
        "plant a regression of one nature in every child, to check the diagnosis: attention[:N], composite, "
        "host[:FRACTION] or memory[:MIB]; never baselined",
        None,
        plant_spec,
    ),
    OptionSpec(
        "diagnose",
        "on a confirmed timing, energy or memory regression, profile one more run of the case and name "
        "where the time or memory went (off: no extra run)",
        True,
        boolean,
    ),
    OptionSpec(
        "progress_interval", "seconds between progress lines of a running case (0: off)", 30.0, seconds
    ),
    OptionSpec(
        "python", "Python interpreter for the children of every case (default: each case's environment)", None
    ),
    OptionSpec(
        "env",
        "point workload environments at existing interpreters: NAME=PYTHON[,NAME=PYTHON] "
        "(also TRAINPERF_ENV_<NAME>=PYTHON; default .venvs/NAME/bin/python)",
        None,
    ),
    OptionSpec(
        "trace",
        "profile the last steps of each run with torch.profiler (left out of the timing metrics) and "
        "analyse the trace: GPU busy/idle, kernel categories, host-bound gaps",
        False,
        boolean,
        flag=True,
    ),
    OptionSpec(
        "kernel_steps",
        "early steps of each GPU run whose kernel time is recorded (CUPTI, through the PyTorch profiler; "
        "left out of the timing): kernel time is judged against the class, the rest of a step on this "
        "runner only (0: off, wall time only)",
        DEFAULT_WINDOW,
        count,
    ),
    OptionSpec(
        "kernel_clock",
        "how a GPU child reads its kernel records: cupti (CUPTI's Activity API directly, the device's work "
        "alone: a few microseconds a record), profiler (through the PyTorch profiler: about 30 us a "
        "record), auto (cupti where the process's CUPTI library answers, else profiler)",
        "auto",
        kernel_clock,
    ),
    OptionSpec(
        "store",
        "results history: sqlite:///PATH, postgresql://user@host:port/db, or off (default: a SQLite file in "
        "the per-user data folder, e.g. ~/.local/share/trainperf/history.sqlite)",
        None,
    ),
    OptionSpec(
        "baseline",
        "judge against: file (baselines/<class>/), history (this runner's last accepted runs), auto "
        "(history once it holds --perf-history-runs accepted runs of the case, the file before)",
        "auto",
        baseline_mode,
    ),
    OptionSpec("runner", "this runner's name in the results history (default: host/GPU UUID)", None),
    OptionSpec(
        "history_runs", "accepted runs of the runner's history a case is judged against", 10, positive_int
    ),
    OptionSpec(
        "gpu_wait",
        "seconds to wait before a run for its GPU to be free of foreign processes and throttling; a run "
        "that starts or ends beside one is contaminated (timing shown, not judged)",
        300.0,
        seconds,
    ),
    OptionSpec(
        "silent_timeout",
        "seconds a child may write nothing (no step, no output) before it is killed as hung (0: never)",
        600.0,
        seconds,
    ),
    OptionSpec(
        "require_idle_gpu",
        "fail a case whose GPU is busy (a foreign process) or throttled before it starts, instead of "
        "measuring it",
        False,
        boolean,
        flag=True,
    ),
    OptionSpec(
        "shard",
        "run shard K of N (K/N, from 1/N to N/N) of the selection, split by expected duration; "
        "`trainperf merge` joins the shards' run folders",
        None,
        _shard,
    ),
    OptionSpec(
        "budget",
        "minutes this session may take: the most valuable cases first (a recent change, the longest "
        "unrun), and no case started that would not end in time (those left out are skipped)",
        None,
        positive_float,
    ),
    OptionSpec(
        "night",
        "run the class's plan for this night (YYYY-MM-DD or today, UTC): its core tier, the rotating cases "
        "of its weekday and the promoted ones; the rest is deselected (docs/fleet.md)",
        None,
        night_date,
    ),
    OptionSpec(
        "night_budget",
        "GPU-minutes a night should take: the night's line says when its plan is over",
        None,
        positive_float,
    ),
    OptionSpec(
        "host_lock",
        "a lock file the runs sharing this host take turns by (shards, pytest -n workers, studies on its "
        "other GPUs): their children run side by side, a case named by --perf-alone with nothing beside it",
        None,
    ),
    OptionSpec(
        "alone",
        "cases that run alone on the host under --perf-host-lock: comma-separated globs over case ids, e.g. "
        "'*-short-*,rl_trl-*' (host-bound cases, which a neighbour on the CPU slows)",
        (),
        parse_patterns,
    ),
    OptionSpec(
        "night_promote",
        "where the night's promoted cases come from: store (the results history), a run folder, a folder of "
        "run folders, a file of case ids, or off (default: store)",
        None,
    ),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Every option's resolved value (``resolve``; ``night``: an ISO date, ``today`` resolved); each default
    is declared once, in ``OPTIONS``."""

    output: Path
    baselines: Path
    update_baselines: bool
    repeats: int
    baseline_repeats: int
    confirm: int
    steps: int | None
    timeout: float
    plan_steps: bool
    gpu_class: str | None
    strict: bool
    emulate: str | None
    resume: Path | None
    plant_slowdown: float
    progress_interval: float
    python: str | None
    env: str | None
    plant: str | None
    diagnose: bool
    trace: bool
    kernel_steps: int
    kernel_clock: str
    require_idle_gpu: bool
    gpu_wait: float
    silent_timeout: float
    store: str | None
    baseline: str
    runner: str | None
    history_runs: int
    shard: str | None
    budget: float | None
    night: str | None
    night_budget: float | None
    night_promote: str | None
    host_lock: Path | None
    alone: tuple[str, ...]
    fleet: dict[str, Any] | None = None
    """Recorded in run.json: the shard and the whole split (``fleet.session_share``), set at collection."""


def resolve(cli: dict[str, Any], ini: Callable[[str], Any], rootdir: Path) -> Settings:
    """Resolve every option; a bad value is one line naming the option and where it came from."""
    if (rootdir / SESSION_FILE).is_file():
        # `--perf-resume DIR` in two words: pytest rooted itself in DIR, where no baselines are (all `new`).
        raise TrainperfError(
            f"pytest took its rootdir from the run folder {rootdir}: give it as --perf-resume={rootdir} "
            "(with '='), from the project's root"
        )
    values: dict[str, Any] = {}
    for spec in OPTIONS:
        raw, origin = cli.get(spec.name), spec.cli
        if raw == "" and not spec.flag:
            # `--perf-resume "$dir"` with an empty variable: taken as unset, it would silently run
            # something else (every case afresh) than what was asked.
            raise TrainperfError(
                f"{spec.cli} was given empty ({spec.help}): give a value, or leave the option out"
            )
        if raw is None or (spec.flag and raw is False):
            raw, origin = os.environ.get(spec.env), spec.env
        if raw is None or raw == "":
            ini_value = ini(spec.ini)
            raw, origin = (ini_value, f"ini {spec.ini}") if ini_value not in (None, "", []) else (None, "")
        if raw is None:
            values[spec.name] = spec.default
            continue
        try:
            values[spec.name] = (
                raw if isinstance(raw, (bool, int, float)) and not isinstance(raw, str) else spec.parse(raw)
            )
        except ValueError as exc:
            raise TrainperfError(f"{origin}={raw!r} is not valid: {spec.help} ({exc})") from exc
    for key in ("output", "baselines", "resume", "host_lock"):
        if values[key] is not None:
            path = Path(values[key])
            values[key] = path if path.is_absolute() else rootdir / path
    if values["python"] is not None:
        # Absolute, so that it still names the interpreter from the child's working folder; abspath,
        # not resolve(): resolving a venv's python symlink would leave the venv.
        values["python"] = os.path.abspath(values["python"])
        if not os.path.isfile(values["python"]):
            raise TrainperfError(f"--perf-python {values['python']} is not a Python interpreter")
    if values["env"] is not None:
        from trainperf.families.envs import parse_overrides

        parse_overrides(values["env"])  # a malformed value is a usage error at start, not per case
    if values["store"] is not None and not store_off(values["store"]):
        normalise_url(values["store"])  # a malformed URL is refused at start, not after the run
    if values["resume"] is not None and not values["resume"].is_dir():
        raise TrainperfError(
            f"--perf-resume {values['resume']} is not a run folder; give reports/<run> of an earlier run"
        )
    return Settings(**values)
