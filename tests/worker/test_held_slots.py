"""HeldSlots: the process-wide and per-workspace caps, first come first served, no leaks."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from fs_search.worker._held_slots import HeldSlots, QueuePermit


@dataclass
class Reserve:
    task_queue: str
    slot_type: str = "activity"
    worker_identity: str = "test"
    worker_build_id: str = ""
    worker_deployment_version: None = None
    is_sticky: bool = False


@dataclass
class Used:
    permit: QueuePermit
    slot_info: object = None


@dataclass
class Release:
    permit: QueuePermit
    slot_info: object = None


async def _reserve(slots: HeldSlots, queue: str) -> QueuePermit:
    permit = await asyncio.wait_for(slots.reserve_slot(Reserve(queue)), 1)  # type: ignore[arg-type]
    assert isinstance(permit, QueuePermit)
    return permit


async def _pending(slots: HeldSlots, queue: str) -> asyncio.Task:
    task = asyncio.create_task(slots.reserve_slot(Reserve(queue)))  # type: ignore[arg-type]
    await asyncio.sleep(0.01)
    return task


async def test_a_workspace_holds_at_most_its_share():
    slots = HeldSlots(total=10, per_workspace=2)
    await _reserve(slots, "a")
    first = await _reserve(slots, "a")
    blocked = await _pending(slots, "a")
    assert not blocked.done() and slots.held("a") == 2
    other = await _reserve(slots, "b")  # another workspace is not held up
    assert other.queue == "b"
    slots.release_slot(Release(first))  # type: ignore[arg-type]
    granted = await asyncio.wait_for(blocked, 1)
    assert granted.queue == "a" and slots.held("a") == 2


async def test_no_poll_starts_while_every_slot_runs():
    slots = HeldSlots(total=2, per_workspace=4)
    running = [await _reserve(slots, q) for q in ("a", "b")]
    for permit in running:
        slots.mark_slot_used(Used(permit))  # type: ignore[arg-type]
    assert slots.running == 2
    waiting = [await _pending(slots, q) for q in ("c", "d")]
    assert not any(t.done() for t in waiting)
    assert slots.try_reserve_slot(Reserve("e")) is None  # type: ignore[arg-type]
    slots.release_slot(Release(running[0]))  # type: ignore[arg-type]
    await asyncio.sleep(0.01)
    assert all(t.done() for t in waiting)  # reserving (polling) is not running
    assert slots.running == 1


async def test_waiters_are_served_in_arrival_order():
    slots = HeldSlots(total=1, per_workspace=1)
    first = await _reserve(slots, "a")
    slots.mark_slot_used(Used(first))  # type: ignore[arg-type]
    order: list[str] = []

    async def wait(queue: str) -> None:
        permit = await slots.reserve_slot(Reserve(queue))  # type: ignore[arg-type]
        order.append(queue)
        slots.mark_slot_used(Used(permit))  # type: ignore[arg-type]
        await asyncio.sleep(0.01)
        slots.release_slot(Release(permit))  # type: ignore[arg-type]

    tasks = [asyncio.create_task(wait(q)) for q in ("b", "c", "d")]
    await asyncio.sleep(0.01)
    slots.release_slot(Release(first))  # type: ignore[arg-type]
    await asyncio.wait_for(asyncio.gather(*tasks), 2)
    assert order == ["b", "c", "d"]


async def test_a_cancelled_waiter_leaves_no_slot_behind():
    slots = HeldSlots(total=4, per_workspace=1)
    held = await _reserve(slots, "a")
    waiter = await _pending(slots, "a")
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    slots.release_slot(Release(held))  # type: ignore[arg-type]
    assert slots.held("a") == 0 and slots.running == 0
    again = await _reserve(slots, "a")
    assert again.queue == "a"


async def test_an_empty_poll_gives_its_slot_back():
    slots = HeldSlots(total=1, per_workspace=1)
    permit = await _reserve(slots, "a")
    slots.release_slot(Release(permit))  # type: ignore[arg-type]
    assert slots.held("a") == 0 and slots.running == 0
    assert slots.try_reserve_slot(Reserve("a")) is not None  # type: ignore[arg-type]
