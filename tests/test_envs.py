"""Workload environments: spec parsing, creation commands, interpreter precedence, skips, env list."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from trainperf.cli import main
from trainperf.errors import TrainperfError
from trainperf.families.env_create import CreateOptions, creation_commands, probe_versions, render_list
from trainperf.families.envs import (
    ENVS_DIR,
    env_var,
    known_environments,
    load_spec,
    missing_message,
    parse_overrides,
    resolve_interpreter,
)
from trainperf.workloads.child import missing_module_message


def test_known_environments_and_the_unsloth_resolutions() -> None:
    assert known_environments() == ["hf", "unsloth", "verl-sglang", "verl-vllm"]
    spec = load_spec("unsloth")
    # certifi >= 2026.10.19 does not exist: unsloth and unsloth-zoo go in without their declared deps.
    assert {r.split("==")[0] for r in spec.no_deps} == {"unsloth", "unsloth-zoo", "xformers"}
    assert spec.pins["fsspec"] == "2026.2.0" and spec.pins["datasets"].startswith("4.")
    assert spec.pins["trl"] == "1.15.0" and spec.pins["transformers"] == "5.17.0"
    sglang = load_spec("verl-sglang")
    # One transformers for verl and sglang, both of which are installed --no-deps.
    assert sglang.pins["transformers"] == "5.9.0"
    assert {r.split("==")[0] for r in sglang.no_deps} == {"verl", "sglang"}
    assert not load_spec("verl-vllm").no_deps


def test_unknown_environment_is_one_line() -> None:
    with pytest.raises(TrainperfError, match="unknown environment 'nope'.*known: hf, unsloth"):
        load_spec("nope")
    with pytest.raises(TrainperfError, match=r"^unknown environment 'cpu'.*\(known: hf, unsloth[^\n]*$"):
        load_spec("cpu")  # the CPU torch pin is not an environment


def test_spec_includes_are_inlined(tmp_path: Path) -> None:
    (tmp_path / "base.txt").write_text("a==1\n# trainperf: no-deps\nb==2\n")
    (tmp_path / "top.txt").write_text("-r base.txt\nc==3  # why\n# trainperf: no-deps\nd==4\n")
    spec = load_spec("top", tmp_path)
    assert spec.requirements == ("a==1", "c==3") and spec.no_deps == ("b==2", "d==4")


def _options(tmp_path: Path, **kw: object) -> CreateOptions:
    base = {"prefix": tmp_path / "env", "python": "/usr/bin/python3", "uv": None, "cpu_only": False}
    base.update(kw)
    return CreateOptions(**base)  # type: ignore[arg-type]


def test_creation_commands_pip_on_a_cpu_machine(tmp_path: Path) -> None:
    files = (tmp_path / "r.txt", tmp_path / "n.txt")
    commands = creation_commands(load_spec("unsloth"), _options(tmp_path, cpu_only=True), files)
    pip = [str(tmp_path / "env/bin/python"), "-m", "pip", "install", "--disable-pip-version-check"]
    assert commands[0] == ["/usr/bin/python3", "-m", "venv", str(tmp_path / "env")]
    assert commands[1] == [*pip, "torch==2.13.0"]  # cpu.txt's pin, not its -r hf.txt
    assert commands[2][:-2] == pip and commands[2][-2] == "-e"
    assert commands[3] == [*pip, "-r", str(files[0])]
    assert commands[4] == [*pip, "--no-deps", "-r", str(files[1])]


def test_creation_commands_uv_offline_from_wheels_on_a_gpu_image(tmp_path: Path) -> None:
    files = (tmp_path / "r.txt", tmp_path / "n.txt")
    options = _options(
        tmp_path, uv="/bin/uv", wheels=(tmp_path / "w1", tmp_path / "w2"), system_site_packages=True
    )
    commands = creation_commands(load_spec("verl-vllm"), options, files)
    assert commands[0] == [
        "/bin/uv",
        "venv",
        "--python",
        "/usr/bin/python3",
        str(tmp_path / "env"),
        "--system-site-packages",
    ]
    offline = ["--no-index", "--find-links", str(tmp_path / "w1"), "--find-links", str(tmp_path / "w2")]
    assert all(
        c[:5] == ["/bin/uv", "pip", "install", "--python", str(tmp_path / "env/bin/python")]
        for c in commands[1:]
    )
    assert all(c[5:10] == offline for c in commands[1:])
    assert len(commands) == 3  # no CPU torch on a GPU machine, no no-deps section in verl-vllm


def _fake_python(path: Path) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    return str(path)


def test_interpreter_precedence(tmp_path: Path) -> None:
    venvs = tmp_path / ".venvs"
    made = _fake_python(venvs / "unsloth/bin/python")
    pointed = _fake_python(tmp_path / "other/bin/python")
    by_var = _fake_python(tmp_path / "var/bin/python")

    def pick(**kw: object) -> object:
        args: dict[str, object] = {
            "perf_python": None,
            "overrides": {},
            "environ": {},
            "venvs_dir": venvs,
            "current": "/cur",
        }
        args.update(kw)
        return resolve_interpreter("unsloth", **args)  # type: ignore[arg-type]

    assert pick(perf_python="/all").path == "/all"  # type: ignore[attr-defined]
    assert pick(perf_python="/all", overrides={"unsloth": pointed}).source == "--perf-python"  # type: ignore[attr-defined]
    chosen = pick(overrides={"unsloth": pointed}, environ={"TRAINPERF_ENV_UNSLOTH": by_var})
    assert chosen.path == pointed and chosen.isolated  # type: ignore[attr-defined]
    assert pick(environ={"TRAINPERF_ENV_UNSLOTH": by_var}).path == by_var  # type: ignore[attr-defined]
    assert pick().path == made and pick().source == ".venvs/unsloth"  # type: ignore[attr-defined]
    os.remove(made)
    assert pick() is None  # no fallback to this interpreter for a family's own environment
    hf = resolve_interpreter(
        "hf", perf_python=None, overrides={}, environ={}, venvs_dir=venvs, current="/cur"
    )
    assert hf is not None and hf.path == "/cur" and not hf.isolated
    with pytest.raises(TrainperfError, match="TRAINPERF_ENV_UNSLOTH unsloth=.* is not a Python interpreter"):
        pick(environ={"TRAINPERF_ENV_UNSLOTH": str(tmp_path / "missing")})


def test_overrides_and_messages() -> None:
    assert parse_overrides("unsloth=/a/python, verl-vllm=/b/python") == {
        "unsloth": "/a/python",
        "verl-vllm": "/b/python",
    }
    with pytest.raises(TrainperfError, match="is not NAME=PYTHON"):
        parse_overrides("unsloth")
    assert env_var("verl-vllm") == "TRAINPERF_ENV_VERL_VLLM"
    line = missing_message("unsloth")
    assert "\n" not in line and "trainperf env create unsloth" in line and "--perf-env unsloth=PY" in line
    broken = missing_module_message(
        ModuleNotFoundError("No module named 'unsloth'", name="unsloth"), "unsloth"
    )
    assert "unsloth is not installed in environment 'unsloth'" in broken and "env create unsloth" in broken


def test_probe_versions_reads_metadata_and_tolerates_broken_interpreters(tmp_path: Path) -> None:
    versions = probe_versions(sys.executable, ("pytest", "surely-not-installed"))
    assert isinstance(versions, dict) and "pytest" in versions and "surely-not-installed" not in versions
    broken = _fake_python(tmp_path / "b/bin/python")
    os.chmod(broken, 0o755)
    assert isinstance(probe_versions(broken), str) and probe_versions(broken).startswith("broken:")  # type: ignore[union-attr]
    assert probe_versions(str(tmp_path / "absent")).startswith("broken: cannot run")  # type: ignore[union-attr]
    assert "missing   (create: trainperf env create x)" in render_list([("x", None, "")])


def test_env_cli_keeps_the_class_only_form_and_lists(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["env", "--class-only"]) == 0
    assert capsys.readouterr().out.strip() in ("cpu", "maxq", "h100", "h200", "unknown")
    assert main(["env", "list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in known_environments(ENVS_DIR))
    assert main(["env", "create", "nope"]) == 2
