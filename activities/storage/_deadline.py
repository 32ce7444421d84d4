"""pure: how long an activity attempt has left, and how much of it a save may take.

Temporal ends an attempt at the earlier of its start-to-close deadline (counted from when
this attempt started) and its schedule-to-close deadline (counted from the first schedule).
Work after the search — saving the complete result, storing a large payload — must end
before that, with time to spare for returning the result; otherwise a search that rg
finished dies as a timeout and is retried for nothing.

A save is also bounded by the call's own budget (``timeout_ms``): the attempt's deadline
includes the time the call may wait in queues (minutes, by default), so a store that hangs
would otherwise hold a 3-second call for the whole spill timeout. Whatever the budget has
left, a save may take at least :data:`SAVE_FLOOR_S`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

# What a spill or a payload-store check leaves of the attempt, for rendering the page and
# returning the result (the result's encoding and the completion's round trip).
SAVE_MARGIN_S = 2.0
# What storing the result's payload (after the activity returned) leaves of the attempt,
# for the completion's round trip.
RETURN_MARGIN_S = 0.5
# What a save may take however little of the call's budget is left (rg may have used it all).
SAVE_FLOOR_S = 1.5


def remaining_s(
    now: datetime,
    *,
    started: datetime,
    start_to_close: timedelta | None,
    scheduled: datetime,
    schedule_to_close: timedelta | None,
) -> float | None:
    """Seconds from ``now`` to the attempt's deadline; None when nothing bounds it.

    Each bound counts from the server's timestamp on the worker's clock. A reading that
    lies before the bound's start counts from ``now`` (a worker clock slightly behind the
    server's). A reading already past the bound's end says nothing: either the attempt is
    lost anyway, or the clocks disagree (``ActivityEnvironment``'s attempt started in 1970);
    that bound is ignored rather than cancelling every save.
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
    ``remaining`` None: no attempt deadline known."""
    if budget_left_s is not None:
        cap_s = min(cap_s, max(SAVE_FLOOR_S, budget_left_s))
    if remaining is None:
        return cap_s
    return min(cap_s, remaining - margin_s)
