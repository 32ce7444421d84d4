"""The attempt policy every route asks (activities/_attempts.py), as a table: a failure, the
time waited and the queueing budget in; the next step out. Pure: no server, no clock."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import timedelta

import pytest
from temporalio.client import ActivityFailureError
from temporalio.common import Priority, RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    NexusOperationError,
    TimeoutError,
    TimeoutType,
)

from fs_search.activities._attempts import (
    HANDED_BACK_PAUSE,
    HANDED_BACK_PRIORITY,
    MAX_HANDED_BACK_PAUSE,
    MIN_HANDED_BACK_PAUSE,
    Again,
    CheckQueue,
    Failed,
    Unserved,
    after_check,
    after_failure,
    priority_for,
    with_contract_codes,
)
from fs_search.activities._contract import (
    NON_RETRYABLE_ERROR_TYPES,
    WORKSPACE_BUSY,
    ErrorCode,
    fairness_key_for,
)

BUDGET = timedelta(minutes=5)
S = timedelta(seconds=1)


def _activity(cause: BaseException) -> ActivityError:
    error = ActivityError(
        "activity failed",
        scheduled_event_id=1,
        started_event_id=2,
        identity="w",
        activity_type="fs_search.grep",
        activity_id="1",
        retry_state=None,
    )
    error.__cause__ = cause
    return error


def _nexus(cause: BaseException) -> NexusOperationError:
    error = NexusOperationError(
        "nexus operation completed unsuccessfully",
        scheduled_event_id=1,
        endpoint="fs-search",
        service="fs_search",
        operation="grep",
        operation_token="",
    )
    error.__cause__ = cause
    return error


def _busy(pause: timedelta | None = None) -> ApplicationError:
    return ApplicationError("busy", type=WORKSPACE_BUSY, non_retryable=True, next_retry_delay=pause)


def _not_started() -> TimeoutError:
    return TimeoutError("no worker", type=TimeoutType.SCHEDULE_TO_START, last_heartbeat_details=[])


def _timed_out() -> TimeoutError:
    return TimeoutError("closed", type=TimeoutType.START_TO_CLOSE, last_heartbeat_details=[])


def _contract() -> ApplicationError:
    return ApplicationError("bad", type=ErrorCode.INVALID_ARGUMENT.value, non_retryable=True)


# Each route's wrapper around the same causes: the policy reads through all of them.
WRAPPERS = {
    "activity": _activity,
    "nexus": _nexus,
    "standalone": lambda cause: ActivityFailureError(cause=cause),
}


@pytest.mark.parametrize("route", WRAPPERS)
@pytest.mark.parametrize(
    ("cause", "waited", "step"),
    [
        # Handed back: the pause the host asked, within the bounds and the budget left.
        (lambda: _busy(7 * S), S, Again(7 * S, handed_back=True)),
        (lambda: _busy(None), S, Again(HANDED_BACK_PAUSE, handed_back=True)),
        (lambda: _busy(timedelta(0)), S, Again(MIN_HANDED_BACK_PAUSE, handed_back=True)),
        (lambda: _busy(timedelta(days=1)), S, Again(MAX_HANDED_BACK_PAUSE, handed_back=True)),
        (lambda: _busy(7 * S), BUDGET - 2 * S, Again(2 * S, handed_back=True)),
        # ... and none left: unserved (the queue is polled, by a busy host).
        (lambda: _busy(7 * S), BUDGET, Unserved()),
        (lambda: _busy(7 * S), BUDGET + S, Unserved()),
        # No worker took it: ask who polls the queue, whatever the time.
        (_not_started, S, CheckQueue()),
        (_not_started, BUDGET, CheckQueue()),
        # Anything else fails as it is (the route maps it).
        (_timed_out, S, Failed()),
        (_contract, S, Failed()),
    ],
)
def test_after_failure(route, cause, waited, step):
    """The next step after a failed attempt, on every route's wrapping of the failure."""
    error = WRAPPERS[route](cause())
    assert after_failure(error, waited=waited, queue_timeout=BUDGET) == step


def test_a_cancellation_or_a_bare_timeout_is_a_failure():
    """A cancelled call, and a timeout no call's failure wraps, are never retried."""
    for error in (asyncio.CancelledError(), _not_started(), _busy(S)):
        expected = Again(S, handed_back=True) if isinstance(error, ApplicationError) else Failed()
        assert after_failure(error, waited=S, queue_timeout=BUDGET) == expected


@pytest.mark.parametrize(
    ("polled", "waited", "step"),
    [
        (True, S, Again(check_queue=True)),  # a busy worker: again at once
        (True, BUDGET, Unserved()),  # ... until the budget is spent
        (False, S, Unserved()),  # nothing polls the queue
        (None, S, Unserved()),  # the check could not say
    ],
)
def test_after_check(polled, waited, step):
    """The next step once the queue was checked."""
    assert after_check(polled, waited=waited, queue_timeout=BUDGET) == step


def test_priority_and_retry_codes_are_one_rule():
    """A host queue's calls carry their workspace's fairness key, a handed-back call the
    lowest priority; a workspace's own queue none. Every policy gains the contract's codes."""
    assert priority_for("ws", host=None, handed_back=True) is None
    assert priority_for("ws", host="h", handed_back=False) == Priority(
        fairness_key=fairness_key_for("ws")
    )
    again = priority_for("ws", host="h", handed_back=True)
    assert again is not None and again.priority_key == HANDED_BACK_PRIORITY == 5
    merged = with_contract_codes(RetryPolicy(maximum_attempts=4))
    assert merged.non_retryable_error_types == list(NON_RETRYABLE_ERROR_TYPES)
    assert WORKSPACE_BUSY not in merged.non_retryable_error_types


def test_the_policy_loads_nothing_but_data_types():
    """Importable in the workflow sandbox: no worker, no client, no I/O module of fs-search."""
    code = (
        "import sys, fs_search.activities._attempts\n"
        "bad = [m for m in sys.modules if m.startswith(('temporalio.worker', 'temporalio.client',"
        " 'fs_search.activities.rg', 'fs_search.activities.storage', 'fs_search.activities._search'))]\n"
        "print(bad)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"
