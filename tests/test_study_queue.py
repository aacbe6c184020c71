"""benchmarks/study_queue_gpu.sh: one worker per queue runs its lines in order; a `pytest` line runs the
suite through scripts/offline-run.sh into the study folder, and each line's own exit status is what
the queue's state records (a failing line reads as failing)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from trainperf.paths import REPO_ROOT

TINY = '-k "qwen3_tiny and lora and short and not qlora" --perf-steps 4 --perf-store off'


def _queue(tmp_path: Path, *lines: str) -> tuple[Path, dict[str, str]]:
    queues = tmp_path / "queues"
    queues.mkdir()
    (queues / "gpu0.plan").write_text("\n".join([*lines, "end"]) + "\n")
    return queues, _env(tmp_path)


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "STUDIES": str(tmp_path / "studies"),
        "TRAINPERF_SITE_ROOT": str(tmp_path / "sites"),
    }


def _run(action: list[str], env: dict[str, str]) -> str:
    completed = subprocess.run(
        ["bash", "benchmarks/study_queue_gpu.sh", *action],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed.stdout


def test_pytest_lines_run_in_order_and_each_records_its_own_exit_status(tmp_path: Path) -> None:
    queues, env = _queue(
        tmp_path,
        f"tiny | - | pytest | -- perf_tests/test_sft_hf.py {TINY}",
        "nothing | - | pytest | -- perf_tests/test_sft_hf.py -k no_such_case --perf-store off",
    )
    _run(["start", str(queues)], env)
    status = _run(["wait", str(queues), "500"], env)
    assert "end" in status, status
    state = (queues / "gpu0.state").read_text()
    assert "done tiny: exit 0" in state, state
    assert "done nothing: exit 5" in state, state  # pytest's "no tests ran", not the date's status
    assert state.index("start tiny") < state.index("start nothing"), state
    assert (tmp_path / "studies" / "tiny" / "results.tgz").is_file()
    assert "PASSED" in (tmp_path / "studies" / "tiny" / "pytest.log").read_text()


def _spans(state: str) -> dict[str, tuple[str, str]]:
    """Study name -> (start, done) times (HH:MM:SS, comparable as strings within one day)."""
    starts, spans = {}, {}
    for line in state.splitlines():
        time, word, *rest = line.split()
        if word == "start":
            starts[rest[0]] = time
        elif word == "done":
            name = rest[0].rstrip(":")
            spans[name] = (starts[name], time)
    return spans


def test_an_alone_line_never_runs_beside_another_study(tmp_path: Path) -> None:
    """Two queues, as on a 2-GPU host: the 'alone' study shares no second with the other queue's
    studies, whichever queue takes the host first; the others run as usual."""
    queues = tmp_path / "queues"
    queues.mkdir()
    (queues / "gpu0.plan").write_text(
        f"first | - | pytest | -- perf_tests/test_sft_hf.py {TINY}\n"
        f"second | - | pytest | -- perf_tests/test_sft_hf.py {TINY}\nend\n"
    )
    (queues / "gpu1.plan").write_text(f"solo | - | alone pytest | -- perf_tests/test_sft_hf.py {TINY}\nend\n")
    env = _env(tmp_path)
    _run(["start", str(queues)], env)
    _run(["wait", str(queues), "500"], env)
    spans = _spans((queues / "gpu0.state").read_text() + (queues / "gpu1.state").read_text())
    assert set(spans) == {"first", "second", "solo"}, spans
    solo_start, solo_done = spans["solo"]
    for name in ("first", "second"):
        start, done = spans[name]
        assert done <= solo_start or start >= solo_done, (name, spans)  # one after the other
    assert "start solo (alone)" in (queues / "gpu1.state").read_text()
    assert "done solo: exit 0" in (queues / "gpu1.state").read_text()
