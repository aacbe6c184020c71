"""verl's per-step metrics, read from its file logger (JSON lines) or its console lines, turned
into this suite's step records (the ``steps.jsonl`` contract, generic for RL families):

``{"step", "duration_s", "tokens", "phases": {name: s}, "throughput", "max_allocated_gib", ...}``

Formats (the same in verl 0.7.0, 0.8.0 and 0.9.1):

- file logger, ``verl/utils/tracking.py`` ``FileLogger.log`` (0.9.1 :543-545): one
  ``{"step": N, "data": {metric: value}}`` per line, in the file ``VERL_FILE_LOGGER_PATH`` names.
- console, ``verl/utils/logger/aggregate_logger.py`` ``concat_dict_to_str``: ``step:N - k:v - ...``
  with each number through ``pprint.pformat`` (numpy 2 prints ``np.float64(1.5)``), usually
  behind Ray's ``(TaskRunner pid=...)`` prefix.

Names that differ between releases: peak memory is ``perf/max_memory_allocated_gb`` in the
0.7 FSDP workers and ``actor/perf/...`` / ``critic/perf/...`` in 0.8+ (the trainer prefixes the
engine worker's metrics, ``ray_trainer.py`` ``rename_dict``). Phases are ``timing_s/<name>``
(``ray_trainer.py`` ``marked_timer``); names with a ``/`` (``agent_loop/...``) are breakdowns
inside ``gen`` and the profiler markers run outside the step, so neither is a phase.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from trainperf.errors import TrainperfError

METRICS_FILE = "verl_metrics.jsonl"
"""The file logger's JSONL a verl case's run folder keeps (``workloads.rl_verl``)."""
LOG_FILE = "verl.log"
"""verl's console output in a case's run folder."""
STEP_TIMER = "timing_s/step"
NOT_PHASES = frozenset({"step", "start_profile", "stop_profile"})
MEMORY_FIELDS = {
    "max_allocated_gib": "max_memory_allocated_gb",
    "max_reserved_gib": "max_memory_reserved_gb",
    "cpu_memory_used_gib": "cpu_memory_used_gb",
}
MEMORY_SCOPES = ("actor/perf/", "critic/perf/", "perf/")
EXTRA_FIELDS = {
    "response_length_mean": "response_length/mean",
    "prompt_length_mean": "prompt_length/mean",
    "response_clip_ratio": "response_length/clip_ratio",
    "mfu_actor": "perf/mfu/actor",
}
_CONSOLE = re.compile(r"(?:^|\s)step:(\d+) - (.*)$")
_WRAPPED = re.compile(r"^[A-Za-z_.0-9]+\((.*)\)$")


def _number(text: str) -> float | None:
    text = text.strip()
    wrapped = _WRAPPED.match(text)  # np.float64(1.5), np.int64(3)
    if wrapped:
        text = wrapped.group(1)
    if text in ("True", "False"):
        return float(text == "True")
    try:
        return float(text)
    except ValueError:
        return None


def parse_console_line(line: str) -> tuple[int, dict[str, float]] | None:
    match = _CONSOLE.search(line.rstrip())
    if not match:
        return None
    data = {}
    for item in match.group(2).split(" - "):
        key, sep, value = item.partition(":")
        number = _number(value) if sep else None
        if number is not None:
            data[key.strip()] = number
    return int(match.group(1)), data


def parse_jsonl_line(line: str) -> tuple[int, dict[str, Any]] | None:
    try:
        row = json.loads(line)
    except ValueError:
        return None  # a torn last line while verl is still writing it
    if not isinstance(row, dict) or "step" not in row or not isinstance(row.get("data"), dict):
        return None
    return int(row["step"]), row["data"]


def parse_text(text: str) -> list[tuple[int, dict[str, Any]]]:
    """Every step in a JSONL file or a console log (told apart by content); later duplicates win."""
    rows: dict[int, dict[str, Any]] = {}
    for line in text.splitlines():
        stripped = line.strip()
        parsed = parse_jsonl_line(stripped) if stripped.startswith("{") else parse_console_line(stripped)
        if parsed is not None:
            rows[parsed[0]] = parsed[1]
    return sorted(rows.items())


def _memory(data: dict[str, Any], suffix: str) -> float | None:
    values = [float(data[scope + suffix]) for scope in MEMORY_SCOPES if scope + suffix in data]
    return max(values) if values else None


def step_record(step: int, data: dict[str, Any]) -> dict[str, Any] | None:
    """One verl step as a record of this suite's contract; None without a step time."""
    if STEP_TIMER not in data:
        return None
    phases = {
        key.removeprefix("timing_s/"): float(value)
        for key, value in data.items()
        if key.startswith("timing_s/")
        and "/" not in key.removeprefix("timing_s/")
        and key.removeprefix("timing_s/") not in NOT_PHASES
    }
    record: dict[str, Any] = {
        "step": step,
        "duration_s": float(data[STEP_TIMER]),
        "tokens": int(data.get("perf/total_num_tokens", 0)),
        "phases": phases,
    }
    if "perf/throughput" in data:
        record["throughput"] = float(data["perf/throughput"])
    for field, suffix in MEMORY_FIELDS.items():
        value = _memory(data, suffix)
        if value is not None:
            record[field] = value
    for field, key in EXTRA_FIELDS.items():
        if key in data:
            record[field] = float(data[key])
    return record


def records_from_text(text: str) -> list[dict[str, Any]]:
    return [r for r in (step_record(step, data) for step, data in parse_text(text)) if r is not None]


def metrics_source(path: Path) -> Path:
    """The file to read: PATH itself, or, for a case's run folder (``cases/CASE/rN``), the file
    logger's JSONL the run kept, else verl's console log."""
    if path.is_dir():
        for name in (METRICS_FILE, LOG_FILE):
            if (path / name).is_file():
                return path / name
        raise TrainperfError(
            f"{path} is a folder without {METRICS_FILE} or {LOG_FILE}: give a verl case's run folder "
            "(cases/CASE/rN of a run folder), verl's file-logger JSONL or a console log"
        )
    if not path.is_file():
        raise TrainperfError(f"{path} does not exist: give verl's file-logger JSONL or a console log")
    return path


def read_records(path: Path) -> list[dict[str, Any]]:
    path = metrics_source(path)
    records = records_from_text(path.read_text(errors="replace"))
    if not records:
        raise TrainperfError(
            f"{path} has no verl step metrics (no 'timing_s/step'): give the JSONL of "
            "trainer.logger=[console,file] "
            "(VERL_FILE_LOGGER_PATH) or a console log with 'step:N - ...' lines"
        )
    return records


def remainder_s(record: dict[str, Any]) -> float:
    """The part of the step no phase explains (E3: 1.03 s with vLLM, 2.3 s with SGLang)."""
    return float(record["duration_s"]) - sum(record.get("phases", {}).values())
