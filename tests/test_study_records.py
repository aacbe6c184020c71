"""The studies' records read back as they were written: every committed ``ab.json`` and ``bisect.json``
(most of them packed in their measurement's ``raw.tar.xz``) reads into its typed record and
writes out the same JSON, key for key and in the same order, and the archived fidelity run's report
renders the text it printed, so a study measured before the records were typed still renders as it did."""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from trainperf.case import Outcome
from trainperf.families.candidates import BrokenEnvironment, Candidate, CandidateOptions
from trainperf.plan.bisect import Bisection, Judgement
from trainperf.studies.ab_record import ABRecord, BrokenSide, SideRecord
from trainperf.studies.bisect import BisectRequest, Builder, earlier_steps, write_record
from trainperf.studies.bisect_record import BisectRecord
from trainperf.studies.comparison_record import Comparison, EnvironmentChange
from trainperf.studies.fidelity_record import FidelityReport, FidelityState
from trainperf.studies.fidelity_render import render
from trainperf.studies.precision import Precision
from trainperf.workloads.protocol import BARE_WINDOW_START

ROOT = Path(__file__).resolve().parents[1]
MEASUREMENTS = ROOT / "docs" / "measurements"


def _committed(name: str) -> list[tuple[str, str]]:
    """Every record file ``name`` of the measurements as (its study, its text): the ones committed as
    files, then the packed ones (``.../<study>/<name>`` in a measurement's ``raw.tar.xz``)."""
    listed = subprocess.run(
        ["git", "ls-files", f"docs/measurements/*{name}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    found = [
        (str(Path(line).parent.relative_to("docs/measurements")), (ROOT / line).read_text())
        for line in listed.stdout.splitlines()
    ]
    for archive in sorted(MEASUREMENTS.glob("*/raw.tar.xz")):
        with tarfile.open(archive, "r|xz") as packed:
            for member in packed:
                parts = member.name.removeprefix("./").split("/")
                if member.isfile() and len(parts) >= 2 and parts[-1] == name:
                    data = packed.extractfile(member)
                    assert data is not None
                    found.append((f"{archive.parent.name}/{parts[-2]}", data.read().decode()))
    return found


AB_RECORDS = _committed("ab.json")
BISECT_RECORDS = _committed("bisect.json")


def test_the_committed_studies_are_there() -> None:
    assert len(AB_RECORDS) >= 10 and len(BISECT_RECORDS) >= 6


@pytest.mark.parametrize("study", AB_RECORDS, ids=lambda study: study[0])
def test_a_committed_ab_record_reads_back_unchanged(study: tuple[str, str]) -> None:
    stored = json.loads(study[1])
    record = ABRecord.from_dict(stored)
    assert record is not None
    assert json.dumps(record.to_dict(), indent=1) == json.dumps(stored, indent=1)
    assert ABRecord.from_dict(record.to_dict()) == record


def test_a_candidate_side_and_its_verdict_are_typed() -> None:
    stored = json.loads(dict(AB_RECORDS)["2026-11-29-h200-upgrades/peft-0.18.0-0.21.2-full-short"])
    record = ABRecord.from_dict(stored)
    assert record is not None and record.a is not None
    assert record.a.pins == {"peft": "0.18.0"} and record.a.pins_label == "peft 0.18.0"
    assert record.a.moved == () and record.a.conflicts == ()
    assert record.precision == Precision("sft_hf-qwen3_8b-full-short-b4", 16.322)
    assert list(record.verdict_dict()) == ["verdict", "a_not_run", "broken_cases", "comparison", "precision"]


def test_a_study_whose_side_cannot_run_keeps_only_what_it_had() -> None:
    record = ABRecord(
        created="2026-11-25T10:00:00+00:00",
        rounds=2,
        selection=("-m", "h100"),
        a=SideRecord(pins={"peft": "0.17.0"}),
        b=SideRecord(pins={"peft": "0.21.2"}),
        verdict="broken-environment",
        broken=BrokenSide("a", "peft", "ImportError"),
    )
    assert list(record.to_dict()) == ["kind", "created", "rounds", "selection", "a", "b", "verdict", "broken"]
    assert record.to_dict()["a"] == {"pins": {"peft": "0.17.0"}}
    assert ABRecord.from_dict(record.to_dict()) == record


JUDGED_AB_RECORDS = [study for study in AB_RECORDS if "comparison" in json.loads(study[1])]


@pytest.mark.parametrize("study", JUDGED_AB_RECORDS, ids=lambda study: study[0])
def test_a_committed_studys_comparison_is_read_case_by_case(study: tuple[str, str]) -> None:
    stored = json.loads(study[1])["comparison"]
    record = ABRecord.from_dict(json.loads(study[1]))
    assert record is not None and record.comparison is not None
    assert (record.comparison.run_a, record.comparison.run_b) == (stored["run_a"], stored["run_b"])
    assert len(record.comparison.environment_changes or ()) == len(stored["environment_changes"])
    assert [(case.case_id, case.verdict) for case in record.compared_cases] == [
        (case["case_id"], case["verdict"]) for case in stored["cases"]
    ]
    for case, written in zip(record.compared_cases, stored["cases"], strict=True):
        figures = [(m.metric, m.verdict, m.ratio, m.gated) for m in case.metrics or ()]
        assert figures == [(m["metric"], m["verdict"], m["ratio"], m["gated"]) for m in written["metrics"]]


STORED_COMPARISON = {
    "run_a": "trl 1.0.0", "run_b": "trl 1.16.0", "gpu_class": "h200", "strict": False,
    "environment_changes": [
        {"key": "trl", "a": "1.0.0", "b": "1.16.0"}, {"key": "vllm", "a": None, "b": "0.10"},
    ],
    "cases": [{
        "case_id": "rl_trl-x", "verdict": "pass", "fails": False, "reason": "", "outcome_a": "ok",
        "metrics": [{
            "metric": "step_time_s", "verdict": "pass", "a": None, "b": 1.5, "ratio": None,
            "interval": [None, 1.02], "p_value": 0.5, "gated": True, "note": "", "from_a_newer_trainperf": 1,
        }],
        "config_changes": [],
    }],
    "failed": [], "exit_status": 0, "from_a_newer_trainperf": {"x": 1},
}  # fmt: skip


def test_a_comparison_keeps_what_it_does_not_read_as_written_and_in_its_place() -> None:
    comparison = Comparison.from_dict(STORED_COMPARISON)
    assert comparison is not None and comparison.environment_changes is not None
    assert comparison.environment_changes[1] == EnvironmentChange("vllm", None, "0.10")
    (case,) = comparison.cases or ()
    step = case.metric("step_time_s")
    assert step is not None and step.a is None and step.b == 1.5 and step.interval == (None, 1.02)
    assert step.unread == {"a": None, "ratio": None, "p_value": 0.5, "note": "", "from_a_newer_trainperf": 1}
    assert case.unread == {"fails": False, "outcome_a": "ok", "config_changes": []} and case.reason == ""
    assert json.dumps(comparison.to_dict()) == json.dumps(STORED_COMPARISON)
    # A case that does not read (no verdict) keeps the list whole, as written.
    cases = [*STORED_COMPARISON["cases"], {"case_id": "y"}]  # type: ignore[misc]
    unread = Comparison.from_dict({**STORED_COMPARISON, "cases": cases})
    assert unread is not None and unread.cases is None and unread.unread["cases"] == cases
    assert json.dumps(unread.to_dict()) == json.dumps({**STORED_COMPARISON, "cases": cases})


def test_a_moved_package_keeps_an_absent_version_as_null() -> None:
    side = SideRecord("p/bin/python", "x", {"trl": "1.0"}, (("rich", None, "13.0"),), ("a conflict",))
    assert side.to_dict()["moved"] == [["rich", None, "13.0"]]
    assert SideRecord.from_dict(side.to_dict()) == side


def test_what_is_not_a_record_reads_as_none() -> None:
    assert ABRecord.from_dict([]) is None
    assert SideRecord.from_dict(None) is None
    assert Precision.from_dict({"case": "x"}) is None


@pytest.mark.parametrize("study", BISECT_RECORDS, ids=lambda study: study[0])
def test_a_committed_bisect_record_reads_back_unchanged(study: tuple[str, str]) -> None:
    stored = json.loads(study[1])
    record = BisectRecord.from_dict(stored)
    assert record is not None
    assert json.dumps(record.to_dict(), indent=1) == json.dumps(stored, indent=1)
    assert BisectRecord.from_dict(record.to_dict()) == record


def _request(output: Path, rounds: int = 2) -> BisectRequest:
    return BisectRequest(
        "trl", "1.0.0", "1.3.0", ("1.0.0", "1.3.0"), ["-k", "grpo"], rounds, "regression", output
    )


def test_a_bisection_goes_on_from_the_steps_it_wrote(tmp_path: Path) -> None:
    """The steps written as a bisection stops are the steps the same request reuses; a broken one is
    tried again, and another request reuses none."""
    options = CandidateOptions(base_python="python", wheelhouse=None, root=tmp_path, allow_conflicts=False)
    build = Builder("trl", options, say=lambda _line: None)
    build.built["1.1.0"] = Candidate(tmp_path / "python", {"trl": "1.1.0"}, [("rich", None, "13.0")])
    build.broken["1.2.0"] = BrokenEnvironment("trl", "ImportError: no _generate")
    steps = [
        Judgement("1.1.0", False, 1.0, "pass", detail=""),
        Judgement("1.2.0", False, None, "cannot run", broken=True),
        Judgement("1.3.0", True, 1.2, "regressed", detail="x: matmul +20%"),
    ]
    result = Bisection(["1.0.0", "1.1.0", "1.2.0", "1.3.0"], steps, first_bad="1.3.0", unresolved=["1.2.0"])
    write_record(_request(tmp_path), result, build, {"x": "matmul moved"})
    stored = json.loads((tmp_path / "bisect.json").read_text())
    assert stored["moved"] == {"1.1.0": [["rich", None, "13.0"]]} and stored["broken"]["1.2.0"]
    assert stored["steps"][2] == {
        "version": "1.3.0", "bad": True, "broken": False, "ratio": 1.2, "verdict": "regressed",
        "kernels": "x: matmul +20%",
    }  # fmt: skip
    record = BisectRecord.from_dict(stored)
    assert record is not None and [step.judgement() for step in record.steps] == steps
    reused = earlier_steps(_request(tmp_path), say=lambda _line: None)
    assert list(reused) == ["1.1.0", "1.3.0"] and reused["1.3.0"].verdict == "regressed (measured earlier)"
    assert earlier_steps(_request(tmp_path, rounds=3), say=lambda _line: None) == {}


FIDELITY_RUN = ROOT / "docs/measurements/2026-11-21-h100-fidelity/raw.tar.xz"


def _archived(name: str) -> str:
    with tarfile.open(FIDELITY_RUN) as archive:
        member = archive.extractfile(f"run/{name}")
        assert member is not None
        return member.read().decode()


def test_the_archived_fidelity_report_reads_back_and_renders_as_it_did() -> None:
    """The H100 fidelity run's report, written before the paired overhead and the window's noise
    existed: it reads back without them, and renders the text the run printed (its noise figures in
    the file's sorted order: the run printed them in the order it measured them)."""
    stored = json.loads(_archived("fidelity-report.json"))
    report = FidelityReport.from_dict(stored)
    assert report.overhead_paired is None and report.window_noise is None
    written = json.loads(json.dumps(report.to_dict()))
    # The plan is written whole: the window's start the run used, which its plan left to the default.
    assert written.pop("plan") == {**stored.pop("plan"), "window_after": BARE_WINDOW_START}
    assert written == stored
    printed = _archived("fidelity.txt").splitlines()
    rendered = render(report).splitlines()
    assert [line for line in rendered if not line.startswith("noise")] == [
        line for line in printed if not line.startswith("noise")
    ]


def test_the_fidelity_state_reads_back_unchanged() -> None:
    stored = json.loads(_archived("fidelity.json"))
    state = FidelityState.from_dict(stored)
    assert state.children[0].outcome is Outcome.OK and len(state.children) == 16
    assert state.to_dict()["children"] == stored["children"]
