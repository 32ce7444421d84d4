"""A large result's payload within the call's time: the upload after the activity returned
(:func:`storing_payload`), bounded, failing as the contract's one non-retryable SEARCH_FAILED in
plain words; and the words and the budget the room check before it shares
(``_storage.check_payload_room``). Below the seam: the backends use it, it uses no store.

A large ``spill: false`` result is stored by Temporal's payload encoding *after* the
activity function returned, still inside the activity's task (its ``activity.info()`` is
there). A failure there would otherwise leave as a retryable ``OSError``/``RuntimeError``
with host detail in its text, and a store that hangs would run the attempt into its
start-to-close timeout.
"""

from __future__ import annotations

import asyncio
import contextvars
import errno
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from temporalio import activity

from fs_search.activities._budget import (
    RETURN_MARGIN_S,
    window_s,
)
from fs_search.activities._contract import ErrorCode
from fs_search.activities._errors import SearchError
from fs_search.activities._progress import time_left

log = logging.getLogger(__name__)
T = TypeVar("T")

FULL = "is full"
SLOW = "did not answer in time"
DOWN = "is unavailable"
NO_TIME = "could not be reached before the call's time ran out"


# When the running call's budget runs out (time.monotonic()), kept by the activity for the
# payload upload that Temporal's encoding runs after the activity returned, in the same task.
_BUDGET_ENDS: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "fs_search_budget_ends", default=None
)


def keep_budget(ends: float | None) -> None:
    """Remember when the running call's budget runs out, for :func:`storing_payload`."""
    _BUDGET_ENDS.set(ends)


def budget_left(ends: float | None = None) -> float | None:
    """Seconds until ``ends`` (default: the kept budget end); None when unknown."""
    ends = _BUDGET_ENDS.get() if ends is None else ends
    return None if ends is None else ends - time.monotonic()


def is_full(error: BaseException) -> bool:
    """Whether a store's failure says it has no room (no space, or over quota)."""
    return isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)


def reason_of(error: BaseException) -> str:
    """How the payload store failed, in words that name no path, endpoint or errno."""
    if is_full(error):
        return FULL
    if isinstance(error, TimeoutError):
        return SLOW
    return DOWN


def payload_failure(size: int, reason: str) -> SearchError:
    """The contract error of a result that needs a payload store that failed."""
    return SearchError(
        ErrorCode.SEARCH_FAILED,
        f"the result (about {size} bytes) is too large to return inline and the payload "
        f"store {reason}; retry later, narrow the search, or search with spill enabled",
    )


async def storing_payload(store: Callable[[], Awaitable[T]], *, size: int, where: str) -> T:
    """Run a payload driver's ``store`` work: inside an activity, bounded by the attempt's
    deadline (less :data:`RETURN_MARGIN_S`) and by what the call's budget has left (kept by
    :func:`keep_budget`, at least ``SAVE_FLOOR_S``), failing as a non-retryable
    SEARCH_FAILED in plain words (the details go to the log); anywhere else (a caller, a
    workflow worker), as it is."""
    if not activity.in_activity():
        return await store()
    limit = window_s(
        time_left(), cap_s=math.inf, margin_s=RETURN_MARGIN_S, budget_left_s=budget_left()
    )
    try:
        if limit <= 0:
            raise TimeoutError("no time left in the attempt")
        async with asyncio.timeout(None if math.isinf(limit) else limit):
            return await store()
    except SearchError as e:
        raise e.to_application_error() from None
    except Exception as e:  # noqa: BLE001 - every store failure is the contract's
        reason = NO_TIME if limit <= 0 else reason_of(e)
        cause = e.__cause__ or e
        log.warning(
            "storing a result of about %d bytes in %s failed (%s): %s: %s",
            size,
            where,
            reason,
            type(cause).__name__,
            cause,
        )
        raise payload_failure(size, reason).to_application_error() from None
