"""One exception type for bad input: its message is a single line that names the fix."""

from __future__ import annotations


class TrainperfError(Exception):
    """A user-facing error. ``str(err)`` is one line: what is wrong and how to fix it.

    The plugin turns it into a pytest usage error or a failed/skipped case; the CLI
    prints it and exits with status 2. No traceback is shown for it.
    """

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))
