"""The running call as its activity attempt sees it: its live state, the heartbeats that
report it to Temporal, and the time the attempt has left."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from temporalio import activity

from fs_search.activities._budget import remaining_s

# The activity heartbeats every 0.25 s and the worker's throttle sends each beat (the
# contract promises at most 0.5 s between beats), so a cancel reaches rg within ~0.3 s.
HEARTBEAT_INTERVAL_S = 0.25
# While queued: every 2 s, or a third of the heartbeat timeout if that is shorter.
QUEUED_HEARTBEAT_S = 2.0


def _queued_interval_s() -> float:
    timeout = activity.info().heartbeat_timeout if activity.in_activity() else None
    if timeout is None:
        return QUEUED_HEARTBEAT_S
    return min(QUEUED_HEARTBEAT_S, timeout.total_seconds() / 3)


@dataclass
class Progress:
    """Live state of one search, read by the heartbeat timer.

    rg reports nothing while it scans without a match (``--json`` writes only for files
    that match, ``--files`` only names), so ``raw_bytes`` can stay 0 for a whole budget:
    ``rg_ms`` against ``budget_ms`` is what shows such a scan's progress.
    """

    phase: str = "starting"
    raw_bytes: int = 0
    started: float = field(default_factory=time.monotonic)
    # The call's budget (the request's timeout_ms capped by the worker's), once known.
    budget_ms: int | None = None
    # When the first rg of the call started (after any wait for a running slot).
    rg_started: float | None = None

    def elapsed_ms(self, now: float | None = None) -> int:
        """Milliseconds since the search started (until ``now``, default: now)."""
        return int(((time.monotonic() if now is None else now) - self.started) * 1000)

    def budget_ends(self) -> float | None:
        """When the call's budget runs out (``time.monotonic()``): ``budget_ms`` after its
        first rg started; None before that, or without a budget."""
        if self.rg_started is None or self.budget_ms is None:
            return None
        return self.rg_started + self.budget_ms / 1000

    def rg_ms(self, now: float | None = None) -> int:
        """Milliseconds rg has run (what counts against the budget) until ``now`` (default:
        now); 0 before it starts."""
        if self.rg_started is None:
            return 0
        return int(((time.monotonic() if now is None else now) - self.rg_started) * 1000)

    def details(self) -> dict[str, object]:
        """Heartbeat details: phase, raw bytes read, ms since the call started, ms rg has
        run and the call's budget in ms (shown under Pending Activities in the UI). Both
        durations end at the same instant, so ``rg_ms`` never exceeds ``elapsed_ms`` however
        long this thread is held up between them."""
        now = time.monotonic()
        return {
            "phase": self.phase,
            "raw_bytes": self.raw_bytes,
            "elapsed_ms": self.elapsed_ms(now),
            "rg_ms": self.rg_ms(now),
            "budget_ms": self.budget_ms,
        }


@contextlib.asynccontextmanager
async def heartbeating(
    progress: Progress, *, interval_s: float = HEARTBEAT_INTERVAL_S
) -> AsyncIterator[None]:
    """Heartbeat every ``interval_s`` with ``progress.details()`` while the body runs.

    A timer, not output, drives it: a search that finds nothing still heartbeats, so
    cancellation reaches it. Outside an activity it does nothing.
    """

    queued_every = _queued_interval_s()

    async def beat() -> None:
        # The first beat comes after one interval: a quick search costs no heartbeat.
        # A call waiting for a running slot (a worker holds many) beats less often: it
        # has nothing to stop, and a hundred of them must not flood the server.
        sent = time.monotonic()
        while True:
            await asyncio.sleep(interval_s)
            now = time.monotonic()
            if progress.phase == "queued" and now - sent < queued_every:
                continue
            activity.heartbeat(progress.details())
            sent = now

    task = asyncio.create_task(beat()) if activity.in_activity() else None
    try:
        yield
    finally:
        # Not awaited: awaiting here could swallow a cancellation of the activity itself.
        if task is not None:
            task.cancel()


def time_left() -> float | None:
    """Seconds before the running attempt's deadline (None: not in an activity, or unknown)."""
    if not activity.in_activity():
        return None
    info = activity.info()
    return remaining_s(
        datetime.now(UTC),
        started=info.started_time,
        start_to_close=info.start_to_close_timeout,
        scheduled=info.scheduled_time,
        schedule_to_close=info.schedule_to_close_timeout,
    )
