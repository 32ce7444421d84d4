"""Progress and the heartbeat timer: what a running call reports, and when."""

from __future__ import annotations

import asyncio
import time

import pytest
from temporalio.testing import ActivityEnvironment

from fs_search.activities._progress import HEARTBEAT_INTERVAL_S, Progress, heartbeating

INTERVAL = 0.05


def test_details_are_phase_raw_bytes_elapsed_and_rg_time_against_the_budget():
    """Heartbeat details carry the phase, the raw bytes read, the ms since the start, and
    the ms rg has run against the call's budget."""
    now = time.monotonic()
    progress = Progress(
        phase="rg", raw_bytes=42, started=now - 1.5, budget_ms=30_000, rg_started=now - 1.0
    )
    details = progress.details()
    assert set(details) == {"phase", "raw_bytes", "elapsed_ms", "rg_ms", "budget_ms"}
    assert details["phase"] == "rg" and details["raw_bytes"] == 42
    assert 1500 <= details["elapsed_ms"] < 3000
    assert 1000 <= details["rg_ms"] < 2500 and details["budget_ms"] == 30_000


def test_rg_time_never_exceeds_the_elapsed_time(monkeypatch):
    """Both durations end at one reading of the clock: a heartbeat held up between them (a
    busy machine) cannot report rg running longer than the call."""
    readings = iter([10.0, 10.2, 10.4])  # a clock read 200 ms apart each time
    monkeypatch.setattr(time, "monotonic", lambda: next(readings))
    progress = Progress(phase="rg", started=9.0, rg_started=9.0, budget_ms=30_000)
    details = progress.details()
    assert details["elapsed_ms"] == details["rg_ms"] == 1000


def test_before_rg_starts_its_time_is_zero():
    """A call still checking or queued reports rg_ms 0 (and no budget until it is known)."""
    details = Progress(phase="queued").details()
    assert details["rg_ms"] == 0 and details["budget_ms"] is None


def test_the_interval_meets_the_contract():
    """The activity heartbeats at least every 0.25 s (the contract's heartbeat interval)."""
    assert HEARTBEAT_INTERVAL_S <= 0.25


async def test_heartbeats_follow_the_progress_while_the_body_runs():
    """The timer reports the live phase and bytes; beats stop when the body ends."""
    beats: list[dict] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(details[0])

    async def body() -> None:
        progress = Progress(phase="checks")
        async with heartbeating(progress, interval_s=INTERVAL):
            await asyncio.sleep(INTERVAL * 3.5)
            progress.phase, progress.raw_bytes = "rg", 1000
            await asyncio.sleep(INTERVAL * 3.5)

    await env.run(body)
    phases = [b["phase"] for b in beats]
    assert phases[0] == "checks" and phases[-1] == "rg" and sorted(phases) == phases
    assert [b["raw_bytes"] for b in beats if b["phase"] == "rg"][-1] == 1000
    elapsed = [b["elapsed_ms"] for b in beats]
    assert elapsed == sorted(elapsed) and 4 <= len(beats) <= 8
    count = len(beats)
    await asyncio.sleep(INTERVAL * 4)
    assert len(beats) == count


async def test_a_quick_body_sends_no_heartbeat():
    """The first beat waits one interval: a body shorter than that costs none."""
    beats: list = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(details)

    async def body() -> None:
        async with heartbeating(Progress(), interval_s=1.0):
            await asyncio.sleep(0.01)

    await env.run(body)
    assert beats == []


async def test_a_body_that_finds_nothing_still_heartbeats():
    """A timer drives the beats, not output: a silent body is heartbeated all the same."""
    beats: list = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(details)

    async def body() -> None:
        progress = Progress(phase="rg")
        async with heartbeating(progress, interval_s=INTERVAL):
            await asyncio.sleep(INTERVAL * 3.5)

    await env.run(body)
    assert len(beats) >= 2


async def test_outside_an_activity_it_does_nothing():
    """Used outside an activity (direct calls, tests), heartbeating is a no-op: it starts no
    heartbeat task (which would call activity.heartbeat outside an activity and fail)."""
    before = asyncio.all_tasks()
    async with heartbeating(Progress(), interval_s=INTERVAL):
        started = asyncio.all_tasks() - before
        await asyncio.sleep(INTERVAL * 2)
    assert started == set()


async def test_an_error_in_the_body_propagates_and_stops_the_beats():
    """The body's exception leaves unchanged and no beat follows it."""
    beats: list = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(details)

    async def body() -> None:
        async with heartbeating(Progress(), interval_s=INTERVAL):
            await asyncio.sleep(INTERVAL * 1.5)
            raise KeyError("boom")

    with pytest.raises(KeyError):
        await env.run(body)
    count = len(beats)
    await asyncio.sleep(INTERVAL * 3)
    assert count >= 1 and len(beats) == count
