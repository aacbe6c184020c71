"""scripts/offline-verl-stack.sh --resplit: parts cut to another limit are re-cut, bytes unchanged."""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "offline-verl-stack.sh"


def pack(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRAINPERF_PART_MIB": "1"}
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False)


def test_resplit_recuts_to_the_limit_and_keeps_the_bytes(tmp_path: Path) -> None:
    site = tmp_path / ".whl-verl" / "site"
    site.mkdir(parents=True)
    data = random.Random(0).randbytes(int(2.5 * 2**20))
    (site / "part-00").write_bytes(data)  # one part, as cut to a larger limit
    subprocess.run("sha256sum part-* > SHA256SUMS", shell=True, cwd=site, check=True)
    done = pack(tmp_path, "--resplit")
    assert done.returncode == 0, done.stdout + done.stderr
    parts = sorted(site.glob("part-*"))
    assert len(parts) == 3 and all(p.stat().st_size <= 2**20 for p in parts)
    assert b"".join(p.read_bytes() for p in parts) == data
    assert subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=site, check=False).returncode == 0


def test_resplit_refuses_corrupt_parts(tmp_path: Path) -> None:
    site = tmp_path / ".whl-sglang" / "site"
    site.mkdir(parents=True)
    (site / "part-00").write_bytes(b"x" * 10)
    subprocess.run("sha256sum part-* > SHA256SUMS", shell=True, cwd=site, check=True)
    (site / "part-00").write_bytes(b"y" * 10)
    done = pack(tmp_path, "--engine", "sglang", "--resplit")
    assert done.returncode == 1 and "corrupt: rebuild them" in done.stdout
