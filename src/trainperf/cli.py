"""The ``trainperf`` command: env [create|list] | side-by-side | engines | baselines | estimate | report | compare | ab | fidelity | verl-metrics.

Every bad input ends in one line on stderr and exit status 2 (``TrainperfError``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from trainperf.errors import TrainperfError
from trainperf.hardware import load_classes
from trainperf.paths import PUBLISHED_DIR
from trainperf.report.table import failure_detail, render_text
from trainperf.results import CaseResult, load_result


def _cmd_env(args: argparse.Namespace) -> int:
    from trainperf.fingerprint import host_fingerprint
    from trainperf.session import detect

    if args.env_command == "create":
        return _cmd_env_create(args)
    if args.env_command == "list":
        return _cmd_env_list(args)

    detection = detect(load_classes(), args.gpu_class)
    if args.class_only:
        print(detection.gpu_class.name if detection.gpu_class else "unknown")
        return 0
    print(f"GPU class: {detection.describe()}")
    for key, value in host_fingerprint(detection.info).items():
        print(f"  {key}: {value}")
    return 0


def _cmd_env_create(args: argparse.Namespace) -> int:
    from trainperf.env_create import create, default_options
    from trainperf.envs import load_spec

    spec = load_spec(args.name)
    options = default_options(
        args.name, python=args.python, prefix=args.prefix, wheels=args.wheels, system_site=args.system_site_packages
    )
    how = "uv" if options.uv else "venv + pip"
    print(f"creating environment '{args.name}' in {options.prefix} ({how}; {'CPU torch pin' if options.cpu_only else 'GPU machine'})")
    create(spec, options)
    print(f"environment '{args.name}' ready: {options.prefix / 'bin' / 'python'}")
    return 0


def _cmd_env_list(args: argparse.Namespace) -> int:
    from trainperf.env_create import probe_versions, render_list
    from trainperf.envs import known_environments, parse_overrides, resolve_interpreter

    overrides = parse_overrides(os.environ.get("TRAINPERF_ENV"))
    rows = []
    for name in known_environments():
        interpreter = resolve_interpreter(name, perf_python=None, overrides=overrides, environ=os.environ)
        rows.append((name, interpreter, probe_versions(interpreter.path) if interpreter else ""))
    print(render_list(rows))
    return 0


def _cmd_baselines(args: argparse.Namespace) -> int:
    root = Path(args.baselines)
    # baselines/published/ holds reference points of another schema, not a GPU class's baselines.
    classes = [args.gpu_class] if args.gpu_class else sorted(p.name for p in root.iterdir() if p.is_dir() and p.name != PUBLISHED_DIR)
    for gpu_class in classes:
        results = [load_result(path) for path in sorted((root / gpu_class).glob("*.json"))]
        if not results:
            continue
        print(f"== {gpu_class} ({len(results)} baselines)")
        print(render_text(results))
        # A cliff's result is its largest fit, which the table's per-step columns cannot show.
        for result in results:
            if result.cliff:
                confirmed = ", confirmed" if result.cliff.get("confirmed") else ""
                print(f"{result.case_id}: {result.cliff.get('summary', '-')}{confirmed}")
    return 0


def load_run(run_dir: Path) -> list[CaseResult]:
    results_dir = run_dir / "results"
    if not results_dir.is_dir():
        raise TrainperfError(f"{run_dir} is not a run folder (no results/): give reports/<run>")
    return [load_result(path) for path in sorted(results_dir.glob("*.json"))]


def _cmd_report(args: argparse.Namespace) -> int:
    run_dir = Path(args.run)
    results = load_run(run_dir)
    details = [line for r in results if r.verdict.get("verdict") not in (None, "pass", "new", "expected-oom") for line in failure_detail(r)]
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=1))
        return 0
    print(render_text(results))
    for line in details:
        print(line)
    from trainperf.report.build import write_reports

    written = write_reports(run_dir, results, f"trainperf: {run_dir.name}", details)
    print(f"wrote {', '.join(str(path) for path in written)}")
    return 0


def _load_results(folders: list[str]) -> list[CaseResult]:
    """The results of run folders (reports/<run>) and baselines class folders (baselines/<class>)."""
    results: list[CaseResult] = []
    for folder in map(Path, folders):
        if (folder / "results").is_dir():
            results += load_run(folder)
        elif folder.is_dir() and any(folder.glob("*.json")):
            results += [load_result(path) for path in sorted(folder.glob("*.json"))]
        else:
            raise TrainperfError(f"{folder} is neither a run folder (reports/<run>) nor a baselines class folder (baselines/<class>)")
    return results


def _cmd_side_by_side(args: argparse.Namespace) -> int:
    """HF LoRA / HF QLoRA / unsloth QLoRA of one GPU class, from run folders or a class's baselines."""
    from trainperf.report.side_by_side import render

    print(render(_load_results(args.runs)))
    return 0


def _cmd_engines(args: argparse.Namespace) -> int:
    """verl's vLLM and SGLang rollouts side by side, per case shape, with SGLang/vLLM and E3's ratio."""
    from trainperf.references import load_references
    from trainperf.report.engines import render

    published = Path(args.baselines) / PUBLISHED_DIR
    references = load_references(published) if published.is_dir() else []
    print(render(_load_results(args.runs), references))
    return 0


def _cmd_estimate(args: argparse.Namespace) -> int:
    """The memory estimate next to every measured baseline, and its error: how far to trust it."""
    from trainperf.case import Case
    from trainperf.estimate import estimate_case

    root = Path(args.baselines)
    errors = []
    print(f"{'class':6s} {'case':36s} {'estimate GiB':>12s} {'measured GiB':>12s} {'error':>7s}")
    for path in sorted(root.glob("*/*.json")):
        if path.parent.name == PUBLISHED_DIR:  # reference points, not measured baselines
            continue
        baseline = load_result(path)
        measured = baseline.metrics.get("peak_allocated_gib")
        steps = next((run.get("steps_requested") for run in baseline.runs if run.get("steps_requested")), None)
        if measured is None or not steps:
            continue
        estimated = estimate_case(Case.from_dict(baseline.case), int(steps))
        if estimated is None:
            continue
        error = estimated.total_gib / measured.value - 1
        errors.append(abs(error))
        print(f"{baseline.gpu_class:6s} {baseline.case_id:36s} {estimated.total_gib:12.2f} {measured.value:12.2f} {error:+7.1%}")
    if not errors:
        raise TrainperfError(f"no measured GPU baseline under {root} to check the estimate against")
    print(f"{len(errors)} cases: mean |error| {sum(errors) / len(errors):.1%}, max {max(errors):.1%}")
    return 0


def _judge_b_against_a(
    results_a: list[CaseResult], results_b: list[CaseResult], label_a: str, label_b: str, args: argparse.Namespace
) -> tuple[str, int]:
    """B judged case by case against A with this project's tolerances: the text to print, the exit status."""
    from trainperf.compare_runs import compare_runs, render
    from trainperf.metrics import tolerances_from_pyproject

    comparison = compare_runs(
        results_a,
        results_b,
        classes=load_classes(),
        tolerances=tolerances_from_pyproject(Path.cwd()),
        strict=args.strict,
        label_a=label_a,
        label_b=label_b,
    )
    text = json.dumps(comparison.to_dict(), indent=1) if args.json else render(comparison)
    return text, comparison.exit_status


def _cmd_compare(args: argparse.Namespace) -> int:
    """Run B judged case by case against run A (before/after an upgrade); 1 when any case failed."""
    text, status = _judge_b_against_a(load_run(Path(args.run_a)), load_run(Path(args.run_b)), args.run_a, args.run_b, args)
    print(text)
    return status


def _cmd_ab(args: argparse.Namespace) -> int:
    from datetime import datetime

    from trainperf.ab import check_environment, pool_rounds, run_rounds

    args.env_a, args.env_b = os.path.abspath(args.env_a), os.path.abspath(args.env_b)
    for label, python in (("a", args.env_a), ("b", args.env_b)):
        print(f"environment {label.upper()}: {python}: {check_environment(python, label)}")
    pytest_args = [a for a in args.pytest_args if a != "--"]
    if not pytest_args:
        raise TrainperfError("give the cases to run after the options, e.g. trainperf ab --env-a A --env-b B -- -m h100 -k lora")
    output = Path(args.output or f"reports/ab-{datetime.now().strftime('%Y%m%d-%H%M%S')}")
    folders_a, folders_b = run_rounds(args.env_a, args.env_b, args.rounds, pytest_args, output)
    text, status = _judge_b_against_a(
        pool_rounds([load_run(f) for f in folders_a]), pool_rounds([load_run(f) for f in folders_b]),
        args.env_a, args.env_b, args,
    )  # fmt: skip
    print(text)
    (output / ("ab.json" if args.json else "ab.txt")).write_text(text + "\n")
    return status

def _cmd_fidelity(args: argparse.Namespace) -> int:
    """The suite measured by itself on one case: overhead, noise, detection power, power readings."""
    from trainperf.catalogue import find_case
    from trainperf.fidelity_run import FIDELITY_DEFAULTS, Plan, analyse, load_state, render, run_fidelity

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
            raise TrainperfError("give a case id (trainperf fidelity CASE_ID), --resume RUN_DIR or --analyse RUN_DIR")
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
        cli = {"output": args.output, "resume": args.resume, "gpu_class": args.gpu_class, "python": args.python, "steps": plan.steps}
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
    print(json.dumps(report, indent=1) if args.json else text)
    return 0


def _cmd_verl_metrics(args: argparse.Namespace) -> int:
    """verl's per-step metrics of a run made anywhere, as this suite reads them."""
    from trainperf.verl.logs import read_records, render_records

    records = read_records(Path(args.logfile))
    print(json.dumps(records, indent=1) if args.json else render_records(records))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trainperf", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    env = sub.add_parser("env", help="detected GPU class and environment fingerprint")
    env.add_argument("--gpu-class", default=None, help="override the detected class")
    env.add_argument("--class-only", action="store_true", help="print only the class name")
    env.set_defaults(func=_cmd_env, env_command=None)
    env_sub = env.add_subparsers(dest="env_command", required=False)
    create = env_sub.add_parser("create", help="build a workload environment (.venvs/NAME) from ci/envs/NAME.txt")
    create.add_argument("name", help="environment name (hf, unsloth, verl-vllm, verl-sglang)")
    create.add_argument("--python", default=None, help="base interpreter (default: python3 on PATH)")
    create.add_argument("--prefix", default=None, help="environment folder (default .venvs/NAME)")
    create.add_argument(
        "--wheels", action="append", default=[], help="install offline from this folder of wheels (repeatable)"
    )
    create.add_argument(
        "--system-site-packages", action="store_true", help="see the base interpreter's packages (a runner image's torch)"
    )
    env_sub.add_parser("list", help="each workload environment: exists or not, interpreter, key versions")
    baselines = sub.add_parser("baselines", help="list stored baselines")
    baselines.add_argument("--baselines", default="baselines")
    baselines.add_argument("--gpu-class", default=None)
    baselines.set_defaults(func=_cmd_baselines)
    estimate = sub.add_parser("estimate", help="memory estimate against every measured baseline, with its error")
    estimate.add_argument("--baselines", default="baselines")
    estimate.set_defaults(func=_cmd_estimate)
    report = sub.add_parser("report", help="rebuild a run folder's summary.md, index.html and benchmark.json from its result files")
    report.add_argument("run", help="reports/<run>")
    report.add_argument("--json", action="store_true", help="print the results as JSON")
    report.set_defaults(func=_cmd_report)
    side = sub.add_parser(
        "side-by-side", help="HF LoRA, HF QLoRA and unsloth QLoRA per model and profile, with unsloth/HF ratios"
    )
    side.add_argument("runs", nargs="+", metavar="RUN", help="reports/<run> folders or baselines/<class> (one GPU class)")
    side.set_defaults(func=_cmd_side_by_side)
    engines = sub.add_parser(
        "engines", help="verl's vLLM and SGLang rollouts per case shape: phases, memory, power and SGLang/vLLM (E3)"
    )
    engines.add_argument("runs", nargs="+", metavar="RUN", help="reports/<run> folders or baselines/<class>")
    engines.add_argument("--baselines", default="baselines", help="where published/ reference points are (default baselines)")
    engines.set_defaults(func=_cmd_engines)
    ab = sub.add_parser(
        "ab", help="run cases under two Python environments interleaved A B A B; exit 1 when B regressed"
    )
    ab.add_argument("--env-a", required=True, help="Python interpreter of environment A (before)")
    ab.add_argument("--env-b", required=True, help="Python interpreter of environment B (after)")
    ab.add_argument("--rounds", type=int, default=3, help="A/B rounds (default 3)")
    ab.add_argument("--output", default=None, help="folder for the rounds (default reports/ab-<time>)")
    ab.add_argument("--json", action="store_true")
    ab.add_argument("--strict", action="store_true", help="noisy cases fail too")
    ab.add_argument("pytest_args", nargs=argparse.REMAINDER, help="the pytest selection, after --")
    ab.set_defaults(func=_cmd_ab)
    compare = sub.add_parser(
        "compare", help="judge run B against run A case by case (exit 1 when any case regressed or changed)"
    )
    compare.add_argument("run_a", metavar="RUN_A", help="reports/<run> playing the baseline (before)")
    compare.add_argument("run_b", metavar="RUN_B", help="reports/<run> judged against it (after)")
    compare.add_argument("--json", action="store_true", help="print the comparison as JSON")
    compare.add_argument("--strict", action="store_true", help="noisy cases fail too")
    compare.set_defaults(func=_cmd_compare)
    fid = sub.add_parser(
        "fidelity", help="measure the suite itself on one case: overhead, noise, detection of planted slowdowns, power"
    )
    fid.add_argument("case", nargs="?", help="case id from perf_tests/, e.g. sft_hf-qwen3_8b-lora-long-b4")
    # Plan options default to None so that --resume can tell given from left out (FIDELITY_DEFAULTS).
    fid.add_argument("--aa", type=int, default=None, help="fresh runs in each of the two A/A series (default 5)")
    fid.add_argument("--bare", type=int, default=None, help="bare runs (no harness hooks, no sampling) for the overhead (default 5)")
    fid.add_argument("--plant", default=None, help="planted step slowdowns, fractions (default 0.03,0.05)")
    fid.add_argument("--plant-runs", type=int, default=None, help="fresh runs per planted slowdown (default 2)")
    fid.add_argument("--steps", type=int, default=None, help="optimizer steps per child (default 16)")
    fid.add_argument(
        "--window-after", type=int, default=None, metavar="STEP",
        help="measure overhead and power over the steps after this one (default 3; later leaves out warm-up)",
    )  # fmt: skip
    fid.add_argument("--output", default="reports", help="folder for the run folder (reports)")
    fid.add_argument("--resume", default=None, metavar="RUN_DIR", help="continue this run folder's plan (its options are kept)")
    fid.add_argument("--analyse", default=None, metavar="RUN_DIR", help="only analyse an existing run folder")
    fid.add_argument("--gpu-class", default=None, help="override the detected class")
    fid.add_argument("--python", default=None, help="interpreter for the children")
    fid.add_argument("--json", action="store_true", help="print the report as JSON")
    fid.set_defaults(func=_cmd_fidelity)
    verl_metrics = sub.add_parser(
        "verl-metrics", help="per-step phases, throughput and memory from a verl file-logger JSONL or console log"
    )
    verl_metrics.add_argument("logfile", metavar="LOGFILE", help="VERL_FILE_LOGGER_PATH's JSONL, or verl's console output")
    verl_metrics.add_argument("--json", action="store_true", help="print the step records as JSON")
    verl_metrics.set_defaults(func=_cmd_verl_metrics)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except TrainperfError as exc:
        print(f"trainperf: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
