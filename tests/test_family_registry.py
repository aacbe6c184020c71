"""One registry of workload families (``families.FAMILIES``): each family names its child module,
and the child harness finds a family's module through it, so a family is added in one place."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

from trainperf.families import FAMILIES, Family
from trainperf.workloads import child
from trainperf.workloads.protocol import EXIT_OK, ChildSpec

WORKLOADS = Path(__file__).resolve().parents[1] / "src" / "trainperf" / "workloads"


def _defines_run(path: Path) -> bool:
    return any(
        isinstance(node, ast.FunctionDef) and node.name == "run" for node in ast.parse(path.read_text()).body
    )


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_a_family_names_a_child_module_that_runs_it(name: str) -> None:
    family = FAMILIES[name]
    assert family.name == name and family.kind in ("sft", "rl") and family.label
    # Found without importing it: the child modules import their training stack.
    spec = importlib.util.find_spec(family.child)
    assert spec is not None and spec.origin, f"{name}: no module {family.child}"
    assert _defines_run(Path(spec.origin)), f"{family.child} has no run(spec, recorder)"


def test_every_child_module_belongs_to_a_family() -> None:
    children = {f"trainperf.workloads.{p.stem}" for p in WORKLOADS.glob("*.py") if _defines_run(p)}
    assert children == {family.child for family in FAMILIES.values()}


def test_a_family_registered_once_is_run_by_the_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "toy_workload.py").write_text(
        "def run(spec, recorder):\n    return {'effective_config': {'steps': spec.steps}}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))

    class Toy(Family):
        name = "toy"
        child = "toy_workload"
        kind = "sft"

    monkeypatch.setitem(FAMILIES, "toy", Toy())
    result: dict[str, object] = {}
    spec = ChildSpec(case={"family": "toy"}, steps=3, out_dir=str(tmp_path))
    attempt = child._run_family(spec, tmp_path, 0, result)
    sys.modules.pop("toy_workload", None)
    assert (attempt.code, result["outcome"]) == (EXIT_OK, "ok"), result
    assert result["effective_config"] == {"steps": 3}


def test_an_unknown_family_in_a_spec_is_one_line(tmp_path: Path) -> None:
    result: dict[str, object] = {}
    child._run_family(ChildSpec(case={"family": "nope"}, steps=1, out_dir=str(tmp_path)), tmp_path, 0, result)
    assert result["outcome"] == "crash" and "unknown workload family 'nope'" in str(result["message"])


def test_every_family_records_kernel_time_and_verl_takes_its_last_steps() -> None:
    """Every family's baselines need kernel time (``trainperf baselines --stale`` lists those without);
    verl records it in its own processes over its last steps, the others over an early window."""
    from trainperf.families import FAMILIES

    assert all(family.kernel_time for family in FAMILIES.values())
    assert {name for name, family in FAMILIES.items() if family.kernel_window_at_end} == {"rl_verl"}
