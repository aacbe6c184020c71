"""``trainperf env``: the detected GPU class and fingerprint; workload environments created and listed."""

from __future__ import annotations

import argparse
import os

from trainperf.measure.hardware import load_classes, require_class


def cmd_env(args: argparse.Namespace) -> int:
    from trainperf.measure.detection import detect
    from trainperf.measure.host import host_fingerprint

    classes = load_classes()
    if args.gpu_class:
        require_class(args.gpu_class, classes, "--gpu-class")
    if args.env_command == "create":
        return cmd_env_create(args)
    if args.env_command == "list":
        return cmd_env_list(args)

    detection = detect(classes, args.gpu_class)
    if args.class_only:
        print(detection.gpu_class.name if detection.gpu_class else "unknown")
        return 0
    print(f"GPU class: {detection.describe()}")
    for key, value in host_fingerprint(detection.info).items():
        print(f"  {key}: {value}")
    return 0


def cmd_env_create(args: argparse.Namespace) -> int:
    from trainperf.families.env_create import create, default_options
    from trainperf.families.envs import load_spec

    if args.pin or args.base:
        return cmd_env_candidate(args)
    spec = load_spec(args.name)
    options = default_options(
        args.name,
        python=args.python,
        prefix=args.prefix,
        wheels=args.wheels,
        system_site=args.system_site_packages,
    )
    how = "uv" if options.uv else "venv + pip"
    print(
        f"creating environment '{args.name}' in {options.prefix} ({how}; "
        f"{'CPU torch pin' if options.cpu_only else 'GPU machine'})"
    )
    create(spec, options)
    print(f"environment '{args.name}' ready: {options.prefix / 'bin' / 'python'}")
    return 0


def cmd_env_candidate(args: argparse.Namespace) -> int:
    """``env create NAME --from BASE --pin P==V ...``: BASE's interpreter with the pins changed, layered
    over it; what else moved is printed, and a candidate that cannot run is one line, status 1."""
    from pathlib import Path

    from trainperf.errors import TrainperfError
    from trainperf.families.candidates import (
        BrokenEnvironment,
        CandidateOptions,
        ensure_candidate,
        parse_pins,
    )
    from trainperf.families.envs import VENVS_DIR

    if not args.pin:
        raise TrainperfError(f"--from {args.base} needs at least one --pin NAME==VERSION to change")
    base = args.python or _base_interpreter(args.base or "hf")
    prefix = Path(args.prefix).absolute() if args.prefix else VENVS_DIR / args.name
    wheels = Path(args.wheels[0]).absolute() if args.wheels else None
    if len(args.wheels) > 1:
        raise TrainperfError("a candidate is built from one wheelhouse: give --wheels once")
    options = CandidateOptions(base, wheelhouse=wheels, allow_conflicts=args.allow_conflicts)
    try:
        candidate = ensure_candidate(options, parse_pins(args.pin), prefix=prefix)
    except BrokenEnvironment as exc:
        print(f"environment '{args.name}': {exc}")
        return 1
    print(f"environment '{args.name}' ready: {candidate.python}")
    print(f"  over {base}: {candidate.describe()}")
    for conflict in candidate.conflicts:
        print(f"  declared conflict (measured anyway): {conflict}")
    return 0


def _base_interpreter(name: str) -> str:
    """The interpreter of a named environment, as a case of it would be run."""
    from trainperf.errors import TrainperfError
    from trainperf.families.envs import missing_message, parse_overrides, resolve_interpreter

    interpreter = resolve_interpreter(
        name, perf_python=None, overrides=parse_overrides(os.environ.get("TRAINPERF_ENV")), environ=os.environ
    )
    if interpreter is None:
        raise TrainperfError(f"--from {name}: {missing_message(name)}")
    return interpreter.path


def cmd_env_list(args: argparse.Namespace) -> int:
    from trainperf.families.env_create import probe_versions, render_list
    from trainperf.families.envs import known_environments, parse_overrides, resolve_interpreter

    overrides = parse_overrides(os.environ.get("TRAINPERF_ENV"))
    rows = []
    for name in known_environments():
        interpreter = resolve_interpreter(name, perf_python=None, overrides=overrides, environ=os.environ)
        rows.append((name, interpreter, probe_versions(interpreter.path) if interpreter else ""))
    print(render_list(rows))
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    env = sub.add_parser("env", help="detected GPU class and environment fingerprint")
    env.add_argument("--gpu-class", default=None, help="override the detected class")
    env.add_argument("--class-only", action="store_true", help="print only the class name")
    env.set_defaults(func=cmd_env, env_command=None)
    env_sub = env.add_subparsers(dest="env_command", required=False)
    create = env_sub.add_parser(
        "create", help="build a workload environment (.venvs/NAME) from ci/envs/NAME.txt"
    )
    create.add_argument("name", help="environment name (hf, unsloth, verl-vllm, verl-sglang)")
    create.add_argument("--python", default=None, help="base interpreter (default: python3 on PATH)")
    create.add_argument("--prefix", default=None, help="environment folder (default .venvs/NAME)")
    create.add_argument(
        "--wheels",
        action="append",
        default=[],
        help="install offline from this folder of wheels (repeatable)",
    )
    create.add_argument(
        "--system-site-packages",
        action="store_true",
        help="see the base interpreter's packages (a runner image's torch)",
    )
    create.add_argument(
        "--from",
        dest="base",
        default=None,
        help="build a candidate: this environment (hf, unsloth, ...) with the --pin changes, layered over it",
    )
    create.add_argument(
        "--pin", action="append", default=[], help="NAME==VERSION changed in the candidate (repeatable)"
    )
    create.add_argument(
        "--allow-conflicts", action="store_true", help="keep a candidate pip declares a conflict in"
    )
    env_sub.add_parser("list", help="each workload environment: exists or not, interpreter, key versions")
