"""Where a verl case's set-up time goes, read from its log: verl's driver milestones and Ray's start
(a captured H100 log), vLLM's engine figures (its 0.24.0 formats), and the caches the child turns on."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from trainperf.workloads.verl.setup import (
    cache_environment,
    describe_setup,
    first_step_extra,
    setup_breakdown,
)

LOG = (Path(__file__).parent / "data" / "verl" / "v0.9.1-vllm-setup.log").read_text()
LAUNCH = time.mktime(time.strptime("2026-11-22 05:29:20", "%Y-%m-%d %H:%M:%S"))
STEPS = [{"duration_s": s} for s in (54.67, 25.45, 25.30, 26.07, 26.34)]  # that run's timing_s/step
ENGINE = "(vLLMHttpServer pid=3682) (EngineCore pid=3987) INFO 11-22 "
COMPILED = "".join(
    f"{ENGINE}{line}\n"
    for line in (
        (
            "05:32:40 [backends.py:1089] Using cache directory: /c/vllm/torch_compile_cache/ab12/rank_0_0/"
            "backbone for vLLM's torch.compile"
        ),
        "05:32:58 [monitor.py:53] torch.compile took 17.84 s in total",
        "05:33:05 [gpu_model_runner.py:6656] Graph capturing finished in 6 secs, took 0.31 GiB",
        "05:33:06 [core.py:345] init engine (profile, create kv cache, warmup model) took 31.20 s",
    )
)
FROM_CACHE = "".join(
    f"{ENGINE}{line}\n"
    for line in (
        (
            "05:32:31 [backends.py:292] Directly load the compiled graph(s) for compile range (1, 8192) "
            "from the cache, took 1.204 s"
        ),
        "05:32:32 [monitor.py:53] torch.compile took 3.10 s in total",
    )
)


def test_phases_from_the_driver_milestones_of_a_real_run() -> None:
    setup = setup_breakdown(LOG, LAUNCH, STEPS)
    # 05:29:20 launch, 05:29:32 Ray, 05:30:23 data loader, 05:30:54 the last model engine (actor and
    # ref after critic), 05:33:10 ready to fit; step 1 54.67 s against a 25.76 s median.
    assert setup["phases"] == {"ray_s": 12.0, "inputs_s": 51.0, "workers_s": 31.0, "rollout_s": 136.0}
    assert setup["first_step_extra_s"] == pytest.approx(28.9)
    assert setup["total_s"] == pytest.approx(230.0 + 28.9)
    assert setup["vllm"] == {"compile_cache": "unknown"}  # that run logged vLLM at WARN
    assert describe_setup(setup) == (
        "set-up 259 s: Ray 12 s, driver+data 51 s, models 31 s, engine 136 s, first step +29 s"
    )


def test_the_engine_figures_say_whether_the_compiled_graphs_came_from_the_cache() -> None:
    compiled = setup_breakdown(LOG + COMPILED, LAUNCH, STEPS)["vllm"]
    assert compiled == {
        "compile_s": 17.84,
        "graph_capture_s": 6.0,
        "engine_init_s": 31.2,
        "compile_cache": "miss",
    }
    warm = setup_breakdown(LOG + FROM_CACHE, LAUNCH, STEPS)
    assert warm["vllm"]["compile_cache"] == "hit" and warm["vllm"]["compile_from_cache_s"] == 1.2
    assert "compiled graphs from cache 1 s" in describe_setup(warm)
    off = setup_breakdown(
        LOG + "INFO 11-22 05:32:40 [backends.py:1087] vLLM's torch.compile cache is disabled.\n", LAUNCH, []
    )
    assert off["vllm"]["compile_cache"] == "off" and "first_step_extra_s" not in off


def test_a_log_without_milestones_gives_no_phases_and_an_unknown_total() -> None:
    setup = setup_breakdown("Traceback (most recent call last):\n", LAUNCH, STEPS[:1])
    assert setup["phases"] == {} and "total_s" not in setup and first_step_extra(STEPS[:1]) is None
    assert describe_setup(setup).startswith("set-up unknown")


def test_the_compile_cache_is_turned_on_unless_the_runner_chose(tmp_path: Path) -> None:
    assert cache_environment({}, tmp_path) == {
        "VLLM_LOGGING_LEVEL": "INFO",
        "VLLM_DISABLE_COMPILE_CACHE": "0",
        "VLLM_CACHE_ROOT": str(tmp_path),
    }
    # The runner's own settings stay; TRAINPERF_VERL_COMPILE_CACHE=off keeps verl's choice.
    assert cache_environment({"VLLM_DISABLE_COMPILE_CACHE": "1", "VLLM_LOGGING_LEVEL": "WARN"}, tmp_path) == {
        "VLLM_CACHE_ROOT": str(tmp_path)
    }
    assert cache_environment({"TRAINPERF_VERL_COMPILE_CACHE": "off"}, tmp_path) == {
        "VLLM_LOGGING_LEVEL": "INFO"
    }
