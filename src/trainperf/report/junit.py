"""A case's figures as JUnit XML properties, clean under every ``junit_family``.

pytest's ``record_property`` fixture warns once per test under ``xunit2`` (pytest's default
family), yet pytest's JUnit writer puts a test's ``user_properties`` into its ``<properties>``
under every family. So the figures go onto the test's ``user_properties`` directly: the same
XML, no warning, and the xdist controller still reads them from each test's report.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class HasUserProperties(Protocol):
    """A pytest item: what its report carries beside the outcome."""

    user_properties: list[tuple[str, object]]


def property_recorder(item: HasUserProperties) -> Callable[[str, Any], None]:
    """``record(name, value)``, as ``record_property`` is called, onto ``item``'s properties."""

    def record(name: str, value: Any) -> None:
        item.user_properties.append((name, value))

    return record
