"""The ``trainperf`` command: env [create|list] | side-by-side | engines | baselines | estimate | report |
compare | ab | bisect | fidelity | verl-metrics | ingest | history | dashboard | export |
merge | slurm submit | ray submit | cost.

Every bad input ends in one line on stderr and exit status 2 (``TrainperfError``).
"""

from __future__ import annotations

import os
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
    except BrokenPipeError:
        # The reader stopped early (`trainperf baselines | head`): what it read stands, no traceback.
        # stdout is pointed at /dev/null so that Python's own flush at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
