"""The package's shape: imports run down the layers only, and modules and functions stay small."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "trainperf"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60

# Lowest first; a module may import its own layer and those below (the package docstring says why).
LAYERS: dict[str, int] = {
    "__init__": 0, "case": 0, "errors": 0, "paths": 0, "redact": 0, "result": 0, "stored_verdict": 0,
    "jsonio": 0, "cliff_record": 0, "pids": 0, "run_record": 0, "limits_record": 0, "memory_estimate": 0,
    "workloads.protocol": 0, "trace_record": 0, "profile_record": 0, "fingerprint_record": 0,
    "reference_record": 0, "diagnosis_record": 0, "run_checks_record": 0, "host_index_record": 0,
    "child_report_record": 0, "case_record": 0, "config_record": 0,
    "synth": 1, "traces": 1,
    "judge": 2,
    "store": 3,
    "measure": 4, "plan": 4,
    "families": 5,
    "workloads": 6,
    "ground": 7,
    "recording": 8, "launch": 8,
    "fleet": 9,
    "run": 10,
    "studies": 11,
    "report": 12,
    "cli": 13, "plugin": 13, "xdist": 13,
}  # fmt: skip


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE).with_suffix("").parts)


def layer_of(module: str) -> int:
    """The layer of a dotted module name inside the package (the longest prefix in ``LAYERS``)."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in LAYERS:
            return LAYERS[".".join(parts[:end])]
    raise KeyError(f"{module} has no layer: add its package to LAYERS")


def _imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and node.module.startswith("trainperf")
        ):
            base = node.module.removeprefix("trainperf").lstrip(".")
            found += [f"{base}.{alias.name}".lstrip(".") if not base else base for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [
                a.name.removeprefix("trainperf.") for a in node.names if a.name.startswith("trainperf.")
            ]
    return [name for name in found if name]


# One test per rule over every module (the pass count counts rules, not modules); a failure names
# every module that breaks the rule.


def test_imports_run_down_the_layers() -> None:
    upward = {}
    for path in _modules():
        own = layer_of(_name(path))
        if names := [name for name in _imports(path) if layer_of(name) > own]:
            upward[f"{_name(path)} (layer {own})"] = names
    assert not upward, f"imports from higher layers: {upward}"


def test_the_layer_check_sees_an_upward_import() -> None:
    assert layer_of("judge.compare") < layer_of("report.table")
    assert layer_of("workloads.protocol") < layer_of("workloads.child")


def test_modules_stay_under_the_line_limit() -> None:
    sizes = {_name(path): len(path.read_text().splitlines()) for path in _modules()}
    long = {name: lines for name, lines in sizes.items() if lines > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}: split them"


def _long_functions() -> dict[str, int]:
    found = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found[f"{path.relative_to(PACKAGE)}:{node.name}"] = length
    return found


def test_functions_stay_under_the_line_limit() -> None:
    long = _long_functions()
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}: split them"


def _plugin_logic(source: str) -> list[str]:
    """What a plugin module defines beyond wiring: classes, and top-level functions that are
    neither ``pytest_*`` hooks nor ``@pytest.fixture`` functions."""

    def is_fixture(decorator: ast.expr) -> bool:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        return isinstance(target, ast.Attribute) and target.attr == "fixture"

    found = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef):
            found.append(f"class {node.name}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not (
            node.name.startswith("pytest_") or any(map(is_fixture, node.decorator_list))
        ):
            found.append(f"def {node.name}")
    return found


def test_the_plugin_only_wires_hooks() -> None:
    logic = _plugin_logic((PACKAGE / "plugin.py").read_text())
    assert not logic, f"plugin.py holds logic {logic}: move it to run/ (cases) or report/ (summaries)"


def test_the_wiring_check_sees_logic() -> None:
    source = (
        "import pytest\n"
        "class Harness: ...\n"
        "def helper(): ...\n"
        "def pytest_configure(config): ...\n"
        "@pytest.fixture(scope='session')\ndef session_thing(): ...\n"
        "@pytest.fixture\ndef thing(): ...\n"
    )
    assert _plugin_logic(source) == ["class Harness", "def helper"]


# The names of a run folder's files, each spelled once: in the core-layer module that owns it
# (``ground.folder.RunFolder`` builds every path from these constants).
OWNED_NAMES: dict[str, str] = {
    "run.json": "paths.py", "run*.json": "paths.py", "results": "paths.py", "results.jsonl": "paths.py",
    "traces": "paths.py", "interrupted.json": "paths.py",
    "summary.md": "paths.py", "index.html": "paths.py", "benchmark.json": "paths.py",
    "steps.jsonl": "workloads/protocol.py", "spec.json": "workloads/protocol.py",
}  # fmt: skip


def _spelled_names(source: str) -> set[str]:
    """The owned names a module spells as a path (a string without spaces, one of whose
    ``/``-separated parts is the name); docstrings and prose messages are not paths."""
    tree = ast.parse(source)
    bare_strings = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    found = set()
    for node in ast.walk(tree):
        is_path = (
            isinstance(node, ast.Constant) and isinstance(node.value, str) and not node.value.split()[1:]
        )
        if is_path and id(node) not in bare_strings:
            found |= set(node.value.split("/")) & set(OWNED_NAMES)
    return found


def test_run_folder_names_are_spelled_by_their_owner() -> None:
    strays = {}
    for path in _modules():
        module = str(path.relative_to(PACKAGE))
        if names := sorted(name for name in _spelled_names(path.read_text()) if OWNED_NAMES[name] != module):
            strays[module] = names
    assert not strays, (
        f"run folder names spelled outside their owner: {strays}: use ground.folder.RunFolder (or the "
        "constants in paths.py, workloads/protocol.py below it)"
    )


def test_the_name_check_sees_a_spelled_path() -> None:
    source = (
        '"""A docstring may say run.json."""\n'
        'page = run_dir / "index.html"\n'
        'link = f"{url}/index.html"\n'
        'nested = "results/x.json"\n'
        'message = "rebuild summary.md from results/*.json"\n'
    )
    assert _spelled_names(source) == {"index.html", "results"}


# The results history is reached through ``store.interface.HistoryStore``: only ``store/`` speaks
# SQL, so a second back end replaces modules there and nothing else.
SQL_LIBRARIES = ("sqlalchemy", "psycopg", "sqlite3")


def _sql_imports(source: str) -> set[str]:
    """The SQL libraries a module imports, at its top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        found |= {name.split(".")[0] for name in names if name.split(".")[0] in SQL_LIBRARIES}
    return found


def test_only_the_store_speaks_sql() -> None:
    speaking = {_name(path) for path in _modules() if _sql_imports(path.read_text())}
    outside = sorted(name for name in speaking if not name.startswith("store."))
    assert not outside, f"SQL outside store/: {outside}: go through trainperf.store.interface.HistoryStore"
    # Nor does anything outside store/ import the modules that hold the SQL.
    reaching = {}
    for path in _modules():
        if not _name(path).startswith("store.") and (names := sorted(set(_imports(path)) & speaking)):
            reaching[_name(path)] = names
    assert not reaching, f"SQL modules imported outside store/: {reaching}: use store.interface"


def test_the_sql_check_sees_an_import() -> None:
    source = (
        "import sqlalchemy as sa\n"
        "from sqlalchemy.engine import Connection\n"
        "def read():\n    import psycopg\n"
        "import json\n"
        "from trainperf.store import db\n"
    )
    assert _sql_imports(source) == {"sqlalchemy", "psycopg"}
