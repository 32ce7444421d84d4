"""RunningSlots: the running-search slots a worker shares between workspaces, round-robin."""

from __future__ import annotations

import asyncio

import pytest

from fs_search.activities.rg._running_slots import RunningSlots
from tests.oracles import running_for


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_flooding_workspace_waits_its_turn_behind_a_quiet_one() -> None:
    """A has 10 calls waiting; B's one call arriving later runs in the next free slot."""
    slots = RunningSlots(total=1)
    order: list[str] = []
    release = asyncio.Event()

    async def call(key: str, n: int) -> None:
        async with slots.slot(key):
            order.append(f"{key}{n}")
            await release.wait()

    first = asyncio.create_task(call("a", 0))
    await _settle()
    flood = [asyncio.create_task(call("a", n)) for n in range(1, 11)]
    await _settle()
    quiet = asyncio.create_task(call("b", 0))
    await _settle()
    assert slots.waiting("a") == 10 and slots.waiting("b") == 1 and order == ["a0"]
    release.set()
    await asyncio.gather(first, quiet, *flood)
    assert order[:3] == ["a0", "a1", "b0"], order  # b right after the next of a's turns
    assert order.index("b0") == 2 and slots.running == 0 and slots.waiting() == 0


async def test_keys_alternate_when_both_have_backlogs() -> None:
    slots = RunningSlots(total=1)
    order: list[str] = []

    async def call(key: str) -> None:
        async with slots.slot(key):
            order.append(key)
            await asyncio.sleep(0)

    hold = asyncio.Event()

    async def holder() -> None:
        async with slots.slot("x"):
            await hold.wait()

    h = asyncio.create_task(holder())
    await _settle()
    tasks = [asyncio.create_task(call("a")) for _ in range(3)]
    tasks += [asyncio.create_task(call("b")) for _ in range(3)]
    await _settle()
    hold.set()
    await asyncio.gather(h, *tasks)
    assert order == ["a", "b", "a", "b", "a", "b"]


async def test_one_key_never_runs_more_than_per_key() -> None:
    slots = RunningSlots(total=4, per_key=2)
    peak: dict[str, int] = {}
    go = asyncio.Event()

    async def call(key: str) -> None:
        async with slots.slot(key):
            peak[key] = max(peak.get(key, 0), running_for(slots, key))
            await go.wait()

    tasks = [asyncio.create_task(call("a")) for _ in range(6)]
    tasks.append(asyncio.create_task(call("b")))
    await _settle()
    assert slots.running == 3 and running_for(slots, "a") == 2 and running_for(slots, "b") == 1
    go.set()
    await asyncio.gather(*tasks)
    assert peak == {"a": 2, "b": 1} and slots.running == 0


async def test_a_cancelled_waiter_gives_up_its_place_and_nothing_leaks() -> None:
    slots = RunningSlots(total=1)
    go = asyncio.Event()
    ran: list[str] = []

    async def call(key: str) -> None:
        async with slots.slot(key):
            ran.append(key)
            await go.wait()

    holder = asyncio.create_task(call("a"))
    await _settle()
    gone = asyncio.create_task(call("b"))
    after = asyncio.create_task(call("c"))
    await _settle()
    gone.cancel()
    await _settle()
    go.set()
    await asyncio.gather(holder, after)
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert ran == ["a", "c"] and slots.running == 0 and slots.waiting() == 0


async def test_a_slot_granted_as_the_waiter_is_cancelled_is_passed_on() -> None:
    slots = RunningSlots(total=1)
    await slots.acquire("a")
    waiting = asyncio.create_task(slots.acquire("b"))
    then = asyncio.create_task(slots.acquire("c"))
    await _settle()
    slots.release("a")  # grants b's future ...
    waiting.cancel()  # ... which is cancelled before b runs
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await asyncio.wait_for(then, 5)  # c got the slot b never used
    assert slots.running == 1 and running_for(slots, "c") == 1
    slots.release("c")
    assert slots.running == 0
