"""verl's per-step metrics read from recorded samples of its file logger and console (per release),
and its failures classified from recorded messages. Samples: ``tests/data/verl/README.md``.

Formats under test: ``verl/utils/tracking.py`` ``FileLogger.log`` (0.9.1 :543-545, 0.8.0
:285-287: ``{"step": N, "data": {...}}`` via orjson), ``verl/utils/logger/aggregate_logger.py``
``concat_dict_to_str`` (``step:N - k:v``, numbers through ``pprint.pformat``); names from
``verl/trainer/ppo/metric_utils.py`` ``compute_timing_metrics`` / ``compute_throughout_metrics``
(0.9.1 :645, :685-687), memory from ``engine_workers.py`` (0.9.1 :219-221, renamed under
``actor/`` by ``ray_trainer.py`` :1371) or ``fsdp_workers.py`` (0.7.0 :926-928, unprefixed).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainperf.cli import main
from trainperf.workloads.verl.classify import ENVIRONMENT_MARKERS, classify_failure
from trainperf.workloads.verl.logs import parse_console_line, read_records, remainder_s

DATA = Path(__file__).parent / "data" / "verl"
VERSIONS = ("0.7.0", "0.8.0", "0.9.1")
ENGINE_PHASES = [
    "gen",
    "reward",
    "old_log_prob",
    "ref",
    "values",
    "adv",
    "update_critic",
    "update_actor",
    "update_weights",
]


@pytest.mark.parametrize("version", VERSIONS)
def test_jsonl_and_console_of_one_release_give_the_same_records(version: str) -> None:
    from_jsonl = read_records(DATA / f"v{version}-ppo.jsonl")
    from_console = read_records(DATA / f"v{version}-ppo-console.log")
    assert [r["step"] for r in from_jsonl] == [1, 2, 3]
    assert len(from_console) == 3
    for a, b in zip(from_jsonl, from_console):
        assert a.keys() == b.keys()
        assert a["phases"] == pytest.approx(b["phases"])
        assert a["max_allocated_gib"] == pytest.approx(b["max_allocated_gib"])


@pytest.mark.parametrize("version", VERSIONS)
def test_phases_step_tokens_throughput_and_memory_under_each_releases_names(version: str) -> None:
    first = read_records(DATA / f"v{version}-ppo.jsonl")[0]
    expected = ENGINE_PHASES if version != "0.7.0" else ENGINE_PHASES[:-1]  # no update_weights in 0.7
    assert list(first["phases"]) == expected  # agent_loop/* breakdowns are not phases
    assert first["tokens"] == 256 * 2048
    assert first["throughput"] == pytest.approx(first["tokens"] / (first["duration_s"] * 2))
    # 0.8+: actor/perf/... and critic/perf/... (critic 3 GiB lower); 0.7: perf/...; the peak is the larger.
    assert first["max_allocated_gib"] == pytest.approx(61.38)
    assert remainder_s(first) == pytest.approx(9.87, abs=0.01)
    assert first["response_length_mean"] == 1024.0


def test_console_values_printed_as_numpy_scalars_and_behind_rays_prefix() -> None:
    parsed = parse_console_line(
        "(TaskRunner pid=7) step:4 - a/b:np.float64(-0.5) - n:3 - flag:True - text:abc"
    )
    assert parsed == (4, {"a/b": -0.5, "n": 3.0, "flag": 1.0})
    assert parse_console_line("(TaskRunner pid=7) Training Progress: 1/3") is None


def test_a_torn_last_line_is_ignored(tmp_path: Path) -> None:
    text = (DATA / "v0.9.1-ppo.jsonl").read_text()
    path = tmp_path / "live.jsonl"
    path.write_text(text + text.splitlines()[0][:50])
    assert len(read_records(path)) == 3


def test_cli_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verl-metrics", str(DATA / "v0.9.1-ppo-console.log")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["step", "step", "s", "gen"]
    assert "update_weights" in lines[0] and "rest" in lines[0]
    assert [line.split()[0] for line in lines[2:]] == ["1", "2", "3"]
    assert " 9.87" in lines[2]  # the remainder of step 1


def test_cli_json_and_a_file_without_steps(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["verl-metrics", "--json", str(DATA / "v0.7.0-ppo.jsonl")]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 3
    empty = tmp_path / "x.log"
    empty.write_text("hello\n")
    assert main(["verl-metrics", str(empty)]) == 2
    assert "no verl step metrics" in capsys.readouterr().err


def test_cli_reads_a_run_folder_and_names_a_folder_without_metrics(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run = tmp_path / "cases" / "case" / "r1"
    run.mkdir(parents=True)
    assert main(["verl-metrics", str(run)]) == 2
    assert "is a folder without verl_metrics.jsonl or verl.log" in capsys.readouterr().err
    (run / "verl.log").write_text((DATA / "v0.9.1-ppo-console.log").read_text())
    (run / "verl_metrics.jsonl").write_text((DATA / "v0.7.0-ppo.jsonl").read_text())
    assert main(["verl-metrics", "--json", str(run)]) == 0
    assert json.loads(capsys.readouterr().out) == read_records(DATA / "v0.7.0-ppo.jsonl")


@pytest.mark.parametrize(
    ("sample", "outcome", "reason"),
    [
        ("cuda-oom-in-worker", "oom", "CUDA out of memory in a worker"),
        ("vllm-no-kv-cache", "oom", "vLLM start-up: no memory left for the KV cache"),
        ("vllm-free-memory", "oom", "vLLM start-up: free memory below gpu_memory_utilization"),
        ("sglang-not-enough-memory", "oom", "SGLang start-up: not enough memory"),
        ("ray-host-oom", "oom", "Ray killed a worker: the host ran low on memory"),
        ("dead-worker", "crash", "a Ray actor died"),
        ("hydra-error", "crash", "verl failed"),
        ("trl-too-new", "crash", ENVIRONMENT_MARKERS[0][1]),
    ],
)
def test_failures_are_classified_from_their_messages(sample: str, outcome: str, reason: str) -> None:
    found = classify_failure((DATA / "failures" / f"{sample}.log").read_text())
    assert (found.outcome, found.reason) == (outcome, reason)


def test_a_crash_names_its_last_error_line() -> None:
    found = classify_failure((DATA / "failures" / "hydra-error.log").read_text())
    assert found.line.startswith("omegaconf.errors.ConfigAttributeError")
