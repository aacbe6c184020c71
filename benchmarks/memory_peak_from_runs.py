"""Record where memory peaked (``memory_peak_step``) in baseline files written before the suite
recorded it, from the run folder that wrote them: each run's steps.jsonl, nvml.csv and result.json.

    python benchmarks/memory_peak_from_runs.py RUN_FOLDER BASELINES_CLASS_FOLDER

Only baselines whose ``source`` names RUN_FOLDER are touched; every other figure stays as measured.
Prints one line per baseline run: its folder and the step found.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from trainperf.measure.measurement import memory_peak_step
from trainperf.measure.nvml import read_samples
from trainperf.workloads.protocol import SAMPLES_FILE, read_child_result


def main(run_folder: Path, baselines: Path) -> int:
    for path in sorted(baselines.glob("*.json")):
        data = json.loads(path.read_text())
        if not str(data.get("source", "")).startswith(f"{run_folder.name}:"):
            continue
        for run in data["runs"]:
            out_dir = run_folder / run["dir"]
            child = read_child_result(out_dir)
            steps = [s for s in child.get("steps") or [] if not s.get("profiled")]
            samples = read_samples(out_dir / SAMPLES_FILE) if (out_dir / SAMPLES_FILE).exists() else []
            run["memory_peak_step"] = memory_peak_step(steps, child.get("memory") or {}, samples)
            found = run["memory_peak_step"]
            print(f"{path.stem} {run['dir']}: memory_peak_step {found} of {len(steps)} steps")
        path.write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        usage = "usage: python benchmarks/memory_peak_from_runs.py RUN_FOLDER BASELINES_CLASS_FOLDER"
        print(usage, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
