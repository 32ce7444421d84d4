"""Shared by the agent-framework tests: rg's process group, and what a workflow scheduled."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle

from fs_search.activities.search import SearchActivities
from tests.procs import alive, group


async def wait_for_rg(activities: SearchActivities, timeout: float = 15.0) -> int:
    """The process group of the first rg the activities start (AssertionError if none does)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        groups = activities.executor.live_process_groups
        if groups:
            return groups[0]
        await asyncio.sleep(0.02)
    raise AssertionError("rg never started")


async def gone_within(pgid: int, timeout: float) -> float:
    """Seconds until no process of group ``pgid`` is left, polling without blocking the loop
    (the worker that kills rg runs in it); AssertionError after ``timeout``."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if not alive(group(pgid)):
            return time.monotonic() - start
        await asyncio.sleep(0.05)
    raise AssertionError(f"rg's process group {pgid} still alive after {timeout} s")


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
