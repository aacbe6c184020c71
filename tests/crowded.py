"""What an end-to-end self-test may expect of a real run on a host that other jobs crowd.

The suite's own host CPU watch (docs/faults.md, "A neighbour on the host CPU") calls a run
`contaminated` when another job used at least a quarter of a core on a saturated host (90% busy,
or under half a core idle), or when the hypervisor took 5% of the CPU time. A contaminated run is
shown, never judged, and never written as a baseline. So on a crowded host:

- a planted regression reads `contaminated` and its case passes: the tests accept that, and only
  that, where the watch recorded a host CPU reason for the run; elsewhere it must read `regressed`
  and fail its case;
- a baseline run writes no baseline, and nothing later can be judged against one: a test that
  needs it cannot check its claim there. It skips with the watch's reason (under CI, where the
  runner is the suite's alone, it fails: ``required.missing``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from required import missing

from trainperf.judge.contamination import Contamination
from trainperf.run_record import RunRecord


def crowding(result: dict[str, Any]) -> str | None:
    """The host CPU watch's reasons when it found one of the result's runs crowded, else None."""
    contamination = Contamination.of_runs([RunRecord.from_dict(run) for run in result["runs"]])
    if contamination is None:
        return None
    assert all(reason.startswith("host CPU:") for reason in contamination.reasons), contamination.reasons
    return "; ".join(contamination.reasons)


def result_of(run_dir: Path, case_id: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((run_dir / "results" / f"{case_id}.json").read_text())
    return loaded


def written_baseline(baselines: Path, run_dir: Path, case_id: str) -> dict[str, Any]:
    """The baseline a ``--perf-update-baselines`` run wrote for ``case_id``: there must be one unless
    the host was crowded during the run, when there must be none and the test cannot go on."""
    path = baselines / "cpu" / f"{case_id}.json"
    crowded = crowding(result_of(run_dir, case_id))
    if crowded is not None:
        assert not path.exists(), f"a crowded run was written as a baseline: {crowded}"
        missing("a check that needs a baseline", f"the host was crowded during the baseline run ({crowded})")
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def planted_verdict(session: pytest.RunResult, run_dir: Path, case_id: str) -> str:
    """``regressed`` (its case failed) or, where the watch recorded a crowded host and only there,
    ``contaminated`` (its case passed): the one this run justifies, checked."""
    result = result_of(run_dir, case_id)
    verdict = result["verdict"]
    crowded = crowding(result)
    if crowded is None:
        assert verdict["verdict"] == "regressed", verdict
        session.assert_outcomes(failed=1)
    else:
        assert verdict["verdict"] == "contaminated" and "host CPU:" in verdict["reason"], (verdict, crowded)
        session.assert_outcomes(passed=1)
    return str(verdict["verdict"])
