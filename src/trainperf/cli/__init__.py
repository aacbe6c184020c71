"""The ``trainperf`` command: env [create|list] | side-by-side | engines | baselines | estimate | report |
compare | ab | bisect | fidelity | verl-metrics | ingest | history | dashboard | export |
merge | slurm submit | ray submit | cost.

Every bad input ends in one line on stderr and exit status 2 (``TrainperfError``).
"""

from __future__ import annotations

import sys

from trainperf.errors import TrainperfError


def main(argv: list[str] | None = None) -> int:
    from trainperf.cli.parser import build_parser

    args = build_parser(__doc__).parse_args(argv)
    try:
        return int(args.func(args))
    except TrainperfError as exc:
        print(f"trainperf: error: {exc}", file=sys.stderr)
        return 2
