"""A result's run records (``trainperf.run_record``): typed fields, read from and written back to the
JSON objects results and baselines have always stored, key for key."""

from __future__ import annotations

import dataclasses
import json
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from trainperf.child_report_record import FrameworkSetup, MemorySnapshot
from trainperf.host_index_record import CpuContext, HostIndex
from trainperf.paths import REPO_ROOT
from trainperf.result import CaseResult
from trainperf.run_checks_record import GpuCheck, GpuState, HostTurn, IdleCheck, RunContamination
from trainperf.run_record import GpuFigures, KernelShare, RunRecord

STORED = {
    "dir": "cases/sft_hf-qwen3_tiny-lora-short-b4/r1",
    "returncode": 0,
    "steps_requested": 16,
    "wall_s": 41.5,
    "outcome": "ok",
    "timeline": {"build_s": 2.5, "setup_s": 1.0, "train_s": 30.0},
    "steps": 16,
    "warmup_steps": 2,
    "sm_clock_median_mhz": 1980,
    "clock_event_reasons": 4,
    "kernel_groups_ms": {"GEMM": 120.5},
    "kernel_top": [{"name": "sm90_gemm", "group": "GEMM", "ms": 60.25, "count": 14}],
    "idle_after": [{"idle": True, "mem_used_gib": 0.5, "waited_s": 0.0}],
    "gpu_before": {
        "clean": False,
        "foreign_processes": {"0": [[1275, 5305794560]]},
        "gpus": [
            {
                "clock_event_reasons": 4,
                "device": "0",
                "mem_used_b": 5809111040,
                "power_limit_w": 700.0,
                "processes": [[1275, 5305794560]],
                "sm_clock_max_mhz": 1980,
                "sm_clock_mhz": 1980,
                "temperature_c": 41,
            }
        ],
        "throttled": {"0": ["sw_power_cap"]},
        "waited_s": 0.0,
    },
    "contamination": {"foreign_process": True, "reasons": ["GPU 0 busy when the run started: pid 1275"]},
    "host_turn": {"alone": True, "waited_s": 12.5},
    "memory_peak_step": None,
    "purpose": "measurement",
}


def test_a_stored_run_reads_as_typed_fields_and_writes_back_unchanged() -> None:
    run = RunRecord.from_dict(STORED)
    assert run.wall_s == 41.5 and run.steps_requested == 16 and run.purpose == "measurement"
    assert run.kernel_top == [KernelShare("sm90_gemm", "GEMM", 60.25, 14)]
    assert run.memory_peak_step is None and run.memory_peak_late  # a peak after the last step
    assert run.idle_after == [IdleCheck(idle=True, mem_used_gib=0.5, waited_s=0.0)]
    assert run.gpu_before is not None and run.gpu_before.foreign_processes == {"0": ((1275, 5305794560),)}
    assert run.gpu_before.gpus and run.gpu_before.gpus[0].power_limit_w == 700.0
    assert run.contamination == RunContamination(("GPU 0 busy when the run started: pid 1275",), True)
    assert run.contamination.touched_gpu  # a record from before the split read as the GPU's
    assert run.host_turn == HostTurn(alone=True, waited_s=12.5)
    assert run.unread == {}
    # Compared as text: 1980 stays an int, as it was stored.
    assert json.dumps(run.to_dict(), sort_keys=True) == json.dumps(STORED, sort_keys=True)


def test_a_key_not_recorded_is_not_written() -> None:
    assert RunRecord().to_dict() == {}
    assert RunRecord(wall_s=3.0, memory_peak_step=4).to_dict() == {"wall_s": 3.0, "memory_peak_step": 4}


def test_what_this_trainperf_cannot_read_is_kept_as_written_and_never_read() -> None:
    stored = {"wall_s": "slow", "kernel_clock": None, "from_a_newer_trainperf": {"x": 1}, "steps": 3}
    run = RunRecord.from_dict(stored)
    assert run.wall_s is None and run.kernel_clock is None and run.steps == 3
    assert run.unread == {"wall_s": "slow", "kernel_clock": None, "from_a_newer_trainperf": {"x": 1}}
    assert run.to_dict() == stored


def test_a_run_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(TypeError, match="a run must be an object"):
        RunRecord.from_dict(["not", "a", "run"])


def test_every_stored_baselines_runs_read_in_full_and_write_back_unchanged() -> None:
    files = [p for p in sorted((REPO_ROOT / "baselines").rglob("*.json")) if "published" not in p.parts]
    assert files
    for path in files:
        data = json.loads(Path(path).read_text())
        result = CaseResult.from_dict(data, origin=str(path))
        assert all(not run.unread for run in result.runs), path  # every key the suite writes is a field
        assert result.to_dict()["runs"] == data["runs"], path


def test_a_check_around_a_run_keeps_what_it_cannot_read_as_written() -> None:
    stored = {"idle": "yes", "mem_used_gib": 0.5, "waited_s": 0.0, "from_a_newer_trainperf": 1}
    check = IdleCheck.from_dict(stored)
    assert check is not None and check.idle is None and check.mem_used_gib == 0.5
    assert check.unread == {"idle": "yes", "from_a_newer_trainperf": 1} and check.to_dict() == stored
    turn = HostTurn.from_dict({"alone": False, "waited_s": None})
    assert turn is not None and turn.to_dict() == {"alone": False, "waited_s": None}
    assert "beside the host's other runs" in turn.note(2)
    gpu = {"device": "0", "processes": [[7, "a lot"]], "mem_used_b": None, "power_limit_w": "700 W"}
    state = GpuState.from_dict(gpu)
    assert (
        state is not None
        and state.processes == ()
        and state.unread
        == {
            "processes": [[7, "a lot"]],
            "power_limit_w": "700 W",
        }
    )
    assert {**state.to_dict(), **gpu} == state.to_dict()  # every figure named, null where none was read
    assert GpuState.from_dict({"processes": []}) is None  # no device: not a reading


def test_a_stored_check_that_would_not_write_back_as_it_was_is_kept_aside_whole() -> None:
    # A GPU reading of an older writer that named no figures: written back, it would name them as null.
    stored = {"gpu_before": {"gpus": [{"device": "0"}]}, "contamination": ["not", "a", "record"]}
    run = RunRecord.from_dict(stored)
    assert run.gpu_before is None and run.contamination is None and run.unread == stored
    assert run.to_dict() == stored
    assert GpuCheck.from_dict("not a check") is None


def test_a_run_beside_the_judge_reads_its_contamination_as_the_writer_wrote_it() -> None:
    written = RunContamination(("host CPU: busy",), foreign_process=False, on_gpu=False)
    run = RunRecord.from_dict(RunRecord(contamination=written).to_dict())
    assert run.contamination == written and not written.touched_gpu


RECORDED = (
    "gpu_before",
    "contamination",
    "idle_after",
    "host_turn",
    "host_index",
    "trace",
    "setup",
    "memory_snapshot",
    "per_gpu",
)
"""The run's keys read as records of their own: each committed one must read in full."""
OLDER_KEYS = {"host_index": {"best"}}
"""Keys an older trainperf wrote and this one does not: kept aside and written back, never read."""


def _committed_texts() -> Iterator[tuple[str, str]]:
    """Every JSON file committed that may hold results: baselines, and the measurements' files, those
    in their archives too."""
    measurements = REPO_ROOT / "docs" / "measurements"
    for path in [*sorted((REPO_ROOT / "baselines").rglob("*.json")), *sorted(measurements.rglob("*.json*"))]:
        yield str(path), path.read_text()
    for archive in sorted(measurements.rglob("*.tar.xz")):
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                if member.isfile() and member.name.endswith((".json", ".jsonl")):
                    handle = tar.extractfile(member)
                    assert handle is not None
                    yield f"{archive}:{member.name}", handle.read().decode()


def _stored_runs(value: Any) -> Iterator[dict[str, Any]]:
    """The runs of every result object in a JSON value (a result file, a merged report, a history)."""
    if isinstance(value, dict):
        if "case_id" in value and isinstance(value.get("runs"), list):
            yield from value["runs"]
        for item in value.values():
            yield from _stored_runs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _stored_runs(item)


def _json_values(text: str) -> list[Any]:
    try:
        return [json.loads(text)]
    except ValueError:  # JSON lines
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def _kept_aside(value: Any) -> set[str]:
    """The keys a record, and every record inside it, keeps aside (``unread``)."""
    if isinstance(value, list | tuple):
        return set().union(*(_kept_aside(item) for item in value))
    if not dataclasses.is_dataclass(value):
        return set()
    inner = (_kept_aside(getattr(value, f.name)) for f in dataclasses.fields(value) if f.name != "unread")
    return set(getattr(value, "unread", {})).union(*inner)


def test_every_committed_run_reads_its_records_in_full_and_writes_back_unchanged() -> None:
    seen = dict.fromkeys(RECORDED, 0)
    for origin, text in _committed_texts():
        for stored in (run for value in _json_values(text) for run in _stored_runs(value)):
            run = RunRecord.from_dict(stored)
            # Compared as text: a float stays a float, an int an int, and no key is lost or added.
            assert json.dumps(run.to_dict(), sort_keys=True) == json.dumps(stored, sort_keys=True), origin
            for key in RECORDED:
                if key in stored:
                    assert key not in run.unread, (origin, key)
                    assert _kept_aside(getattr(run, key)) <= OLDER_KEYS.get(key, set()), (origin, key)
                    seen[key] += 1
    assert all(seen[key] for key in RECORDED if key != "host_turn"), seen  # no committed run took turns


def test_a_host_index_reads_its_rates_and_where_it_ran() -> None:
    stored = {
        "index": 0.6669,
        "median": 0.6175,
        "python_ops_per_us": 2.9594,
        "dispatch_ops_per_us": 0.1503,
        "seconds": 0.83,
        "cpu_context": {"cpu": 3, "siblings": [35], "siblings_busy": None, "others_busy": 0.02, "steal": 0.0},
    }
    probe = HostIndex.from_dict(stored)
    assert probe is not None and probe.index == 0.6669 and probe.unread == {}
    assert probe.cpu_context == CpuContext(3, (35,), None, 0.02, 0.0)
    assert json.dumps(probe.to_dict(), sort_keys=True) == json.dumps(stored, sort_keys=True)
    unobserved = {"index": 1.0, "cpu_context": None, "best": 1.2}  # off Linux; an older writer's best round
    probe = HostIndex.from_dict(unobserved)
    assert (
        probe is not None and probe.cpu_context is None and probe.unread == {"cpu_context": None, "best": 1.2}
    )
    assert probe.to_dict() == unobserved


def test_what_a_child_reported_reads_as_records() -> None:
    setup = {
        "phases": {"ray_s": 19.2, "inputs_s": 30.0},
        "vllm": {"compile_cache": "miss", "compile_s": 27.19, "graph_capture_s": 0.0},
        "first_step_extra_s": 16.5,
        "total_s": 209.7,
        "line": "set-up 210 s: Ray 19 s, driver+data 30 s",
    }
    snapshot = {"bytes": 505, "file": "m.pickle", "html": "m.html"}
    run = RunRecord.from_dict({"setup": setup, "memory_snapshot": snapshot})
    assert isinstance(run.setup, FrameworkSetup) and run.setup.line == setup["line"]
    assert run.setup.vllm == {"compile_cache": "miss", "compile_s": 27.19, "graph_capture_s": 0.0}
    assert run.memory_snapshot == MemorySnapshot(file="m.pickle", file_bytes=505, html="m.html")
    assert run.to_dict() == {"setup": setup, "memory_snapshot": snapshot}
    odd = {"phases": {"ray_s": "19 s"}, "line": "set-up"}
    read = FrameworkSetup.from_dict(odd)
    assert read is not None and read.phases is None and read.to_dict() == odd


def test_a_gpus_figures_are_read_by_metric_name_beside_its_device_and_rank() -> None:
    stored = [
        {"gpu": "0", "rank": 0, "device_mem_peak_gib": 26.2, "power_peak_w": 266},
        {"gpu": "1", "rank": 1},
    ]
    run = RunRecord.from_dict({"per_gpu": stored})
    assert run.per_gpu == [
        GpuFigures("0", 0, {"device_mem_peak_gib": 26.2, "power_peak_w": 266}),
        GpuFigures("1", 1),
    ]
    assert run.to_dict() == {"per_gpu": stored}
    newer = GpuFigures.from_dict({"gpu": "0", "rank": 0, "uuid": "GPU-1", "power_mean_w": None})
    assert (
        newer is not None and newer.figures == {} and newer.unread == {"uuid": "GPU-1", "power_mean_w": None}
    )
    assert GpuFigures.from_dict({"gpu": 0, "rank": 0}) is None
