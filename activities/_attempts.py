"""A call's attempts, one rule for every route: the hand-back rule and the next step after a
failed attempt.

Four routes start fs-search's activities: ``FsSearchTools`` in workflow code (an activity,
or a Nexus operation of the ``fs_search`` service), ``FsSearchClient`` (a standalone
activity) and the Nexus handler (the operation's backing activity). Each keeps only its own
I/O — scheduling, sleeping, asking who polls the queue — and asks this module what to do:

* how a call is scheduled on a host queue (:func:`priority_for`) and which failures are
  never retried (:func:`with_contract_codes`);
* what a failure says (:func:`failure_cause`, :func:`handed_back`, :func:`not_picked_up`);
* the next step (:func:`after_failure`, :func:`after_check`): again after a pause, ask who
  polls the queue, unserved, or failed (the route maps the failure to the model's words).

The hand-back rule lives here whole: a host queue hands a call back (``WORKSPACE_BUSY``)
when its workspace holds its share of the host; the server brings it back for its first
hand-backs (:func:`retried_by_server`), then the caller does, after the pause the host asks
for (:func:`pause_after_hand_back`, within :data:`MIN_HANDED_BACK_PAUSE` and
:data:`MAX_HANDED_BACK_PAUSE`), behind every other workspace's new calls
(:data:`HANDED_BACK_PRIORITY`). The host's spacing of the pauses it asks for is the worker's
(``worker/_return_spacing.py``), within these bounds.

Pure: no I/O, no clock (the routes pass the time waited), nothing of temporalio but its data
types (``Priority``, ``RetryPolicy``, the failure classes): deterministic, and safe in
Temporal's workflow sandbox.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import timedelta

from temporalio.common import Priority, RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    NexusOperationError,
    TimeoutError,
    TimeoutType,
)

from fs_search.activities._contract import (
    NON_RETRYABLE_ERROR_TYPES,
    WORKSPACE_BUSY,
    fairness_key_for,
)

# Attempts of a call a host queue may hand back to the server's retries: a server retry is a
# timer and a dispatch on the server, where bringing the call back through its workflow is a
# failure, two workflow tasks and a timer; the last attempt goes back to the caller (which
# keeps its queueing budget and its lowest priority for calls handed back more often).
HAND_BACKS_ON_SERVER = 3
# The priority a call handed back (WORKSPACE_BUSY) is scheduled again with: Temporal's lowest
# (new calls have the default, 3), so it waits behind every other workspace's new calls on
# the host queue and a flood cycling through the queue never stands between a quiet
# workspace and the worker.
HANDED_BACK_PRIORITY = 5
# The pause a handed-back call waits before it is scheduled again lies between these: the
# host asks for one in that range (worker/_return_spacing.py), the caller keeps whatever it is
# asked within them.
MIN_HANDED_BACK_PAUSE = timedelta(seconds=1)
MAX_HANDED_BACK_PAUSE = timedelta(seconds=30)
# The caller's pause when the host asked for none.
HANDED_BACK_PAUSE = timedelta(seconds=2)


# --- how a call is scheduled ---------------------------------------------------------------


def with_contract_codes(policy: RetryPolicy) -> RetryPolicy:
    """``policy`` with the contract's codes and PayloadsTooLarge added as non-retryable.

    A caller's own policy is merged, not trusted to list them: a contract error retried
    would only fail again. WORKSPACE_BUSY is not among them: a host queue marks a hand-back
    retryable when the server should bring the call back (:func:`retried_by_server`), and
    non-retryable when the caller should (then the call is scheduled again behind other
    workspaces' calls, :data:`HANDED_BACK_PRIORITY`). Its server retries count as attempts
    of ``policy``: a call handed back twice has one attempt left for a worker that dies
    under it, and one whose attempts run out on hand-backs comes back to the caller the same
    way.
    """
    own = list(policy.non_retryable_error_types or [])
    missing = [t for t in NON_RETRYABLE_ERROR_TYPES if t not in own]
    if not missing:
        return policy
    return dataclasses.replace(policy, non_retryable_error_types=own + missing)


def priority_for(workspace_id: str, *, host: str | None, handed_back: bool) -> Priority | None:
    """The priority of a call on a host queue (None on a workspace's own queue: the
    workflow's own). One host queue serves many workspaces: a server with task-queue
    fairness dispatches them round-robin (the fairness key); a call handed back waits
    behind every new one (:data:`HANDED_BACK_PRIORITY`)."""
    if host is None:
        return None
    return Priority(
        priority_key=HANDED_BACK_PRIORITY if handed_back else None,
        fairness_key=fairness_key_for(workspace_id),
    )


def retried_by_server(
    *, attempt: int, pause_s: float, queue_left_s: float | None, close_left_s: float | None
) -> bool:
    """Whether the server retries a call handed back on its ``attempt`` (1 first) after
    ``pause_s``, rather than failing it back to its caller (the host's side of the rule).

    The server's retry costs a timer and a dispatch; the caller's is a failure, two workflow
    tasks and a timer (or a client's round trip), the churn that slowed every workspace on a
    busy host. The caller still takes the call back on attempt :data:`HAND_BACKS_ON_SERVER`
    (its own queueing budget, and the lowest priority for a call handed back that often), and
    whenever the pause would run past what is left of the call's queueing budget
    (``queue_left_s``) or of its schedule-to-close after one more attempt (``close_left_s``;
    None: unbounded): the caller keeps its budget to the letter.
    """
    return (
        attempt < HAND_BACKS_ON_SERVER
        and (queue_left_s is None or pause_s <= queue_left_s)
        and (close_left_s is None or pause_s <= close_left_s)
    )


# --- what a failure says -------------------------------------------------------------------


def failure_cause(error: BaseException) -> BaseException:
    """What a failed call says happened, past the wrappers around it: an activity's
    ``ActivityError``, a Nexus operation's ``NexusOperationError``, the handler's
    ``HandlerError`` or ``OperationError`` around the error it raised, and a standalone
    activity's ``ActivityFailureError``."""
    seen = error
    for _ in range(8):  # a chain is a few links long; never loop on a cycle
        inner: BaseException | None
        if isinstance(seen, ActivityError | NexusOperationError):
            inner = seen.cause
        elif type(seen).__name__ in ("HandlerError", "ActivityFailureError"):
            inner = getattr(seen, "cause", None) or seen.__cause__
        elif (
            isinstance(seen, ApplicationError)
            and seen.type == "OperationError"
            and seen.cause is not None
        ):
            inner = seen.cause
        else:
            break
        if inner is None:
            break
        seen = inner
    return seen


def handed_back(error: BaseException) -> bool:
    """Whether a host queue handed the call back: its workspace held its share of the host."""
    cause = failure_cause(error)
    return isinstance(cause, ApplicationError) and cause.type == WORKSPACE_BUSY


def asked_pause(error: BaseException) -> timedelta | None:
    """The pause a host asked a handed-back call to wait (its failure's next retry delay)."""
    cause = failure_cause(error)
    return cause.next_retry_delay if isinstance(cause, ApplicationError) else None


def not_picked_up(error: BaseException) -> bool:
    """Whether a call failed because no worker took it within schedule-to-start."""
    cause = failure_cause(error)  # a bare timeout (no call's failure around it) is not
    return (
        cause is not error
        and isinstance(cause, TimeoutError)
        and cause.type == TimeoutType.SCHEDULE_TO_START
    )


def pause_after_hand_back(
    queue_timeout: timedelta, waited: timedelta, asked: timedelta | None = None
) -> timedelta | None:
    """How long a handed-back call waits before it is scheduled again: the pause the host
    ``asked`` for (between :data:`MIN_HANDED_BACK_PAUSE` and :data:`MAX_HANDED_BACK_PAUSE`;
    :data:`HANDED_BACK_PAUSE` when it asked none), at most what is left of the queueing
    budget; None when nothing is left.

    The host spaces a workspace's handed-back calls so that they come back about as often as
    its calls end (``worker/_return_spacing.py``): a flood's calls cycle through the host
    queue as often as the host can take them, not every pause each."""
    left = queue_timeout - waited
    if left <= timedelta(0):
        return None
    pause = HANDED_BACK_PAUSE if asked is None else asked
    return min(max(pause, MIN_HANDED_BACK_PAUSE), MAX_HANDED_BACK_PAUSE, left)


# --- the next step -------------------------------------------------------------------------


@dataclass(frozen=True)
class Again:
    """Schedule the call again after ``pause`` (zero: at once). ``handed_back``: a host
    queue handed it back (from now on it is scheduled at :data:`HANDED_BACK_PRIORITY`);
    ``check_queue``: no worker took it, and a route that cannot ask who polls the queue (a
    caller in another namespace) asks the Nexus handler to check first."""

    pause: timedelta = timedelta(0)
    handed_back: bool = False
    check_queue: bool = False


@dataclass(frozen=True)
class CheckQueue:
    """No worker took the call within schedule-to-start: ask who polls its queue, then
    :func:`after_check`."""


@dataclass(frozen=True)
class Unserved:
    """The call was not served within its queueing budget: answer the route's unserved
    ``Error:`` (what the queue check found, or a busy queue)."""


@dataclass(frozen=True)
class Failed:
    """The attempt failed for good: the route maps the failure (``map_failure``)."""


Step = Again | CheckQueue | Unserved | Failed


def after_failure(error: BaseException, *, waited: timedelta, queue_timeout: timedelta) -> Step:
    """The next step after an attempt failed with ``error``, ``waited`` into the call's
    queueing budget ``queue_timeout``.

    Handed back: again after the pause the host asked (:func:`pause_after_hand_back`), or
    unserved when no budget is left. Not taken by any worker: check the queue. Anything
    else (a contract error, a timeout, a cancellation): failed.
    """
    if handed_back(error):
        pause = pause_after_hand_back(queue_timeout, waited, asked_pause(error))
        return Unserved() if pause is None else Again(pause, handed_back=True)
    if not_picked_up(error):
        return CheckQueue()
    return Failed()


def after_check(polled: bool | None, *, waited: timedelta, queue_timeout: timedelta) -> Step:
    """The next step once the queue was checked (``polled``: a live poller on it, None when
    the check could not say): a busy worker and budget left, again at once (a route that
    cannot check, the Nexus caller, passes True and has the handler check:
    ``check_queue``); else unserved."""
    if polled and waited < queue_timeout:
        return Again(check_queue=True)
    return Unserved()
