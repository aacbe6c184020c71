"""Text to stdout for commands whose output is piped: ``trainperf history CASE | head`` ends quietly.

When the reader closes the pipe early, the rest of the text has nowhere to go: that is the
reader's choice, not an error. The command stops with the status of a program ended by SIGPIPE
(141, as ``yes | head`` leaves it) and without a traceback, and stdout is pointed at /dev/null so
Python's own flush at exit does not raise the same error again.
"""

from __future__ import annotations

import os
import sys

PIPE_CLOSED = 128 + 13
"""The exit status of a program ended by SIGPIPE."""


class PipeClosed(Exception):
    """The reader of stdout went away; the command ends with ``PIPE_CLOSED``."""


def emit(text: str) -> None:
    """Write ``text`` to stdout and flush it; ``PipeClosed`` when the reader has gone."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise PipeClosed from None
