"""Turns on a shared host (--perf-host-lock, --perf-alone): runs side by side, a host-bound case
with nothing beside it, and a waiting alone turn never starved by new shared ones. The locks are
real flock locks; threads stand in for the runs (each opens the files itself, as each run does)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from test_e2e_cpu import CASE_ID, latest_run, run, write_catalogue

from trainperf.errors import TrainperfError
from trainperf.measure.host_turns import HostTurns, parse_patterns


class Runs:
    """Runs on one host, each in a thread holding a turn until told to end; what happened, in order."""

    def __init__(self, turns: HostTurns) -> None:
        self.turns = turns
        self.events: list[str] = []
        self.lock = threading.Lock()
        self.inside: dict[str, threading.Event] = {}
        self.waiting: dict[str, threading.Event] = {}
        self.end: dict[str, threading.Event] = {}
        self.threads: list[threading.Thread] = []

    def start(self, name: str, case_id: str) -> None:
        for table in (self.inside, self.waiting, self.end):
            table[name] = threading.Event()
        thread = threading.Thread(target=self._hold, args=(name, case_id), daemon=True)
        self.threads.append(thread)
        thread.start()

    def _hold(self, name: str, case_id: str) -> None:
        with self.turns.turn(case_id, lambda line: self.waiting[name].set()) as turn:
            assert turn is not None
            self._note(f"{name} in" + (" alone" if turn.alone else ""))
            self.inside[name].set()
            self.end[name].wait(10)
            self._note(f"{name} out")

    def _note(self, event: str) -> None:
        with self.lock:
            self.events.append(event)

    def join(self) -> None:
        for thread in self.threads:
            thread.join(10)
            assert not thread.is_alive()


def test_shared_turns_run_side_by_side_and_an_alone_turn_waits_for_them_and_is_not_starved(
    tmp_path: Path,
) -> None:
    runs = Runs(HostTurns(tmp_path / "host.lock", ("*-short-*",)))
    runs.start("gpu0", "sft_hf-qwen3_8b-lora-maxlen-b4")
    runs.start("gpu1", "sft_hf-qwen3_8b-full-long-b4")
    assert runs.inside["gpu0"].wait(10) and runs.inside["gpu1"].wait(10)  # both at once: side by side
    runs.start("short", "sft_hf-qwen3_8b-lora-short-b4")
    assert runs.waiting["short"].wait(10) and not runs.inside["short"].is_set()
    runs.start("gpu2", "sft_hf-qwen3_8b-qlora-long-b4")  # comes after the alone turn asked
    assert runs.waiting["gpu2"].wait(10)
    runs.end["gpu0"].set()
    runs.end["gpu1"].set()
    assert runs.inside["short"].wait(10)
    assert not runs.inside["gpu2"].is_set()  # nothing starts beside the alone run
    runs.end["short"].set()
    assert runs.inside["gpu2"].wait(10)
    runs.end["gpu2"].set()
    runs.join()
    order = runs.events
    assert order.index("short in alone") > max(order.index("gpu0 out"), order.index("gpu1 out"))
    assert order.index("gpu2 in") > order.index("short out")


def test_without_a_lock_file_there_are_no_turns_and_bad_input_is_one_line(tmp_path: Path) -> None:
    with HostTurns(None, ("*",)).turn("any", print) as turn:
        assert turn is None
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    unusable = HostTurns(blocked / "host.lock").turn("any", print)
    with (
        pytest.raises(TrainperfError, match=r"--perf-host-lock .*cannot open it.*give a file every run"),
        unusable,
    ):
        pass
    assert parse_patterns(" *-short-* , rl_trl-*,") == ("*-short-*", "rl_trl-*")
    with pytest.raises(ValueError, match="comma"):
        parse_patterns(" , ")


def test_a_run_alone_on_the_host_records_its_turn_and_says_so(pytester: pytest.Pytester) -> None:
    """A real CPU run under --perf-host-lock and --perf-alone: each child took the host alone."""
    write_catalogue(pytester)
    lock = pytester.path / "locks" / "host.lock"
    result = run(pytester, "--perf-host-lock", str(lock), "--perf-alone", "*-lora-short-*")
    result.assert_outcomes(passed=1)
    record = json.loads((latest_run(pytester) / "results" / f"{CASE_ID}.json").read_text())
    turns = [child["host_turn"] for child in record["runs"]]
    assert turns and all(turn["alone"] and turn["waited_s"] >= 0 for turn in turns)
    assert "ran alone on the host (--perf-host-lock)" in " ".join(record["verdict"]["notes"])
    assert lock.is_file()


def test_a_glob_with_an_unclosed_bracket_and_negative_seconds_are_refused_at_start(tmp_path: Path) -> None:
    """'[' would match no case id (fnmatch reads it as a literal), a negative watchdog would be off:
    both were accepted in silence."""
    from trainperf.ground.settings import resolve

    with pytest.raises(ValueError, match="unclosed"):
        parse_patterns("*-short-*,[")
    assert parse_patterns("*-b[48]") == ("*-b[48]",)
    for option, value in (("alone", "["), ("silent_timeout", "-5"), ("gpu_wait", "-1")):
        with pytest.raises(TrainperfError, match="is not valid"):
            resolve({option: value}, lambda _name: None, tmp_path)
