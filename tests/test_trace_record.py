"""A result's trace record and profile summary as typed records: a committed baseline's, and the shapes
a CPU trace, a trace over the cap and a run without an allocator summary give, read back unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainperf.paths import REPO_ROOT
from trainperf.profile_record import ProfileSummary
from trainperf.store.results import load_result, save_result
from trainperf.trace_record import TraceRecord

BASELINE = REPO_ROOT / "baselines" / "h200" / "sft_hf-qwen3_8b-qlora-short-b4.json"


def _text(data: Any) -> str:
    return json.dumps(data, indent=1, sort_keys=True)


def test_a_committed_baseline_reads_its_trace_and_profile_typed_and_writes_them_back(tmp_path: Path) -> None:
    stored = json.loads(BASELINE.read_text())
    result = load_result(BASELINE)
    trace, profile = result.trace, result.profile
    assert trace is not None and trace.summary is not None and trace.summary.launch is not None
    assert trace.file == stored["trace"]["file"] and trace.file_bytes == stored["trace"]["bytes"]
    assert profile is not None and profile.kind == "gpu" and profile.memory.blocks
    assert profile.top_kernels[0].name == stored["profile"]["top_kernels"][0]["name"]
    save_result(tmp_path / "again.json", result)
    again = json.loads((tmp_path / "again.json").read_text())
    for key in ("trace", "profile"):
        assert _text(again[key]) == _text(stored[key]), key
    # The whole file but ``kernels``, which files written before ``roles_ms`` lack.
    assert _text({**again, "kernels": None}) == _text({**stored, "kernels": None})


def test_every_committed_baseline_keeps_its_trace_and_profile_as_stored() -> None:
    checked = 0
    for path in sorted((REPO_ROOT / "baselines").glob("*/*.json")):
        if path.parent.name == "published":  # published reference points, not results
            continue
        stored = json.loads(path.read_text())
        written = load_result(path).to_dict()
        for key in ("trace", "profile"):
            assert _text(written[key]) == _text(stored.get(key)), f"{path.name}: {key}"
            checked += stored.get(key) is not None
    assert checked >= 20


def test_a_cpu_trace_over_the_cap_reads_back_as_written() -> None:
    record = {
        "activities": ["CPU"], "profiled_steps": [4, 5], "raw_bytes": 9000, "bytes": 3000, "cap_mb": 0.001,
        "environment": {"CUDA_LAUNCH_BLOCKING": "1"}, "stop_error": "RuntimeError: x",
        "deleted": "0.0 MB compressed is over the 0.001 MB cap: analysed, then deleted",
        "rank_traces": ["r2.rank1.pt.trace.json.gz: deleted"],
        "summary": {
            "kind": "cpu", "steps": 2, "window_ms": 10, "busy_ms": 6.5, "busy_fraction": 0.65,
            "idle_ms": 3.5, "autograd_engine_ms": 0.5, "categories_ms": {"matmul": 4.0},
            "top": [{"name": "aten::mm", "category": "matmul", "total_ms": 4.0, "share": 1.0, "count": 2}],
        },
        "profile": {
            "kind": "cpu", "steps": 2, "step_ms": 5.0, "busy_ms": 3.0, "host_side_ms": 2.0,
            "idle_other_ms": 0.0, "device_ms": {"GEMM": 2.0}, "scope": "verl actor update",
            "top_kernels": [{"name": "aten::mm", "group": "GEMM", "ms": 2.0, "count": 1}],
            "memory": {"n/a": "CPU run: the allocator's blocks are the CUDA caching allocator's"},
        },
    }  # fmt: skip
    typed = TraceRecord.from_dict(record)
    assert typed is not None and typed.summary is not None and typed.summary.launch is None
    assert typed.summary.per_step(typed.summary.idle_ms) == 1.75 and typed.file is None
    assert typed.profile is not None and typed.profile.memory.unavailable and typed.profile.scope
    assert _text(typed.to_dict()) == _text(record)


def test_a_trace_without_its_analysis_keeps_its_error_and_no_summary() -> None:
    record = {"error": "the child wrote no trace (it ended before the profiled steps)", "activities": ["CPU"]}
    typed = TraceRecord.from_dict(record)
    assert typed is not None and typed.summary is None and typed.profile is None
    assert typed.to_dict() == record
    assert TraceRecord.from_dict(None) is None and TraceRecord.from_dict({}) is None
    assert ProfileSummary.from_dict({"kind": "gpu"}) is None  # not a summary: no profile, not a crash


def test_what_a_trace_record_cannot_read_is_kept_as_written() -> None:
    record = {
        "error": "x",
        "activities": ["CPU"],
        "profiled_steps": ["4"],
        "from_a_newer_trainperf": {"x": 1},
    }
    typed = TraceRecord.from_dict(record)
    assert typed is not None and typed.profiled_steps is None and typed.activities == ("CPU",)
    assert typed.unread == {"profiled_steps": ["4"], "from_a_newer_trainperf": {"x": 1}}
    assert typed.to_dict() == record
