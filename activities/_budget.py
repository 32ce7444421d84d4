"""pure: a call's time, the one model the caller schedules by and the worker enforces.

A glob or grep call has its own budget (``timeout_ms``, at most the worker's cap) for rg. It
may first wait for a busy worker, within a queueing budget (minutes): in Temporal
(schedule-to-start) and in the worker, which holds more calls than it runs. After rg it
keeps :data:`RESERVE` for digesting, saving and returning the result. So the caller schedules
an attempt's start-to-close as what is left of the queueing budget + the budget + the
reserve (:func:`start_to_close_for`), and the worker lets a call wait for a running slot
whatever that start-to-close leaves beyond the budget and the reserve
(:func:`queue_budget_s`): the two sides agree because both read this module.

Around an attempt: a standalone activity (one-off calls, the Nexus handler) and the CLI's
one-call workflow close :data:`RETRY_MARGIN` after it, room for a retry after a worker died,
so a caller that went away never leaves one pending; a Nexus operation closes
:data:`NEXUS_MARGIN` after its backing activity, whose own timeouts fire first and say which
one it was. Inside an attempt: saves (spills, large payloads) end before its deadline
(:func:`remaining_s`, :func:`window_s`). A fleet detaching a workspace lets its running calls
finish (:func:`drain_for`).

The Nexus handler bounds what a caller in another namespace may ask (:class:`BackingOptions`).
No I/O, no ``temporalio`` activity calls: workflow code imports it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from pydantic import BaseModel

from fs_search.activities._contract import DEFAULT_TIMEOUT_MS

# How long a call may wait for a busy worker (in Temporal and in the worker's queue).
DEFAULT_QUEUE_TIMEOUT = timedelta(minutes=5)
# How soon a call no worker picked up is checked: a worker takes calls at once (it holds
# many more than it runs), so this is how long an unserved workspace takes to report.
DEFAULT_SCHEDULE_TO_START = timedelta(seconds=8)
# The activity heartbeats every 0.25 s (_progress.py); a worker silent this long is gone.
DEFAULT_HEARTBEAT_TIMEOUT = timedelta(seconds=5)
# Attempts of a call: a retry covers a worker that died or shut down mid-call.
DEFAULT_MAX_ATTEMPTS = 3
# What an attempt keeps after rg for digesting, saving and returning the result.
RESERVE = timedelta(seconds=5)
# A standalone activity's (or the CLI's one-call workflow's) whole life beyond one attempt:
# room for a retry after a worker died. Past it the call is closed whatever its attempts
# do, so a caller that went away (a killed shell, a deleted workflow) never leaves it pending.
RETRY_MARGIN = timedelta(minutes=1)
# A Nexus operation's own deadline beyond its backing activity's: the activity's timeouts
# fire first and say which one it was.
NEXUS_MARGIN = timedelta(seconds=30)

# The Nexus handler's bounds on what a caller asks for.
MAX_QUEUE_TIMEOUT = timedelta(hours=1)
MAX_CALL_TIMEOUT = timedelta(hours=1)
MIN_TIMEOUT = timedelta(seconds=1)
MAX_HEARTBEAT_TIMEOUT = timedelta(minutes=5)
MAX_ATTEMPTS = 10

# What a spill or a payload-store check leaves of the attempt, for rendering the page and
# returning the result (the result's encoding and the completion's round trip).
SAVE_MARGIN_S = 2.0
# What storing the result's payload (after the activity returned) leaves of the attempt,
# for the completion's round trip.
RETURN_MARGIN_S = 0.5
# What a save may take however little of the call's budget is left (rg may have used it all).
SAVE_FLOOR_S = 1.5
# What a save (a spill, or a payload-store check) may take at most: a slow store costs the
# save, never the search (the inline page is returned; the check fails the call once).
SAVE_TIMEOUT_S = 15.0


def budget_s(timeout_ms: int | None, *, cap_ms: int) -> float:
    """A call's budget in seconds: the request's ``timeout_ms`` (checked positive by its
    model) up to the worker's cap."""
    return min(timeout_ms or cap_ms, cap_ms) / 1000


def start_to_close_for(queue_left: timedelta, timeout_ms: int) -> timedelta:
    """An attempt's start-to-close: what is left of the queueing budget (the worker holds a
    call it cannot run yet), the call's own budget, and the :data:`RESERVE` for the result."""
    return max(queue_left, timedelta(0)) + timedelta(milliseconds=timeout_ms) + RESERVE


def queue_budget_s(remaining_s: float | None, budget_s: float) -> float:
    """How long a call may wait for a running slot beyond its own budget: what is left of
    the attempt's time (``remaining_s``) after the budget and the :data:`RESERVE` (0 when
    nothing is, or nothing bounds the attempt)."""
    if remaining_s is None:
        return 0.0
    return max(0.0, remaining_s - budget_s - RESERVE.total_seconds())


def schedule_to_close_for(start_to_close: timedelta) -> timedelta:
    """A standalone activity's schedule-to-close: one attempt's start-to-close (which holds
    the queueing budget) plus :data:`RETRY_MARGIN`."""
    return start_to_close + RETRY_MARGIN


def execution_timeout(timeout_ms: int) -> timedelta:
    """How long the CLI's one-call workflow may run: the queueing budget, the call's own
    budget and :data:`RETRY_MARGIN`. A caller that dies (Ctrl-C, a killed shell) never
    leaves it Running: its private queue has no worker any more, and Temporal closes it."""
    return DEFAULT_QUEUE_TIMEOUT + timedelta(milliseconds=timeout_ms) + RETRY_MARGIN


def drain_for(cap_ms: int) -> timedelta:
    """How long a detached workspace's running calls may take to finish: a call's budget at
    the worker's cap, and the :data:`RESERVE` it keeps after rg."""
    return timedelta(milliseconds=cap_ms) + RESERVE


def remaining_s(
    now: datetime,
    *,
    started: datetime,
    start_to_close: timedelta | None,
    scheduled: datetime,
    schedule_to_close: timedelta | None,
) -> float | None:
    """Seconds from ``now`` to the attempt's deadline; None when nothing bounds it.

    Temporal ends an attempt at the earlier of its start-to-close deadline (counted from
    when this attempt started) and its schedule-to-close deadline (counted from the first
    schedule). Each bound counts from the server's timestamp on the worker's clock. A
    reading that lies before the bound's start counts from ``now`` (a worker clock slightly
    behind the server's). A reading already past the bound's end says nothing: either the
    attempt is lost anyway, or the clocks disagree (``ActivityEnvironment``'s attempt
    started in 1970); that bound is ignored rather than cancelling every save.
    """
    left = [
        timeout.total_seconds() - max(0.0, (now - since).total_seconds())
        for since, timeout in ((started, start_to_close), (scheduled, schedule_to_close))
        if timeout is not None
    ]
    plausible = [s for s in left if s > 0]
    return min(plausible) if plausible else None


def window_s(
    remaining: float | None,
    *,
    cap_s: float,
    margin_s: float,
    budget_left_s: float | None = None,
) -> float:
    """How long a save may take: at most ``cap_s``, at most what the call's budget has left
    (``budget_left_s``, but never under :data:`SAVE_FLOOR_S`; None: no budget known), and
    ending ``margin_s`` before the attempt's deadline (0 or less: no time for it).
    ``remaining`` None: no attempt deadline known.

    Work after the search must end before the attempt's deadline, with time to spare for
    returning the result, or a search rg finished dies as a timeout and is retried for
    nothing. It is also bounded by the call's own budget: the attempt's deadline includes
    the time the call may wait in queues (minutes), so a store that hangs would otherwise
    hold a 3-second call for the whole spill timeout."""
    if budget_left_s is not None:
        cap_s = min(cap_s, max(SAVE_FLOOR_S, budget_left_s))
    if remaining is None:
        return cap_s
    return min(cap_s, remaining - margin_s)


class CallerOptions(Protocol):
    """What a caller asks of a backing activity (a Nexus service call's fields): its
    options in ms (None: the default) and the queue it runs on."""

    queue_timeout_ms: int | None
    schedule_to_start_ms: int | None
    start_to_close_ms: int | None
    heartbeat_timeout_ms: int | None
    max_attempts: int | None

    def task_queue(self) -> str: ...


class BackingOptions(BaseModel):
    """How the handler schedules a call's backing activity: the caller's options, bounded."""

    task_queue: str
    start_to_close: timedelta
    schedule_to_start: timedelta | None
    schedule_to_close: timedelta
    heartbeat_timeout: timedelta
    max_attempts: int

    @classmethod
    def of(
        cls, call: CallerOptions, *, timeout_ms: int | None, cap_ms: int | None = None
    ) -> BackingOptions:
        """The bounded options of ``call`` (``timeout_ms``: the request's budget, ``cap_ms``:
        the serving workers' cap when known). ``schedule_to_start_ms`` 0: none."""
        budget = timeout_ms if timeout_ms and timeout_ms > 0 else DEFAULT_TIMEOUT_MS
        if cap_ms:
            budget = min(budget, cap_ms)
        budget = min(budget, _ms(MAX_CALL_TIMEOUT))
        queue = _bounded_ms(
            call.queue_timeout_ms, DEFAULT_QUEUE_TIMEOUT, timedelta(0), MAX_QUEUE_TIMEOUT
        )
        ceiling = start_to_close_for(MAX_QUEUE_TIMEOUT, budget)
        start_to_close = _bounded_ms(
            call.start_to_close_ms, start_to_close_for(queue, budget), MIN_TIMEOUT, ceiling
        )
        schedule_to_start: timedelta | None = None
        if call.schedule_to_start_ms is None or call.schedule_to_start_ms > 0:
            schedule_to_start = _bounded_ms(
                call.schedule_to_start_ms, DEFAULT_SCHEDULE_TO_START, MIN_TIMEOUT, MAX_QUEUE_TIMEOUT
            )
        heartbeat = _bounded_ms(
            call.heartbeat_timeout_ms,
            DEFAULT_HEARTBEAT_TIMEOUT,
            MIN_TIMEOUT,
            MAX_HEARTBEAT_TIMEOUT,
        )
        attempts = call.max_attempts or DEFAULT_MAX_ATTEMPTS
        attempts = max(1, min(attempts, MAX_ATTEMPTS))
        return cls(
            task_queue=call.task_queue(),
            start_to_close=start_to_close,
            schedule_to_start=schedule_to_start,
            schedule_to_close=schedule_to_close_for(start_to_close),
            heartbeat_timeout=heartbeat,
            max_attempts=attempts,
        )


def _ms(span: timedelta) -> int:
    return int(span.total_seconds() * 1000)


def _bounded_ms(
    value_ms: int | None, default: timedelta, low: timedelta, high: timedelta
) -> timedelta:
    """``value_ms`` within [low, high] (bounded as an integer first: a caller's 10**30 ms
    would overflow ``timedelta``), or ``default`` when not given."""
    if value_ms is None:
        return default
    return timedelta(milliseconds=min(max(value_ms, _ms(low)), _ms(high)))
