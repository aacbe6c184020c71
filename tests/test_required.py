"""The rule for a missing component: skipped with its reason on a developer's machine, a failure
naming it under CI (CI=true), so that CI never passes with a check silently left out."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = str(Path(__file__).parent)
TESTS = """
import required

def test_needs_a_module():
    required.module("no_such_module_for_trainperf", "pip install it")

def test_needs_a_program():
    required.program("no-such-program-for-trainperf", install="apt-get install it")

def test_has_what_it_needs():
    assert required.module("json", "(the standard library)").dumps([]) == "[]"
"""


def test_a_missing_component_skips_with_its_reason(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
    pytester.makepyfile(test_needs=TESTS)
    result = pytester.runpytest_subprocess("-rs", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=2)
    output = result.stdout.str()
    assert "test_needs.py::test_needs_a_module: the checks that use no_such_module_for_trainperf" in output
    assert "no-such-program-for-trainperf not found; apt-get install it" in output


def test_under_ci_a_missing_component_fails_with_its_reason(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
    pytester.makepyfile(test_needs=TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=2)
    output = result.stdout.str()
    assert (
        "cannot run under CI (CI=true): No module named 'no_such_module_for_trainperf'; pip install it"
        in output
    )
    assert "During handling of the above exception" not in output
