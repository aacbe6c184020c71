"""scripts/offline-run.sh as an air-gapped runner uses it: the wheelhouse parts that
scripts/offline-wheels.sh writes (.whl-hf-a/) are installed, the class is detected, the tiny case
runs with its history recorded, and the results are packed to copy back."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path

from bisect_package import build_versions

from trainperf.paths import REPO_ROOT


def _checkout(destination: Path) -> Path:
    """The repository's tracked files, as a runner receives them."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True).stdout
    for name in listed.decode().split("\0"):
        if name and not name.startswith("docs/"):
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes((REPO_ROOT / name).read_bytes())
            target.chmod((REPO_ROOT / name).stat().st_mode)
    return destination


def _runner(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A checkout with one wheelhouse part (.whl-hf-a/ holding a probe package), and the environment
    offline-run.sh runs under: sites, output folder and this interpreter first on PATH."""
    repo = _checkout(tmp_path / "repo")
    part = repo / ".whl-hf-a"
    part.mkdir()
    for wheel in build_versions(tmp_path / "pkg", ["1.0.0"], "9.9.9", 0.0).glob("*.whl"):
        (part / wheel.name).write_bytes(wheel.read_bytes())
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "TRAINPERF_SITE_ROOT": str(tmp_path / "sites"),
        "TRAINPERF_OUT": str(tmp_path / "out"),
    }
    return repo, env


def test_the_parts_of_a_wheelhouse_are_installed_and_the_run_packed(tmp_path: Path) -> None:
    repo, env = _runner(tmp_path)
    store = tmp_path / "history.sqlite"
    env["TRAINPERF_STORE"] = f"sqlite:///{store}"
    completed = subprocess.run(
        ["bash", "scripts/offline-run.sh", "perf_tests/test_sft_hf.py", "-k",
         "qwen3_tiny and lora and short and not qlora", "--perf-steps", "4"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    output = completed.stdout[-3000:] + completed.stderr[-2000:]
    assert completed.returncode == 0, output
    assert "GPU class: cpu" in completed.stdout, output
    site = tmp_path / "sites" / "site"
    assert any(p.name.startswith("tpbisect_probe-1.0.0") for p in site.iterdir()), output
    with tarfile.open(tmp_path / "out" / "results.tgz") as packed:
        names = packed.getnames()
    assert any(n.endswith("results/sft_hf-qwen3_tiny-lora-short-b4.json") for n in names)
    with sqlite3.connect(store) as db:
        assert db.execute("select count(*) from cases").fetchone()[0] == 1


def test_install_only_installs_the_wheelhouses_and_runs_nothing(tmp_path: Path) -> None:
    """Several shards at once install once: --install-only installs and stops, writing no run."""
    repo, env = _runner(tmp_path)
    completed = subprocess.run(
        ["bash", "scripts/offline-run.sh", "--install-only"],
        cwd=repo, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    output = completed.stdout[-3000:] + completed.stderr[-2000:]
    assert completed.returncode == 0, output
    site = tmp_path / "sites" / "site"
    assert any(p.name.startswith("tpbisect_probe-1.0.0") for p in site.iterdir()), output
    assert "test session starts" not in completed.stdout, output
    assert not (tmp_path / "out" / "results.tgz").exists()
