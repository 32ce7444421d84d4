"""Shared by the agent-framework tests: rg's process group, what a workflow scheduled, what
every framework's grep turn must show, and how a workflow fails for an unserved workspace."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError, CancelledError

from tests.procs import alive, group, wait_for_rg


async def gone_within(pgid: int, timeout: float) -> float:
    """Seconds until no process of group ``pgid`` is left, polling without blocking the loop
    (the worker that kills rg runs in it); AssertionError after ``timeout``."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if not alive(group(pgid)):
            return time.monotonic() - start
        await asyncio.sleep(0.05)
    raise AssertionError(f"rg's process group {pgid} still alive after {timeout} s")


def assert_unserved(error: WorkflowFailureError, wsid: str) -> None:
    """The workflow failed with the adapter kit's non-retryable SEARCH_FAILED naming the
    workspace no worker serves."""
    cause = error.cause
    assert isinstance(cause, ApplicationError), repr(cause)
    assert cause.type == "SEARCH_FAILED" and cause.non_retryable
    assert f"no fs-search worker is serving workspace {wsid!r}" in cause.message, cause.message


async def scheduled_activities(handle: WorkflowHandle[Any, Any]) -> list[tuple[str, str]]:
    """(activity type, task queue) of every activity a workflow scheduled, in order."""
    return [
        (
            e.activity_task_scheduled_event_attributes.activity_type.name,
            e.activity_task_scheduled_event_attributes.task_queue.name,
        )
        async for e in handle.fetch_history_events()
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]


def assert_grep_turn(out: Any, scheduled: list[tuple[str, str]], queue: str) -> None:
    """One framework's grep turn: our text back, the searches our activities on ``queue``
    only (no framework tool activity), and an invalid regex and an unknown argument as
    ``Error:`` text."""
    assert out.tool_outputs[0] == "a.py:\n  Line 1: needle = 1"
    assert [a for a in scheduled if a[0].startswith("fs_search.")] == [
        ("fs_search.tools", queue),
        ("fs_search.grep", queue),
        ("fs_search.grep", queue),
    ]  # the third grep was refused before scheduling
    assert not [a for a in scheduled if "tool" in a[0] and a[0] != "fs_search.tools"]
    assert out.tool_outputs[1].startswith("Error: ") and "regex" in out.tool_outputs[1]
    # An argument outside the schema is refused by FsSearchTools, as Error: text too.
    assert out.tool_outputs[2].startswith("Error: ") and "cwd" in out.tool_outputs[2]
    assert [t["name"] for t in out.tools] == ["glob", "grep"]


async def cancel_while_rg_runs(
    handle: WorkflowHandle[Any, Any], acts: Any
) -> list[EventType.ValueType]:
    """Cancel a run while its grep's rg runs: the run fails with the cancellation (the tool
    re-raised ``CancelledError``; bounded, so a swallowed one fails rather than hangs), rg's
    group is gone within 1 s (FsSearchTools waits for the search's cancellation), and the
    workflow closes cancelled. Returns the history's event types."""
    pgid = await wait_for_rg(acts)
    assert alive(group(pgid))
    await handle.cancel()
    with pytest.raises(WorkflowFailureError) as info:
        await asyncio.wait_for(handle.result(), 60)
    assert isinstance(info.value.cause, CancelledError)
    await gone_within(pgid, timeout=1)
    events = [e.event_type async for e in handle.fetch_history_events()]
    assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED in events
    return events


__all__ = [
    "assert_grep_turn",
    "cancel_while_rg_runs",
    "gone_within",
    "scheduled_activities",
    "wait_for_rg",
]
