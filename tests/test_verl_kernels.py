"""verl's kernel time, recorded in its own processes, on the CPU: the device's records are faked (no GPU
here). The cut at the driver's step edges, the pooling over processes and GPUs, the window's protocol
between the driver's log and each process's watcher (real threads and a real second process), and the
parent's use of the timed window."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from trainperf.judge.metrics import KERNEL_TIME
from trainperf.measure.measurement import measure_run, run_metrics
from trainperf.measure.step_parts import pool_kernels
from trainperf.pids import alive
from trainperf.traces.kernel_processes import (
    ProcessKernels,
    convert_to_wall,
    pool_processes,
    process_kernels,
    role_of,
)
from trainperf.traces.kernel_steps import DeviceActivity, last_steps_window
from trainperf.workloads.verl import kernel_folder, kernel_hook
from trainperf.workloads.verl.kernel_folder import Answer, KernelFolder, Window, collect

MS = 1_000_000
EDGES = {step: step * 1_000 * MS for step in range(1, 6)}


def kernel(name: str, start_ms: float, length_ms: float) -> DeviceActivity:
    return DeviceActivity(name, "kernel", int(start_ms * MS), int((start_ms + length_ms) * MS))


def worker_activities() -> list[DeviceActivity]:
    """A training worker's kernels: 30 ms of GEMM in step 3, 40 in step 4, one during step 2's tail."""
    return [
        kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 1_990, 5),
        kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 2_100, 30),
        kernel("ncclDevKernel_AllGather_RING_LL", 2_200, 500),  # waits for a peer: not kernel time
        kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 3_100, 40),
    ]


def test_a_window_of_the_last_steps_leaves_three_timed_steps_after_the_first() -> None:
    assert last_steps_window(5, 2) == (5, 5) and last_steps_window(10, 2) == (9, 10)
    assert last_steps_window(4, 2) is None and last_steps_window(3, 2) is None
    assert last_steps_window(8, 0) is None


def test_cupti_timestamps_are_put_on_the_hosts_wall_clock_and_rescaled_where_they_run_at_another_rate() -> (
    None
):
    same, note = convert_to_wall([kernel("k", 10, 1)], (0, 5_000 * MS), (100 * MS, 5_100 * MS))
    assert (same[0].start_ns, same[0].end_ns, note) == (5_010 * MS, 5_011 * MS, "")
    ticks, note = convert_to_wall([kernel("k", 20, 2)], (0, 0), (200 * MS, 100 * MS))
    assert (ticks[0].start_ns, ticks[0].end_ns) == (10 * MS, 11 * MS) and "x2.0000" in note


def test_a_processs_records_are_cut_at_the_drivers_edges_and_what_falls_outside_is_counted() -> None:
    steps, top, outside = process_kernels(worker_activities(), EDGES, 3, 4)
    assert [(s.step, s.busy_ms) for s in steps] == [(3, 30.0), (4, 40.0)]
    assert steps[0].groups_ms["communication"] == 500.0 and outside == 1
    assert [(k.group, k.total_ms, k.count) for k in top] == [("communication", 500.0, 1), ("GEMM", 70.0, 2)]


def record(pid: int, title: str, busy: list[float], first: int = 3) -> ProcessKernels:
    activities = [kernel("gemm", EDGES[first - 1 + i] / MS + 10, ms) for i, ms in enumerate(busy)]
    steps, top, _ = process_kernels(activities, EDGES, first, first + len(busy) - 1)
    return ProcessKernels(pid=pid, title=title, gpu=f"GPU-{pid}", steps=steps, top=top)


def test_two_gpus_processes_pool_to_a_per_gpu_figure_with_the_rollout_and_training_parts() -> None:
    processes = [
        record(1, "ray::WorkerDict.actor_rollout_update_actor", [300, 310]),
        record(2, "ray::WorkerDict.actor_rollout_update_actor", [302, 306]),
        record(3, "VLLM::EngineCore_DP0", [100, 104]),
        record(4, "VLLM::EngineCore_DP0", [98, 100]),
    ]
    pooled = pool_processes(processes, 3, 4, gpus=2)
    assert not pooled.error and [s.busy_ms for s in pooled.steps] == [400.0, 410.0]
    assert pooled.steps[0].parts_ms == {"rollout": 99.0, "training": 301.0}
    assert pooled.top[0].total_ms == 810.0 and role_of("sglang::scheduler_TP0") == "rollout"


def test_a_process_short_of_a_window_step_leaves_the_run_without_kernel_time_and_says_which() -> None:
    processes = [record(1, "ray::WorkerDict", [300, 310]), record(2, "VLLM::EngineCore", [100])]
    pooled = pool_processes(processes, 3, 4, gpus=1)
    assert not pooled.steps and "pid 2 (VLLM::EngineCore) recorded steps [3]" in pooled.error


class FakeCupti:
    """Stands in for CUPTI in a process with a CUDA context: the records a window would hold."""

    def __init__(self, torch: Any) -> None:
        self.activities = worker_activities()

    def records(self, edges: dict[int, int], window: Window, pid: int, gpu: str) -> ProcessKernels:
        steps, top, outside = process_kernels(self.activities, edges, window.first, window.last)
        return ProcessKernels(
            pid=pid, title="ray::WorkerDict", gpu=gpu, steps=steps, top=top, outside=outside
        )


def log_steps(folder: KernelFolder, window: Window, steps: int) -> None:
    """verl's driver: each step's edge, then the log's waits (``kernel_hook.at_step_logged``)."""
    for step in range(1, steps + 1):
        folder.add_edge(step, EDGES[step])
        kernel_hook.at_step_logged(folder, window, step)


def test_the_watcher_records_from_the_windows_start_to_its_end_and_the_child_pools_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kernel_hook, "cuda_context", lambda: (object(), ""))
    monkeypatch.setattr(kernel_hook, "CuptiWindow", FakeCupti)
    monkeypatch.setattr(kernel_hook, "gpu_of", lambda torch: "GPU-a")
    folder, window = KernelFolder(tmp_path), Window(3, 4)
    watcher = kernel_hook.Watcher(folder, window)
    watcher.pid = 1_000_001  # a second process's, so that the driver waits for its answer
    thread = threading.Thread(target=watcher.run)
    thread.start()
    while not folder.registered():
        time.sleep(0.01)
    monkeypatch.setattr(kernel_folder, "alive", lambda pid: thread.is_alive())
    log_steps(folder, window, 4)
    thread.join(timeout=10)
    assert folder.answers()[1_000_001].recording
    released = folder.released()
    assert released is not None and released.silent == () and released.silent_on_gpu == ()
    # A training worker alone is not a step's work: the rollout engine's processes recorded nothing.
    alone = collect(folder, window, gpus=1)
    assert not alone.steps and "no rollout process recorded kernels" in alone.error
    engine = record(9, "VLLM::EngineCore_DP0", [10.0, 12.0])
    folder.answer(9, Answer(True, "", 1))
    folder.write_records(engine)
    pooled = collect(folder, window, gpus=1)
    assert not pooled.error
    assert [(s.step, s.busy_ms, s.parts_ms) for s in pooled.steps] == [
        (3, 40.0, {"rollout": 10.0, "training": 30.0}),
        (4, 52.0, {"rollout": 12.0, "training": 40.0}),
    ]


def run_window_with_a_silent_process(folder: KernelFolder, monkeypatch: pytest.MonkeyPatch) -> int:
    """Steps 1-2 logged (window: step 2) while a live process that never answers is registered."""
    silent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        folder.register(silent.pid)
        monkeypatch.setattr(kernel_hook, "wait_for_answers", lambda f: kernel_folder.wait_for_answers(f, 0.3))
        began = time.monotonic()
        log_steps(folder, Window(2, 2), 2)
        assert 0.3 <= time.monotonic() - began < 5
    finally:
        silent.kill()
        silent.wait()
    return silent.pid


def test_a_silent_process_with_a_gpu_open_holds_the_window_until_the_wait_ends_and_voids_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = KernelFolder(tmp_path)
    monkeypatch.setattr(kernel_hook, "holds_gpu", lambda pid: True)
    pid = run_window_with_a_silent_process(folder, monkeypatch)
    pooled = collect(folder, Window(2, 2), gpus=1)
    assert (
        not pooled.steps
        and f"pid {pid} (?): did not answer before the window, with a GPU open" in pooled.error
    )


def test_a_silent_process_without_a_gpu_is_named_and_leaves_the_figure_standing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = KernelFolder(tmp_path)
    pid = run_window_with_a_silent_process(folder, monkeypatch)  # a sleeping python: no device open
    for number, title in ((7, "ray::WorkerDict"), (8, "VLLM::Worker")):
        folder.answer(number, Answer(True, "", 1))
        folder.write_records(record(number, title, [100.0], first=2))
    pooled = collect(folder, Window(2, 2), gpus=1)
    assert [s.busy_ms for s in pooled.steps] == [200.0]
    assert f"process(es) {pid} did not answer and had no GPU open" in pooled.clock_note


def test_a_zombie_is_not_waited_for() -> None:
    """A process that exited and was not reaped yet (verl's helpers can leave one) is no live one."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while alive(child.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child.pid) and alive(os.getpid())
    child.wait()


def test_a_process_started_during_the_window_with_a_cuda_context_records_nothing_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kernel_hook, "cuda_context", lambda: (object(), ""))
    monkeypatch.setattr(
        kernel_hook, "CuptiWindow", lambda torch: pytest.fail("a late process must not start")
    )
    folder, window = KernelFolder(tmp_path), Window(3, 4)
    for step in (1, 2, 3, 4):
        folder.add_edge(step, EDGES[step])
    folder.release([], [])
    kernel_hook.Watcher(folder, window).run()
    pooled = collect(folder, window, gpus=1)
    assert not pooled.steps and "started after the window began, with a CUDA context" in pooled.error


def fake_verl(root: Path) -> None:
    """A package that imports external modules from its ``__init__`` as verl 0.9 does, and a tracker
    whose ``log`` writes the metrics line."""
    (root / "verl" / "utils").mkdir(parents=True)
    (root / "verl" / "__init__.py").write_text(
        "import importlib, os\n"
        "for name in filter(None, os.environ.get('VERL_USE_EXTERNAL_MODULES', '').split(',')):\n"
        "    importlib.import_module(name)\n"
    )
    (root / "verl" / "utils" / "__init__.py").write_text("")
    (root / "verl" / "utils" / "tracking.py").write_text(
        "import json, os\n"
        "class Tracking:\n"
        "    def log(self, data, step, backend=None):\n"
        "        with open(os.environ['METRICS'], 'a') as f:\n"
        "            f.write(json.dumps({'step': step, **data}) + '\\n')\n"
    )


DRIVER = """
import glob, os, subprocess, sys, time, verl
from verl.utils.tracking import Tracking
worker = subprocess.Popen([sys.executable, "-c", "import verl, time; time.sleep(60)"])
while len(glob.glob(os.environ["TRAINPERF_VERL_KERNELS"] + "/proc-*")) < 2:
    time.sleep(0.05)
tracker = Tracking()
tracker.log({"val/score": 1.0}, 0)
for step in (1, 2, 3):
    tracker.log({"timing_s/step": 1.5}, step)
worker.kill()
"""


def test_verls_driver_and_a_worker_agree_on_the_window_through_the_real_hook(tmp_path: Path) -> None:
    """Two real processes import the hook through a verl-like package: the driver's log writes the
    edges of training steps only and waits for the worker's answer (no CUDA there: it records nothing)
    before the window, which the child then reports as not recorded by any process."""
    fake_verl(tmp_path)
    folder = tmp_path / "kernels"
    folder.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(kernel_hook.SOURCE_ROOT)]),
        "VERL_USE_EXTERNAL_MODULES": kernel_hook.MODULE_NAME,
        kernel_folder.DIR_VARIABLE: str(folder),
        kernel_folder.WINDOW_VARIABLE: "2,3",
        "METRICS": str(tmp_path / "metrics.jsonl"),
    }
    subprocess.run([sys.executable, "-c", DRIVER], env=env, check=True, timeout=60)
    kernels = KernelFolder(folder)
    assert sorted(kernels.edges()) == [1, 2, 3] and len(kernels.registered()) == 2
    answers = kernels.answers()
    assert answers and not any(a.recording for a in answers.values())
    assert {a.why for a in answers.values()} == {"no torch in this process"}
    assert (tmp_path / "metrics.jsonl").read_text().count("\n") == 4
    pooled = collect(kernels, Window(2, 3), gpus=1)
    assert pooled.error == "kernel time not recorded: no process of the run recorded kernels"


def test_an_answer_round_trips_and_a_window_is_read_only_from_a_valid_variable(tmp_path: Path) -> None:
    folder = KernelFolder(tmp_path)
    folder.answer(7, Answer(True, "", 5))
    assert folder.answers() == {7: Answer(True, "", 5)}
    assert Window.from_env("2,3") == Window(2, 3)
    assert Window.from_env("1,3") is None and Window.from_env("") is None and Window.from_env("x") is None


def test_the_parent_leaves_verls_window_steps_out_of_the_timing_and_keys_its_kernel_time() -> None:
    steps: list[dict[str, object]] = [
        {"step": n, "t_start": 10.0 * n, "t_end": 10.0 * n + d, "duration_s": d, "tokens": 1000}
        for n, d in enumerate([9.0, 6.1, 6.0, 6.2, 8.0], start=1)
    ]
    steps[4]["kernel_window"] = True  # as the verl child marks it
    pooled = pool_processes([record(1, "ray::WorkerDict", [3_000], first=5)], 5, 5, gpus=1)
    run = measure_run(
        {"steps": steps, "kernel_time": pooled.to_dict()}, [], samples_per_step=8, idle_mem_b=None
    )
    metrics = run_metrics(run)
    assert metrics[KERNEL_TIME].keys == ["5:1000"] and metrics[KERNEL_TIME].samples == [3000.0]
    assert run.info.kernel_window_steps == 1 and run.info.steps == 4
    assert "5:1000" not in (metrics["step_time_s"].keys or [])
    assert run.info.kernel_roles_ms == {"training": 3000.0}
    summary = pool_kernels([run.info, dataclasses.replace(run.info, kernel_roles_ms={"training": 3010.0})])
    assert summary is not None and summary.roles_ms == {"training": 3005.0}
