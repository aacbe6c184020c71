"""The ``trainperf`` command: the commands around the pytest plugin, one module each (their list is
``cli.parser.COMMANDS``, which ``trainperf --help`` prints).

Every bad input ends in one line on stderr and exit status 2 (``TrainperfError``).
"""

from __future__ import annotations

import os
import sys

from trainperf.errors import TrainperfError

DESCRIPTION = (
    "trainperf's commands beside its pytest plugin (pytest perf_tests -m CLASS runs the cases). Every bad "
    "input ends in one line on stderr and exit status 2."
)


def main(argv: list[str] | None = None) -> int:
    from trainperf.cli.parser import build_parser

    args = build_parser(DESCRIPTION).parse_args(argv)
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
    except OSError as exc:
        # A path the command could not read or write (a read-only or missing folder, a full disk):
        # one line naming it, not a traceback.
        where = f" {exc.filename}" if exc.filename else ""
        print(
            f"trainperf: error:{where}: {exc.strerror or exc}: "
            "give a path that exists and this user can write",
            file=sys.stderr,
        )
        return 2
