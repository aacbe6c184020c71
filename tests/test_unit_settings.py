"""Unit tests of trainperf.ground.settings.resolve: precedence, validation and path resolution."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from trainperf.errors import TrainperfError
from trainperf.ground.settings import OPTIONS, resolve


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for spec in OPTIONS:
        monkeypatch.delenv(spec.env, raising=False)


def _ini(values: dict[str, Any] | None = None) -> Callable[[str], Any]:
    """A stand-in for pytest's config.getini: unset options read as ''."""
    table = values or {}
    return lambda name: table.get(name, "")


def test_defaults(tmp_path: Path) -> None:
    settings = resolve({}, _ini(), tmp_path)
    assert settings.repeats == 1
    assert settings.timeout == 1800.0
    assert settings.strict is False
    assert settings.resume is None
    assert settings.output == tmp_path / "reports"
    assert settings.baselines == tmp_path / "baselines"


def test_precedence_cli_env_ini_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ini = _ini({"perf_repeats": "5"})
    assert resolve({}, ini, tmp_path).repeats == 5
    monkeypatch.setenv("TRAINPERF_REPEATS", "2")
    assert resolve({}, ini, tmp_path).repeats == 2
    assert resolve({"repeats": "3"}, ini, tmp_path).repeats == 3
    monkeypatch.setenv("TRAINPERF_REPEATS", "")  # empty variable: as if unset
    assert resolve({}, ini, tmp_path).repeats == 5


def test_flag_false_on_cli_falls_through_to_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store_true flag that was not given must not hide TRAINPERF_STRICT."""
    monkeypatch.setenv("TRAINPERF_STRICT", "yes")
    assert resolve({"strict": False}, _ini(), tmp_path).strict is True
    monkeypatch.setenv("TRAINPERF_STRICT", "0")
    assert resolve({"strict": None}, _ini({"perf_strict": "true"}), tmp_path).strict is False


@pytest.mark.parametrize(
    ("source", "name", "raw", "named"),
    [
        ("env", "repeats", "0", "TRAINPERF_REPEATS"),
        ("env", "timeout", "soon", "TRAINPERF_TIMEOUT"),
        ("env", "strict", "maybe", "TRAINPERF_STRICT"),
        ("cli", "steps", "-4", "--perf-steps"),
        ("cli", "plant_slowdown", "11", "--perf-plant-slowdown"),
        ("ini", "repeats", "two", "perf_repeats"),
    ],
)
def test_bad_values_name_their_origin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, name: str, raw: str, named: str
) -> None:
    cli: dict[str, Any] = {}
    ini: dict[str, Any] = {}
    if source == "env":
        monkeypatch.setenv("TRAINPERF_" + name.upper(), raw)
    elif source == "cli":
        cli[name] = raw
    else:
        ini["perf_" + name] = raw
    with pytest.raises(TrainperfError) as info:
        resolve(cli, _ini(ini), tmp_path)
    assert named in str(info.value)
    assert "\n" not in str(info.value)


def test_an_option_given_empty_is_refused_not_taken_as_unset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `--perf-resume "$dir"` with an empty variable would otherwise run every case afresh.
    with pytest.raises(TrainperfError) as info:
        resolve({"resume": ""}, _ini(), tmp_path)
    assert str(info.value).startswith("--perf-resume was given empty (resume this run folder")
    assert "leave the option out" in str(info.value)
    monkeypatch.setenv("TRAINPERF_RESUME", "")  # an empty environment variable stays unset, as in shells
    assert resolve({}, _ini(), tmp_path).resume is None


def test_relative_paths_resolve_against_rootdir(tmp_path: Path) -> None:
    absolute = tmp_path / "elsewhere"
    settings = resolve({"output": "out/runs", "baselines": str(absolute)}, _ini(), tmp_path)
    assert settings.output == tmp_path / "out" / "runs"
    assert settings.baselines == absolute


def test_resume_existing_folder(tmp_path: Path) -> None:
    (tmp_path / "reports" / "run1").mkdir(parents=True)
    assert resolve({"resume": "reports/run1"}, _ini(), tmp_path).resume == tmp_path / "reports" / "run1"


def test_resume_missing_folder_raises(tmp_path: Path) -> None:
    with pytest.raises(TrainperfError, match="--perf-resume"):
        resolve({"resume": "reports/nothing-here"}, _ini(), tmp_path)


def test_parsed_types(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINPERF_PLANT_SLOWDOWN", "0.5")
    monkeypatch.setenv("TRAINPERF_UPDATE_BASELINES", "on")
    settings = resolve({"timeout": "2.5", "steps": "8"}, _ini({"perf_gpu_class": "h100"}), tmp_path)
    assert settings.plant_slowdown == 0.5
    assert settings.update_baselines is True
    assert settings.timeout == 2.5
    assert settings.steps == 8
    assert settings.gpu_class == "h100"


def test_every_option_is_documented() -> None:
    from trainperf.ground.settings import OPTIONS
    from trainperf.paths import REPO_ROOT

    page = (REPO_ROOT / "docs" / "options.md").read_text()
    assert [spec.cli for spec in OPTIONS if f"`{spec.cli}" not in page] == []


def test_a_baselines_folder_that_does_not_exist_is_refused_unless_this_run_writes_it(tmp_path: Path) -> None:
    from trainperf.errors import TrainperfError
    from trainperf.ground.path_checks import check_baselines

    typo = {"baselines": str(tmp_path / "baselnes")}
    with pytest.raises(
        TrainperfError, match=r"no baselines folder at .*baselnes .*would read `new` and pass"
    ):
        check_baselines(resolve(typo, _ini(), tmp_path))
    check_baselines(resolve({**typo, "update_baselines": True}, _ini(), tmp_path))  # it will create it
    (tmp_path / "baselnes").mkdir()
    check_baselines(resolve(typo, _ini(), tmp_path))


@pytest.mark.parametrize(
    ("name", "raw", "said"),
    [
        ("confirm", "-3", "must be >= 0"),  # was taken as 0 (no confirmation) without a word
        ("progress_interval", "often", "'often' is not a number"),
        ("repeats", "two", "'two' is not a whole number"),
        ("store", "postgresql://u:s3cret@db:port/x", "does not parse"),
        ("store", "mysql://u@db/x", "scheme 'mysql' is not supported"),
    ],
)
def test_values_refused_at_start_say_what_is_valid(tmp_path: Path, name: str, raw: str, said: str) -> None:
    with pytest.raises(TrainperfError) as info:
        resolve({name: raw}, _ini(), tmp_path)
    assert said in str(info.value) and "s3cret" not in str(info.value) and "\n" not in str(info.value)
    assert resolve({"store": "off"}, _ini(), tmp_path).store == "off"


def test_run_folders_and_the_host_lock_must_be_writable_before_a_case_starts(tmp_path: Path) -> None:
    from trainperf.ground.path_checks import check_paths

    (tmp_path / "baselines").mkdir()
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(
        TrainperfError, match=r"cannot write run folders under .*a-file/reports .*--perf-output"
    ):
        check_paths(resolve({"output": str(blocker / "reports")}, _ini(), tmp_path))
    with pytest.raises(TrainperfError, match=r"cannot write the host lock under .*a-file .*--perf-host-lock"):
        check_paths(resolve({"host_lock": str(blocker / "lock")}, _ini(), tmp_path))
    check_paths(resolve({"output": str(tmp_path / "new" / "reports")}, _ini(), tmp_path))
    assert (tmp_path / "new" / "reports").is_dir() and not list((tmp_path / "new" / "reports").iterdir())
