"""Unit tests of trainperf.measure.hardware: the shipped GPU classes and device-name classification."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from trainperf.errors import TrainperfError
from trainperf.measure.hardware import HARDWARE_DIR, GpuClass, classify, load_classes


@pytest.fixture(scope="module")
def classes() -> dict[str, GpuClass]:
    return load_classes()


def test_shipped_classes(classes: dict[str, GpuClass]) -> None:
    assert {"cpu", "h100", "h200", "maxq"} <= set(classes)
    assert classes["cpu"].timing_tolerance_scale > 1
    # Shared CPU hosts change level over hours: their history does not narrow timing tolerances.
    assert not classes["cpu"].learns_timing_tolerances and classes["h100"].learns_timing_tolerances
    assert classes["h100"].memory_gib < classes["maxq"].memory_gib < classes["h200"].memory_gib


@pytest.mark.parametrize(
    ("device", "expected"),
    [
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA H100 PCIe", "h100"),
        ("NVIDIA H100", "h100"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA H200 NVL", "h200"),
        ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "maxq"),
        ("nvidia rtx pro 6000 blackwell max-q workstation edition", "maxq"),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", None),  # the 600 W card is not Max-Q
        ("NVIDIA A100-SXM4-80GB", None),
        (None, "cpu"),
    ],
)
def test_classify(classes: dict[str, GpuClass], device: str | None, expected: str | None) -> None:
    assert classify(device, classes) == expected


def test_cpu_class_never_matches_a_device(classes: dict[str, GpuClass]) -> None:
    assert classify("cpu", classes) is None


def _copy_cpu(tmp_path: Path) -> None:
    shutil.copy(HARDWARE_DIR / "cpu.yaml", tmp_path / "cpu.yaml")


@pytest.mark.parametrize(
    "text",
    [
        "name: broken\nname_patterns: [unclosed\n",  # YAML syntax
        "name: broken\nname_patterns: ['*X*']\n",  # memory_gib missing
        "name: broken\nmemory_gib: lots\n",  # not a number
        "- just\n- a list\n",
        "name: broken\nmemory_gib: 80\nlearns_timing_tolerances: sometimes\n",  # not true or false
    ],
)
def test_broken_class_file_names_the_file(tmp_path: Path, text: str) -> None:
    _copy_cpu(tmp_path)
    (tmp_path / "broken.yaml").write_text(text)
    with pytest.raises(TrainperfError) as info:
        load_classes(tmp_path)
    assert "broken.yaml" in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_cpu_class_raises(tmp_path: Path) -> None:
    shutil.copy(HARDWARE_DIR / "h100.yaml", tmp_path / "h100.yaml")
    with pytest.raises(TrainperfError, match="cpu"):
        load_classes(tmp_path)


def test_scalar_name_patterns_do_not_match_everything(tmp_path: Path) -> None:
    _copy_cpu(tmp_path)
    (tmp_path / "h100.yaml").write_text('name: h100\nname_patterns: "*H100*"\nmemory_gib: 79\n')
    try:
        classes = load_classes(tmp_path)
    except TrainperfError:
        return  # rejecting the file is a fine answer too
    assert classify("NVIDIA A100-SXM4-80GB", classes) is None


def test_every_gpu_class_file_registers_its_marker_and_nothing_else_declares_one() -> None:
    from trainperf.measure.hardware import OTHER_MARKERS, load_classes, markers

    assert set(markers()) == set(load_classes()) | set(OTHER_MARKERS)
    assert not set(OTHER_MARKERS) & set(load_classes())  # a class's marker comes from its file alone


def test_a_class_plans_from_the_class_its_file_names_and_never_from_itself(tmp_path: Path) -> None:
    from trainperf.measure.hardware import planning_classes

    assert planning_classes("h200") == ("h200", "h100")
    assert planning_classes("h100") == ("h100",) and planning_classes("maxq") == ("maxq",)
    assert planning_classes("no-such-class") == ("no-such-class",)
    (tmp_path / "cpu.yaml").write_text("name: cpu\nmemory_gib: 0\n")
    (tmp_path / "odd.yaml").write_text(
        "name: odd\nmemory_gib: 10\nname_patterns: ['*Odd*']\nplans_from: odd\n"
    )
    assert planning_classes("odd", tmp_path) == ("odd",)
