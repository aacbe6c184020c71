"""How each option's text becomes its value, or a ``ValueError`` that ``settings.resolve`` turns into one
line naming the option (the parsers of ``settings.OPTIONS``)."""

from __future__ import annotations


def _whole(text: str) -> int:
    try:
        return int(str(text).strip())
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number: give e.g. 3") from None


def _number(text: str) -> float:
    try:
        return float(str(text).strip())
    except ValueError:
        raise ValueError(f"{text!r} is not a number: give e.g. 30 or 0.5") from None


def positive_int(text: str) -> int:
    value = _whole(text)
    if value < 1:
        raise ValueError("must be >= 1")
    return value


def positive_float(text: str) -> float:
    value = _number(text)
    if value <= 0:
        raise ValueError("must be > 0")
    return value


def seconds(text: str) -> float:
    value = _number(text)
    if value < 0:
        raise ValueError("must be >= 0 seconds (0: off)")
    return value


def count(text: str) -> int:
    value = _whole(text)
    if value < 0:
        raise ValueError("must be >= 0")
    return value


def fraction(text: str) -> float:
    value = _number(text)
    if not 0 <= value <= 10:
        raise ValueError("must be a fraction such as 0.05")
    return value


def baseline_mode(text: str) -> str:
    mode = str(text).strip().lower()
    if mode not in ("file", "history", "auto"):
        raise ValueError("must be file, history or auto")
    return mode


def night_date(text: str) -> str:
    from datetime import datetime, timezone

    from trainperf.plan.tiers import parse_night

    return parse_night(text, datetime.now(timezone.utc).date()).isoformat()


def plant_spec(text: str) -> str:
    from trainperf.traces.plant import parse_plant

    parse_plant(text)
    return str(text).strip().lower()


def boolean(text: str) -> bool:
    lowered = str(text).strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("must be true or false")


def kernel_clock(text: str) -> str:
    from trainperf.traces.kernel_steps import KERNEL_CLOCKS

    clock = str(text).strip().lower()
    if clock not in KERNEL_CLOCKS:
        raise ValueError("must be auto, cupti or profiler")
    return clock
