"""What every activity call goes through: contract errors, heartbeats, argument checks."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

from temporalio import activity

from fs_search.activities.errors import SearchError, invalid_argument
from fs_search.activities.executor import Progress
from fs_search.activities.models import (
    ErrorCode,
    GlobRequest,
    GrepRequest,
    ReadSpillRequest,
    request_problem,
)
from fs_search.activities.spill import SpillKey

log = logging.getLogger("fs_search.activities.search")

HEARTBEAT_INTERVAL_S = 0.25
T = TypeVar("T")


def spill_key(tool: str) -> SpillKey:
    """The running activity's artifact key: workflow run + activity id + tool."""
    info = activity.info()
    if info.workflow_id is not None:
        return SpillKey(
            workflow_id=info.workflow_id,
            run_id=info.workflow_run_id or "null",
            activity_id=info.activity_id,
            tool=tool,
        )
    return SpillKey(
        workflow_id="standalone",
        run_id=info.activity_run_id or "null",
        activity_id=info.activity_id,
        tool=tool,
    )


def check(problem: str | None) -> None:
    """Raise INVALID_ARGUMENT for a problem found by an argument check."""
    if problem:
        raise invalid_argument(problem)


def check_sizes(req: GlobRequest | GrepRequest | ReadSpillRequest) -> None:
    """Refuse oversized or NUL-bearing request fields."""
    check(request_problem(req))


async def contract(work: Awaitable[T]) -> T:
    """Run an activity body; every failure leaves as a contract ApplicationError."""
    try:
        return await work
    except SearchError as e:
        raise e.to_application_error() from None
    except asyncio.CancelledError:
        raise
    except Exception as e:
        log.exception("unexpected failure in a search activity")
        # The exception's text may carry host detail (paths, endpoints): the log has it.
        raise SearchError(
            ErrorCode.SEARCH_FAILED,
            f"the search failed unexpectedly ({type(e).__name__}); the worker log has details",
        ).to_application_error() from None


@contextlib.asynccontextmanager
async def heartbeating(progress: Progress) -> AsyncIterator[None]:
    """Heartbeat every HEARTBEAT_INTERVAL_S with progress details while the body runs.

    A timer, not output, drives it: a search that finds nothing still heartbeats, so
    cancellation reaches it.
    """

    async def beat() -> None:
        # The first beat comes after one interval: a quick search costs no heartbeat.
        while True:
            await asyncio.sleep(HEARTBEAT_INTERVAL_S)
            activity.heartbeat(progress.details())

    task = asyncio.create_task(beat()) if activity.in_activity() else None
    try:
        yield
    finally:
        # Not awaited: awaiting here could swallow a cancellation of the activity itself.
        if task is not None:
            task.cancel()
