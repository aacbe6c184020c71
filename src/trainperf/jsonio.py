"""JSON files both sides of a run write and read: atomic whole files, flushed JSON lines.

Core, because the child writes through it as much as the parent: a reader never sees half a
file, and a line appended before a crash is on disk.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def write_json_atomic(path: Path, data: Any) -> None:
    """Write via a temporary file and rename, so a reader never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a disk that filled up mid-write keeps the old file, not a torn one
        raise


def append_jsonl(path: Path, record: dict[str, Any]) -> None:
    """Append one line and flush it to disk: a crash later in the run loses nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        handle.write(json.dumps(record, sort_keys=True) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def read_jsonl(path: Path) -> list[Any]:
    """The records of a JSON-lines file; a torn last line (its writer killed mid-write) ends it."""
    if not path.is_file():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            break
    return records


def stored_number(value: Any) -> float:
    """A number as a result file stored it (an int stays an int, so the file reads back unchanged); any
    other value raises TypeError, which a record's reader takes as "no such record"."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"not a number: {value!r}")
    return value


def stored_number_or_none(value: Any) -> float | None:
    """A stored number as it was written, or None where the file holds none there."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def stored_int(value: Any) -> int | None:
    """A stored whole number, or None where the file holds none there (a JSON boolean is none)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def stored_flag(value: Any) -> bool | None:
    """A stored boolean, or None where the file holds none there."""
    return value if isinstance(value, bool) else None


def stored_text(value: Any) -> str | None:
    """A stored string, or None where the file holds none there."""
    return value if isinstance(value, str) else None


def stored_texts(value: Any) -> tuple[str, ...] | None:
    """A stored list of strings as a tuple, or None where the file holds no list there."""
    return tuple(str(item) for item in value) if isinstance(value, list) else None


def listed(items: tuple[Any, ...] | None) -> list[Any] | None:
    """A record's tuple as the file stores it (a list), or None where the record has none."""
    return list(items) if items is not None else None


def stored_mapping(value: Any, read: Callable[[Any], T | None]) -> dict[str, T] | None:
    """A stored object whose every value reads by ``read`` (figures by name, readings by GPU); None where
    the file holds no object there, or any value does not read (the object is then kept as stored)."""
    if not isinstance(value, dict):
        return None
    found = {key: read(item) for key, item in value.items()}
    if any(item is None for item in found.values()):
        return None
    return {key: item for key, item in found.items() if item is not None}


def unread_keys(data: Mapping[str, Any], read: Mapping[str, Any]) -> dict[str, Any]:
    """What a record keeps aside of a stored object, as the file had it: keys it has no field for, and
    those whose value did not read as their field (its reader's None), a stored null among them."""
    return {key: value for key, value in data.items() if key not in read or read[key] is None}


def read_fields(data: Mapping[str, Any], readers: Mapping[str, Callable[[Any], Any]]) -> dict[str, Any]:
    """A stored object's values by the record's readers (its fields' keys, each to a reader such as
    ``stored_text``): each field's value, None where the object has none of its type there."""
    return {key: read(data.get(key)) for key, read in readers.items()}


def written_back(
    recorded: Mapping[str, Any], unread: Mapping[str, Any], order: Sequence[str] = ()
) -> dict[str, Any]:
    """A record's stored object: its fields' values (None: not recorded, not written) and the keys it kept
    unread, in its writer's key order (``order``: where the file is compared key by key, as an A/B record
    is), then any key the order does not name, as they come."""
    merged = {**unread, **{key: value for key, value in recorded.items() if value is not None}}
    return {**{key: merged[key] for key in order if key in merged}, **merged}
