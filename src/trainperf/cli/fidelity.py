"""``trainperf fidelity``: the suite measured by itself on one case."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from trainperf.errors import TrainperfError


def cmd_fidelity(args: argparse.Namespace) -> int:
    """The suite measured by itself on one case: overhead, noise, detection power, power readings."""
    from trainperf.ground.catalogue import find_case
    from trainperf.studies.fidelity import FIDELITY_DEFAULTS, Plan, analyse, load_state, render, run_fidelity

    root = Path.cwd()
    if args.analyse:
        run_dir = Path(args.analyse)
    else:
        # A resumed run keeps its own plan: options given again must agree with it (run_fidelity
        # refuses a different one), options left out are taken from it.
        saved = load_state(Path(args.resume))[0] if args.resume else None
        defaults = saved or Plan(args.case or "", *FIDELITY_DEFAULTS)
        case_id = args.case or defaults.case_id
        if not case_id:
            raise TrainperfError(
                "give a case id (trainperf fidelity CASE_ID), --resume RUN_DIR or --analyse RUN_DIR"
            )
        fractions = defaults.plant_fractions
        if args.plant is not None:
            try:
                fractions = tuple(float(f) for f in args.plant.split(",") if f.strip())
            except ValueError as exc:
                raise TrainperfError(f"--plant {args.plant!r}: give fractions such as 0.03,0.05") from exc

        def given(value: int | None, fallback: int) -> int:
            return fallback if value is None else value

        plan = Plan(
            case_id, given(args.steps, defaults.steps), given(args.aa, defaults.aa_repeats),
            given(args.bare, defaults.bare_runs), fractions, given(args.plant_runs, defaults.plant_runs),
            given(args.window_after, defaults.window_after),
        )  # fmt: skip
        case = find_case(root, case_id)
        cli = {
            "output": args.output,
            "resume": args.resume,
            "gpu_class": args.gpu_class,
            "python": args.python,
            "steps": plan.steps,
        }
        try:
            run_dir = run_fidelity(root, case, plan, cli)
        except TrainperfError as exc:
            print(f"trainperf fidelity: stopped: {exc}", file=sys.stderr)
            run_dir = Path(args.resume) if args.resume else None  # type: ignore[assignment]
            if run_dir is None:
                raise
    report = analyse(run_dir, root)
    text = render(report)
    (run_dir / "fidelity.txt").write_text(text + "\n")
    print(json.dumps(report.to_dict(), indent=1) if args.json else text)
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    fid = sub.add_parser(
        "fidelity",
        help="measure the suite itself on one case: overhead, noise, detection of planted slowdowns, power",
    )
    fid.add_argument("case", nargs="?", help="case id from perf_tests/, e.g. sft_hf-qwen3_8b-lora-long-b4")
    # Plan options default to None so that --resume can tell given from left out (FIDELITY_DEFAULTS).
    fid.add_argument(
        "--aa", type=int, default=None, help="fresh runs in each of the two A/A series (default 5)"
    )
    fid.add_argument(
        "--bare",
        type=int,
        default=None,
        help="bare runs (no harness hooks, no sampling) for the overhead (default 5)",
    )
    fid.add_argument("--plant", default=None, help="planted step slowdowns, fractions (default 0.03,0.05)")
    fid.add_argument(
        "--plant-runs", type=int, default=None, help="fresh runs per planted slowdown (default 2)"
    )
    fid.add_argument("--steps", type=int, default=None, help="optimizer steps per child (default 16)")
    fid.add_argument(
        "--window-after", type=int, default=None, metavar="STEP",
        help="measure overhead and power over the steps after this one (default 3; later leaves out warm-up)",
    )  # fmt: skip
    fid.add_argument("--output", default="reports", help="folder for the run folder (reports)")
    fid.add_argument(
        "--resume",
        default=None,
        metavar="RUN_DIR",
        help="continue this run folder's plan (its options are kept)",
    )
    fid.add_argument("--analyse", default=None, metavar="RUN_DIR", help="only analyse an existing run folder")
    fid.add_argument("--gpu-class", default=None, help="override the detected class")
    fid.add_argument("--python", default=None, help="interpreter for the children")
    fid.add_argument("--json", action="store_true", help="print the report as JSON")
    fid.set_defaults(func=cmd_fidelity)
