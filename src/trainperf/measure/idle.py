"""A GPU's memory at rest: the level before a case, and the wait for it to come back after one."""

from __future__ import annotations

import time
from collections.abc import Callable

from trainperf.measure.nvml import Nvml
from trainperf.run_checks_record import IdleCheck

IDLE_SLACK_B = 1 << 30
IDLE_WAIT_S = 60.0


def idle_level(device: str, session_device: str | None, session_idle_b: int | None) -> int:
    """Device memory in use with no case on it: read now (each worker's or case's own GPU), and
    for the session's GPU never above the session's reading, so that memory a previous case
    left behind is not subtracted from this one's peak."""
    now = int(Nvml.sample(Nvml.handle(device)).mem_used_b)
    session = session_idle_b if device == session_device else None
    return now if session is None else min(now, session)


def wait_idle(device: str, idle_b: int | None, say: Callable[[str], None]) -> IdleCheck:
    """Wait until the GPU's memory is back near its level before the case, and report if it is not."""
    handle = Nvml.handle(device)
    idle = (idle_b or 0) + IDLE_SLACK_B
    started = time.monotonic()
    used = Nvml.sample(handle).mem_used_b
    while used > idle and time.monotonic() - started < IDLE_WAIT_S:
        time.sleep(0.5)
        used = Nvml.sample(handle).mem_used_b
    back = used <= idle
    if not back:
        say(
            f"[trainperf] warning: GPU {device} memory still {used / 2**30:.1f} GiB in use "
            f"{IDLE_WAIT_S:.0f}s after "
            "the case ended; the next case may be disturbed"
        )
    return IdleCheck(
        idle=back, mem_used_gib=round(used / 2**30, 2), waited_s=round(time.monotonic() - started, 1)
    )
