"""The NVML path on the CPU: ``measure.nvml``'s ``Nvml`` and ``Sampler`` and ``measure.idle``'s wait,
read through a scripted stand-in for pynvml (NVML needs an NVIDIA driver; the GPU runs exercise
the real library). The stand-in answers in NVML's own units (milliwatts, millijoules, bytes) and
raises its ``NVMLError`` where a board lacks a counter, as pynvml does."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from trainperf.errors import TrainperfError
from trainperf.measure import idle, nvml
from trainperf.measure.contamination import throttled_during
from trainperf.measure.energy import window_energy_j
from trainperf.measure.hygiene import judge, read_nvml
from trainperf.measure.nvml import Nvml, Sampler
from trainperf.run_checks_record import IdleCheck

GIB = 2**30


class NVMLError(Exception):
    """pynvml's error class (its NotSupported and NotFound are subclasses of it)."""


@dataclass
class Board:
    """One scripted GPU: each reading takes the next value of its script, the last one repeating;
    ``None`` in a script is a counter the board does not support."""

    uuid: str
    memory_b: list[int] = field(default_factory=lambda: [2 * GIB])
    power_mw: list[int | None] = field(default_factory=lambda: [300_000])
    energy_mj: list[int | None] = field(default_factory=lambda: [None])
    reasons: list[int | None] = field(default_factory=lambda: [0])
    processes: list[tuple[int, int | None]] = field(default_factory=list)
    reads: dict[str, int] = field(default_factory=dict)

    def next(self, name: str) -> Any:
        script = getattr(self, name)
        index = self.reads.get(name, 0)
        self.reads[name] = index + 1
        value = script[min(index, len(script) - 1)]
        if isinstance(value, Exception):
            raise value
        if value is None:
            raise NVMLError("Not Supported")
        return value


class FakePynvml:
    """The part of pynvml that ``measure.nvml`` calls, over scripted boards."""

    NVMLError = NVMLError
    NVML_CLOCK_SM = 1
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, *boards: Board, init_fails: bool = False) -> None:
        self.boards, self.init_fails, self.inits = list(boards), init_fails, 0

    def nvmlInit(self) -> None:
        self.inits += 1
        if self.init_fails:
            raise NVMLError("Driver Not Loaded")

    def nvmlDeviceGetCount(self) -> int:
        return len(self.boards)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Board:
        if not 0 <= index < len(self.boards):
            raise NVMLError("Invalid Argument")
        return self.boards[index]

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> Board:
        return next((b for b in self.boards if b.uuid == uuid), None) or _raise(NVMLError("Not Found"))

    def nvmlDeviceGetMemoryInfo(self, board: Board) -> Any:
        return SimpleNamespace(used=board.next("memory_b"), total=80 * GIB)

    def nvmlDeviceGetPowerUsage(self, board: Board) -> int:
        return int(board.next("power_mw"))

    def nvmlDeviceGetTotalEnergyConsumption(self, board: Board) -> int:
        return int(board.next("energy_mj"))

    def nvmlDeviceGetClockInfo(self, board: Board, clock: int) -> int:
        return 1755

    def nvmlDeviceGetMaxClockInfo(self, board: Board, clock: int) -> int:
        return 1980

    def nvmlDeviceGetTemperature(self, board: Board, sensor: int) -> int:
        return 61

    def nvmlDeviceGetCurrentClocksEventReasons(self, board: Board) -> int:
        return int(board.next("reasons"))

    def nvmlDeviceGetComputeRunningProcesses(self, board: Board) -> list[Any]:
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in board.processes]

    def nvmlDeviceGetEnforcedPowerLimit(self, board: Board) -> int:
        return 700_000

    def nvmlDeviceGetIndex(self, board: Board) -> int:
        return self.boards.index(board)

    def nvmlDeviceGetName(self, board: Board) -> bytes:
        return b"NVIDIA H100 80GB HBM3"  # older pynvml returns bytes

    def nvmlDeviceGetUUID(self, board: Board) -> str:
        return board.uuid

    def nvmlDeviceGetPciInfo(self, board: Board) -> Any:
        return SimpleNamespace(busId=b"00000000:19:00.0")

    def nvmlSystemGetDriverVersion(self) -> str:
        return "570.86.15"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 12080


def _raise(error: Exception) -> Any:
    raise error


@pytest.fixture
def boards(monkeypatch: pytest.MonkeyPatch) -> Callable[..., FakePynvml]:
    """Install a stand-in pynvml over the given boards, NVML not yet initialised."""

    def install(*scripted: Board, init_fails: bool = False) -> FakePynvml:
        fake = FakePynvml(*scripted, init_fails=init_fails)
        monkeypatch.setattr(nvml, "_nvml", fake)
        monkeypatch.setattr(Nvml, "_initialised", False)
        return fake

    return install


@pytest.fixture
def wall_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each sample's timestamp 0.1 s after the previous one, from t=1000: exact windows to integrate."""
    ticks = itertools.count()
    stamps = SimpleNamespace(time=lambda: 1000.0 + next(ticks) / 10, monotonic=time.monotonic)
    monkeypatch.setattr(nvml, "time", stamps)
    yield


def test_a_gpu_is_found_by_index_or_uuid_and_a_missing_one_is_one_line(boards: Any) -> None:
    fake = boards(Board("GPU-aaaa"), Board("GPU-bbbb"))
    assert Nvml.available() and Nvml.count() == 2
    assert Nvml.handle("1") is fake.boards[1] and Nvml.handle("GPU-aaaa") is fake.boards[0]
    assert fake.inits == 1  # initialised once, however often it is asked
    for device in ("7", "GPU-zzzz", "first"):
        with pytest.raises(
            TrainperfError, match=rf"^GPU '{device}' not found by NVML \(.*\); check CUDA_VISIBLE_DEVICES$"
        ):
            Nvml.handle(device)


def test_without_a_driver_or_the_extra_there_is_no_gpu(boards: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    boards(Board("GPU-aaaa"), init_fails=True)
    assert not Nvml.available() and Nvml.count() == 0
    monkeypatch.setattr(nvml, "_nvml", None)
    assert not Nvml.available()
    with pytest.raises(
        TrainperfError, match=r"^nvidia-ml-py is not installed: pip install 'trainperf\[gpu\]'$"
    ):
        Nvml.handle("0")


def test_readings_are_converted_to_the_suites_units(boards: Any) -> None:
    boards(Board("GPU-aaaa", memory_b=[3 * GIB], power_mw=[412_500], energy_mj=[9_000_000], reasons=[0x8]))
    info = Nvml.info("0")
    assert (info.name, info.uuid, info.memory_total_b) == ("NVIDIA H100 80GB HBM3", "GPU-aaaa", 80 * GIB)
    assert (info.driver, info.cuda_driver_version, info.power_limit_w) == ("570.86.15", "12.8", 700.0)
    assert info.pci_bus_id == "00000000:19:00.0"
    sample = Nvml.sample(Nvml.handle("0"))
    assert (sample.mem_used_b, sample.power_w, sample.energy_mj) == (3 * GIB, 412.5, 9_000_000)
    assert (sample.sm_clock_mhz, sample.temperature_c, sample.throttle_reasons) == (1755, 61, 0x8)


def test_a_counter_the_board_lacks_reads_as_none(boards: Any) -> None:
    boards(Board("GPU-aaaa", power_mw=[None], energy_mj=[None], reasons=[None]))
    sample = Nvml.sample(Nvml.handle("0"))
    assert (sample.power_w, sample.energy_mj, sample.throttle_reasons) == (None, None, None)
    assert sample.mem_used_b == 2 * GIB  # memory is always read


def _sampled(count: int, **script: Any) -> tuple[Sampler, Board]:
    """A Sampler run over a scripted board until it holds ``count`` samples (however slowly a
    loaded host schedules its thread), then stopped."""
    sampler = Sampler("0", interval_s=0.001)
    board = nvml._nvml.boards[0]  # type: ignore[union-attr]
    with sampler:
        deadline = time.monotonic() + 60
        while len(sampler.samples) + sampler.errors < count:
            assert time.monotonic() < deadline, f"{len(sampler.samples)} samples in 60 s"
            time.sleep(0.001)
    return sampler, board


def test_the_sampler_reads_in_order_and_a_failed_read_costs_one_sample(boards: Any, wall_clock: None) -> None:
    steps = [2 * GIB, 5 * GIB, RuntimeError("GPU is lost"), 9 * GIB, 4 * GIB]
    boards(Board("GPU-aaaa", memory_b=steps))
    sampler, _ = _sampled(5)
    memory = [s.mem_used_b for s in sampler.samples]
    assert memory[:4] == [2 * GIB, 5 * GIB, 9 * GIB, 4 * GIB] and sampler.errors == 1
    assert all(b.t > a.t for a, b in itertools.pairwise(sampler.samples))
    assert not sampler._thread.is_alive()  # type: ignore[union-attr]


def test_energy_over_a_window_from_the_counter_or_the_integral_of_power(
    boards: Any, wall_clock: None
) -> None:
    # 250 W for 0.1 s between readings: the counter grows by 25 J (25,000 mJ) each time.
    boards(Board("GPU-aaaa", power_mw=[250_000], energy_mj=[7_000_000 + 25_000 * k for k in range(40)]))
    counted, _ = _sampled(30)
    t = [s.t for s in counted.samples]
    # A window between readings: the counter is interpolated at its edges.
    assert window_energy_j(counted.samples, t[3] + 0.05, t[13] + 0.05) == (
        pytest.approx(250.0),
        "nvml_energy_counter",
    )

    boards(Board("GPU-aaaa", power_mw=[250_000], energy_mj=[None]))
    powered, _ = _sampled(30)
    t = [s.t for s in powered.samples]
    # No counter: the trapezoid integral of the samples inside the window (10 intervals of 0.1 s).
    assert window_energy_j(powered.samples, t[3], t[13]) == (pytest.approx(250.0), "power_integral")


def test_throttle_reasons_sampled_during_a_run_make_it_contaminated(boards: Any, wall_clock: None) -> None:
    # A hardware slowdown (0x8) in 3 of 20 samples: 15%, above the 5% that counts. The software
    # power cap (0x4) is the case's own load and is not named.
    boards(Board("GPU-aaaa", reasons=[0x4] * 10 + [0x8 | 0x4] * 3 + [0x4] * 7))
    sampler, _ = _sampled(20)
    assert throttled_during({"0": sampler.samples[:20]}) == [
        "GPU 0 throttled (hw_slowdown) in 15% of the run's samples"
    ]


def test_a_foreign_process_and_throttling_before_a_case_are_judged(boards: Any) -> None:
    own = 777
    boards(Board("GPU-aaaa", reasons=[0x40], processes=[(4242, 3 * GIB), (own, None)]))
    state = read_nvml("0")
    assert state.processes == ((4242, 3 * GIB), (own, None)) and state.sm_clock_max_mhz == 1980
    hygiene = judge([state], own_pids=[own])
    assert hygiene.foreign == {"0": [(4242, 3 * GIB)]} and hygiene.throttled == {"0": ["hw_thermal_slowdown"]}


class FakeClock:
    """``idle``'s clock: a sleep moves it on at once."""

    def __init__(self) -> None:
        self.now, self.slept = 0.0, 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.slept += seconds


def test_the_idle_wait_ends_when_memory_comes_back(boards: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(idle, "time", clock)
    # The case's memory drains over four readings; idle was 2 GiB, and 1 GiB of slack is allowed.
    boards(Board("GPU-aaaa", memory_b=[40 * GIB, 20 * GIB, 8 * GIB, int(2.5 * GIB)]))
    said: list[str] = []
    assert idle.wait_idle("0", 2 * GIB, said.append) == IdleCheck(idle=True, mem_used_gib=2.5, waited_s=1.5)
    assert said == []


def test_a_gpu_that_stays_full_is_reported_after_the_wait(
    boards: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    monkeypatch.setattr(idle, "time", clock)
    boards(Board("GPU-aaaa", memory_b=[30 * GIB]))
    said: list[str] = []
    report = idle.wait_idle("0", 2 * GIB, said.append)
    assert report == IdleCheck(idle=False, mem_used_gib=30.0, waited_s=60.0)
    warning = "[trainperf] warning: GPU 0 memory still 30.0 GiB in use 60s after the case ended;"
    assert said == [f"{warning} the next case may be disturbed"]


def test_the_idle_level_of_the_sessions_gpu_never_rises_above_the_sessions_reading(boards: Any) -> None:
    boards(Board("GPU-aaaa", memory_b=[3 * GIB]), Board("GPU-bbbb", memory_b=[5 * GIB]))
    assert idle.idle_level("0", "0", 2 * GIB) == 2 * GIB  # memory a previous case left is not subtracted
    assert idle.idle_level("0", "0", 4 * GIB) == 3 * GIB
    assert idle.idle_level("1", "0", 2 * GIB) == 5 * GIB  # another GPU: its own reading
