"""Candidate environments: the pins' form, what pip declares, what else moved, and a broken one."""

from __future__ import annotations

import pytest

from trainperf.case_record import CaseRecord
from trainperf.errors import TrainperfError
from trainperf.families.candidates import BrokenEnvironment, declared_conflicts, moved_packages, parse_pins
from trainperf.result import CaseResult
from trainperf.studies.ab import broken_cases, unmeasured_cases


def test_pins_are_exact_and_normalised() -> None:
    assert parse_pins(["Transformers==5.24.0", "hf_xet==1.8.0"]) == {
        "transformers": "5.24.0",
        "hf-xet": "1.8.0",
    }
    for bad in ("transformers", "transformers>=5", "transformers==", "==5.0", "peft==0.21,<1"):
        with pytest.raises(
            TrainperfError, match=r"is not NAME==VERSION: give e\.g\. --pin transformers==5\.24\.0"
        ):
            parse_pins([bad])


def test_pip_declared_conflicts_are_read_from_both_of_its_forms() -> None:
    after_install = (
        "ERROR: pip's dependency resolver does not currently take into account all the packages that are "
        "installed. This behaviour is the source of the following dependency conflicts.\n"
        "trl 1.16.0 requires accelerate>=1.10.1, but you have accelerate 1.10.0 which is incompatible.\n"
    )
    assert declared_conflicts(after_install) == [
        "trl 1.16.0 requires accelerate>=1.10.1, but you have accelerate 1.10.0 which is incompatible"
    ]
    check = "trl 1.16.0 has requirement accelerate>=1.10.1, but you have accelerate 1.10.0.\n"
    assert declared_conflicts(check) == [
        "trl 1.16.0 has requirement accelerate>=1.10.1, but you have accelerate 1.10.0"
    ]
    assert declared_conflicts("Successfully installed accelerate-1.10.0\n") == []


def test_what_else_moved_leaves_the_pins_out() -> None:
    base = {"transformers": "5.17.0", "tokenizers": "0.23.2", "torch": "2.11.0"}
    candidate = {"transformers": "5.0.0", "tokenizers": "0.22.2", "torch": "2.11.0", "typer-slim": "0.24.0"}
    assert moved_packages(base, candidate, {"transformers": "5.0.0"}) == [
        ("tokenizers", "0.23.2", "0.22.2"),
        ("typer-slim", None, "0.24.0"),
    ]


def test_a_broken_environment_is_one_line_naming_the_package() -> None:
    error = BrokenEnvironment("peft 0.17.0", "import peft: ImportError: cannot import name\n 'HybridCache'")
    assert (
        str(error)
        == "broken-environment: peft 0.17.0: import peft: ImportError: cannot import name 'HybridCache'"
    )
    assert isinstance(error, TrainperfError)


def _result(case_id: str, outcome: str, message: str = "") -> CaseResult:
    return CaseResult(
        case_id=case_id, case=CaseRecord(), gpu_class="cpu", outcome=outcome, message=message, metrics={}
    )


def test_a_crash_under_b_is_broken_an_oom_is_measured() -> None:
    a = [_result("x", "ok"), _result("y", "ok"), _result("z", "crash", "boom")]
    b = [_result("x", "crash", "Traceback ...\nAttributeError: no attribute 'foo'"), _result("y", "oom"),
         _result("z", "crash")]  # fmt: skip
    assert broken_cases(a, b) == {"x": "AttributeError: no attribute 'foo'"}
    assert unmeasured_cases(a) == {"z": "boom"} and unmeasured_cases(b[1:2]) == {}
