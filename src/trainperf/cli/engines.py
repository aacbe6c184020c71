"""``trainperf engines``: verl's vLLM and SGLang rollouts side by side."""

from __future__ import annotations

import argparse
from pathlib import Path

from trainperf.ground.folder import load_results
from trainperf.paths import PUBLISHED_DIR


def cmd_engines(args: argparse.Namespace) -> int:
    """verl's vLLM and SGLang rollouts side by side, per case shape, with SGLang/vLLM and E3's ratio."""
    from trainperf.report.engines import render
    from trainperf.store.references import load_references

    published = Path(args.baselines) / PUBLISHED_DIR
    references = load_references(published) if published.is_dir() else []
    print(render(load_results([Path(run) for run in args.runs]), references))
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    engines = sub.add_parser(
        "engines",
        help="verl's vLLM and SGLang rollouts per case shape: phases, memory, power and SGLang/vLLM (E3)",
    )
    engines.add_argument("runs", nargs="+", metavar="RUN", help="reports/<run> folders or baselines/<class>")
    engines.add_argument(
        "--baselines", default="baselines", help="where published/ reference points are (default baselines)"
    )
    engines.set_defaults(func=cmd_engines)
