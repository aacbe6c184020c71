"""Credentials are never recorded: the one rule applied wherever the suite writes down its own
invocation or settings (``run.json``, the results store's runs, a baseline's source, benchmark.json,
every message that names a store URL), so that whatever is built from those (summary, page, merged
and exported runs, ``trainperf report``) inherits it.

What becomes ``***``:

- a URL's password: ``postgresql://ci:PASSWORD@host/db`` -> ``postgresql://ci:***@host/db``;
- the value of a ``name=value`` whose name says it carries a credential: a URL's query
  (``?password=...``), a libpq key/value string (``password=...``), an environment variable
  (``PGPASSWORD=...``, ``HF_TOKEN=...``), an option (``--api-key=...``);
- the argument after such an option given on its own (``--token VALUE``), and a mapping's value
  under such a key.

Everything else stays as given: a recorded command line must still say what ran.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

MASK = "***"

# Name parts (split at ``_ - .``) that carry a credential on their own; ``token`` only whole, so that
# ``max_new_tokens`` stays readable.
_WHOLE_PARTS = frozenset({"pass", "token", "apikey", "auth"})
_PART_FRAGMENTS = ("password", "passwd", "secret", "credential")
# ``key`` alone is a credential only after ``api``/``access``/``private``/``secret`` (WANDB_API_KEY).
_KEY_QUALIFIERS = frozenset({"api", "access", "private", "secret", "auth"})

# scheme://user:PASSWORD@ (the last ``@`` of the word: a password may hold one unencoded).
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*):(?P<secret>\S*)@")
# NAME=VALUE, VALUE quoted (libpq allows it) or up to whitespace or the next query separator.
_ASSIGNMENT = re.compile(r"(?P<name>[A-Za-z0-9_.-]+)(?P<eq>\s*=\s*)(?P<value>'[^']*'|\"[^\"]*\"|[^\s&;,]*)")


def is_credential_name(name: str) -> bool:
    """Whether an option, variable or key name says its value is a credential."""
    parts = [part for part in re.split(r"[^a-z0-9]+", name.lower()) if part]
    for index, part in enumerate(parts):
        if any(fragment in part for fragment in _PART_FRAGMENTS):
            return True
        if part == "key":
            if index > 0 and parts[index - 1] in _KEY_QUALIFIERS:
                return True
        elif part in _WHOLE_PARTS:
            return True
    return False


def redact_text(text: str) -> str:
    """``text`` with every URL password and credential assignment replaced by ``***``."""
    text = _URL_PASSWORD.sub(lambda m: f"{m['head']}:{MASK}@", text)

    def assignment(match: re.Match[str]) -> str:
        if not is_credential_name(match["name"]) or match["value"] in ("", MASK):
            return match[0]
        return f"{match['name']}{match['eq']}{MASK}"

    return _ASSIGNMENT.sub(assignment, text)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line as it may be recorded: each argument redacted, and the value after an option
    that names a credential (``--password VALUE``) masked whole."""
    shown: list[str] = []
    masks_next = False
    for argument in argv:
        shown.append(MASK if masks_next else redact_text(str(argument)))
        option = str(argument)
        masks_next = option.startswith("-") and "=" not in option and is_credential_name(option)
    return shown


def redacted(value: Any) -> Any:
    """A JSON-like record (a session, a fingerprint, settings) with the rule applied all through:
    strings redacted, lists of strings as command lines, values under credential keys masked."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {
            key: MASK if is_credential_name(str(key)) and item not in (None, "") else redacted(item)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        if all(isinstance(item, str) for item in value):
            return redact_argv(value)
        return [redacted(item) for item in value]
    return value
