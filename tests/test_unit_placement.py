"""GPU placement: one GPU per xdist worker, k-GPU reservations that cannot deadlock."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from trainperf.errors import TrainperfError
from trainperf.launch.launcher import waiting_line
from trainperf.measure.placement import (
    Placement,
    lock_order,
    reserve,
    reserve_for_case,
    visible_devices,
    worker_index,
)
from trainperf.paths import REPO_ROOT


def test_worker_owns_gpu_of_its_number_and_wraps() -> None:
    devices = ("0", "1")
    assert [Placement(devices, worker_index(w)).own for w in (None, "gw0", "gw1", "gw2")] == [
        "0",
        "0",
        "1",
        "0",
    ]
    assert Placement((), 0).own is None


def test_k_gpu_case_prefers_own_gpu_and_the_next() -> None:
    placement = Placement(("0", "1", "2", "3"), worker=3)
    assert placement.for_case(1) == ("3",)
    assert placement.for_case(2) == ("3", "0")
    with pytest.raises(TrainperfError, match="needs 5 GPUs and this session sees 4"):
        placement.for_case(5)


def test_visible_devices_follow_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 3")
    assert visible_devices(lambda: 8) == ["2", "3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert visible_devices(lambda: 8) == []
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert visible_devices(lambda: 2) == ["0", "1"]


def test_locks_are_taken_in_one_global_order() -> None:
    assert lock_order(["1", "0"], ["0", "1"]) == ["0", "1"]
    assert lock_order(["GPU-b", "GPU-a"], ["GPU-b", "GPU-a"]) == [
        "GPU-b",
        "GPU-a",
    ]  # visible order, not names


def _hold(devices: list[str], folder: str, hold_s: float, log: object) -> None:
    with reserve(devices, ["0", "1"], directory=Path(folder), poll_s=0.01):
        start = time.monotonic()
        time.sleep(hold_s)
        log.put((tuple(devices), start, time.monotonic()))  # type: ignore[attr-defined]


def test_two_workers_each_wanting_both_gpus_do_not_deadlock(tmp_path: Path) -> None:
    """Worker gw1 asks for (1, 0), gw0 for (0, 1): both lock 0 first, so one waits for the other."""
    ctx = multiprocessing.get_context("fork")
    log = ctx.Queue()
    workers = [
        ctx.Process(target=_hold, args=(["1", "0"], str(tmp_path), 0.3, log)),
        ctx.Process(target=_hold, args=(["0", "1"], str(tmp_path), 0.3, log)),
        ctx.Process(target=_hold, args=(["1"], str(tmp_path), 0.1, log)),
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=20)
        assert worker.exitcode == 0, "a reservation never finished: deadlock"
    spans = [log.get(timeout=1) for _ in workers]
    # No two holders of GPU 1 overlapped in time.
    holders = sorted((start, end) for devices, start, end in spans if "1" in devices)
    assert all(earlier[1] <= later[0] for earlier, later in itertools.pairwise(holders))


def test_a_waiting_child_names_the_gpu_it_waits_for() -> None:
    assert waiting_line("x run 1/1", "GPU 1") == "[trainperf] x run 1/1: waiting for GPU 1"


FOUR = ("0", "1", "2", "3")


def test_a_two_gpu_case_takes_a_free_gpu_when_the_next_one_is_busy(tmp_path: Path) -> None:
    said: list[str] = []
    with (
        reserve(["1"], FOUR, directory=tmp_path),
        reserve_for_case(("0", "1"), FOUR, directory=tmp_path, on_wait=said.append) as held,
    ):
        assert held.devices == ("0", "2") and held.waited_s < 0.5
    assert said == []
    with reserve_for_case(("0", "1"), FOUR, directory=tmp_path) as held:
        assert held.devices == ("0", "1")  # its own and the next, where both are free


def test_a_waiting_two_gpu_case_holds_nothing_and_starts_on_the_first_pair_free(tmp_path: Path) -> None:
    """GPUs 1-3 busy: the case waits holding none, so a one-GPU case takes GPU 0 meanwhile; GPU 3
    frees while 0 is taken (no pair yet), then 0 frees: the case starts on 0 and 3."""
    said: list[str] = []
    busy = {name: threading.Event() for name in ("1", "2", "3")}
    holders = [threading.Thread(target=_hold_until, args=(name, tmp_path, busy[name])) for name in busy]
    for holder in holders:
        holder.start()
    time.sleep(0.2)
    got: list[tuple[tuple[str, ...], float]] = []

    def two_gpu_case() -> None:
        with reserve_for_case(("0", "1"), FOUR, directory=tmp_path, on_wait=said.append, poll_s=0.02) as held:
            got.append((held.devices, held.waited_s))

    case = threading.Thread(target=two_gpu_case)
    case.start()
    time.sleep(0.2)
    with reserve(["0"], FOUR, directory=tmp_path, poll_s=0.01) as waited:
        assert waited < 0.5  # not held by the waiting case
        busy["3"].set()
        time.sleep(0.3)
        assert not got  # GPU 3 alone is not a pair
    case.join(timeout=10)
    assert got and got[0][0] == ("0", "3") and got[0][1] >= 0.4
    assert said == ["2 free GPUs at once (of 0, 1, 2, 3)"]
    for event in busy.values():
        event.set()
    for holder in holders:
        holder.join(timeout=5)


def _hold_until(name: str, folder: Path, release: threading.Event) -> None:
    with reserve([name], FOUR, directory=folder):
        release.wait(timeout=20)


def test_lock_is_free_again_after_the_block(tmp_path: Path) -> None:
    with reserve(["0"], ["0"], directory=tmp_path) as waited:
        assert waited < 1
    with reserve(["0"], ["0"], directory=tmp_path) as waited:
        assert waited < 1


def test_n_auto_means_one_worker_per_visible_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainperf import xdist

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert xdist.auto_workers() == 2
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert xdist.auto_workers() is None  # no GPU: xdist's own default (one per core)


def test_controller_stamp_never_reuses_an_earlier_run_folder(tmp_path: Path) -> None:
    from datetime import datetime

    from trainperf import xdist

    now = datetime(2026, 11, 21, 23, 15, 0)
    assert xdist.new_stamp(tmp_path, now) == "20261121-231500"
    (tmp_path / "20261121-231500-h200").mkdir()
    assert xdist.new_stamp(tmp_path, now) == "20261121-231500.2"
    assert xdist.run_dirs(tmp_path, "20261121-231500") == [tmp_path / "20261121-231500-h200"]


def test_xdist_workers_share_the_cores_between_their_children() -> None:
    from trainperf.measure.placement import cpu_share

    two = cpu_share({"PYTEST_XDIST_WORKER_COUNT": "2"}, cores=2)
    assert two is not None and two.threads == 1 and two.env()["OMP_NUM_THREADS"] == "1"
    assert "1 (2 cores shared by 2 xdist workers" in two.note()
    assert cpu_share({"PYTEST_XDIST_WORKER_COUNT": "4"}, cores=2).threads == 1  # type: ignore[union-attr]
    assert cpu_share({"PYTEST_XDIST_WORKER_COUNT": "2"}, cores=16).threads == 8  # type: ignore[union-attr]
    assert cpu_share({}, cores=16) is None  # a serial run: the child may use every core
    assert cpu_share({"PYTEST_XDIST_WORKER_COUNT": "2", "OMP_NUM_THREADS": "3"}, cores=16) is None


def test_child_of_an_xdist_worker_runs_torch_on_its_share(monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import subprocess
    import sys

    from trainperf.launch.launcher import child_env

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "64")
    env = child_env(None)
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"
    torch_threads = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.strip()
    assert torch_threads == "1"
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "1")
    assert child_env(None).get("OMP_NUM_THREADS") == os.environ.get("OMP_NUM_THREADS")


def _config(here: Path, *args: str, markexpr: str = "") -> SimpleNamespace:
    """What ``-n auto`` is decided from, before collection: the run's paths and marker expression."""
    return SimpleNamespace(
        args=list(args),
        invocation_params=SimpleNamespace(dir=here),
        option=SimpleNamespace(markexpr=markexpr),
        getini=lambda name: ["build", "dist", "venv", "node_modules"],
    )


def test_n_auto_is_one_worker_per_gpu_only_for_runs_that_select_cases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainperf import xdist

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    (tmp_path / "perf" / "sub").mkdir(parents=True)
    (tmp_path / "perf" / "sub" / "test_cases.py").write_text(
        "def test_case(\n    case,\n    trainperf,\n):\n    trainperf(case)\n"
    )
    (tmp_path / "unit").mkdir()
    (tmp_path / "unit" / "test_maths.py").write_text("def test_add(tmp_path):\n    assert 1 + 1 == 2\n")
    assert xdist.workers_for_auto(_config(tmp_path, "perf")) == 2
    assert xdist.workers_for_auto(_config(tmp_path, "perf/sub/test_cases.py::test_case")) == 2
    assert xdist.workers_for_auto(_config(tmp_path, "unit", "perf")) == 2
    assert xdist.workers_for_auto(_config(tmp_path, "unit")) is None  # xdist's default: one per core
    assert xdist.workers_for_auto(_config(tmp_path, "unit", markexpr="h100 and not slow")) == 2
    assert xdist.workers_for_auto(_config(tmp_path, "unit", markexpr="not h100")) is None
    assert xdist.workers_for_auto(_config(tmp_path, "unit", markexpr="cpu")) is None
    assert xdist.workers_for_auto(_config(REPO_ROOT, "perf_tests")) == 2  # the shipped catalogue


@pytest.mark.parametrize("plugin", [["-p", "trainperf.plugin"], []], ids=["given-with-p", "entry-point"])
def test_n_auto_makes_one_worker_per_gpu_in_a_real_xdist_session(plugin: list[str]) -> None:
    """xdist answers ``-n auto`` with its own hook too (one worker per core): the suite's must come first,
    however the plugin was loaded, or a 4-GPU host of 64 cores starts 64 workers."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0,1,2"}
    env.pop("PYTEST_XDIST_AUTO_NUM_WORKERS", None)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *plugin,
            "-m",
            "h100",
            "-n",
            "auto",
            "-k",
            "no_case_has_this_name",
            "-p",
            "no:cacheprovider",
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert "created: 3/3 workers" in done.stdout, done.stdout[-2000:]


def test_n_auto_skips_virtualenvs_and_hidden_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from trainperf import xdist

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    catalogue = "def test_case(case, trainperf):\n    trainperf(case)\n"
    for folder in ("env/lib", ".tox/py"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "test_installed.py").write_text(catalogue)
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    assert xdist.workers_for_auto(_config(tmp_path, ".")) is None
