"""The attempt's deadline arithmetic, and saves that keep to it."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from fs_search.activities.contract import GlobRequest
from fs_search.activities.storage._attempt import keep_budget, storing_payload
from fs_search.activities.storage._deadline import (
    SAVE_FLOOR_S,
    SAVE_MARGIN_S,
    remaining_s,
    window_s,
)
from fs_search.activities.storage._saving import NO_TIME_TO_SAVE, SPILL_TIMEOUT_S
from tests.helpers import write_tree

NOW = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)


def _left(
    *,
    started_ago: float,
    start_to_close: float | None,
    scheduled_ago: float | None = None,
    schedule_to_close: float | None = None,
) -> float | None:
    return remaining_s(
        NOW,
        started=NOW - timedelta(seconds=started_ago),
        start_to_close=None if start_to_close is None else timedelta(seconds=start_to_close),
        scheduled=NOW - timedelta(seconds=started_ago if scheduled_ago is None else scheduled_ago),
        schedule_to_close=(
            None if schedule_to_close is None else timedelta(seconds=schedule_to_close)
        ),
    )


def test_start_to_close_counts_from_this_attempts_start():
    assert _left(started_ago=2.5, start_to_close=7) == pytest.approx(4.5)


def test_schedule_to_close_bounds_it_when_earlier():
    """The first attempt was scheduled long ago: schedule-to-close ends the attempt first."""
    left = _left(started_ago=1, start_to_close=60, scheduled_ago=100, schedule_to_close=103)
    assert left == pytest.approx(3)
    left = _left(started_ago=1, start_to_close=5, scheduled_ago=100, schedule_to_close=400)
    assert left == pytest.approx(4)


def test_no_timeout_no_deadline():
    assert _left(started_ago=3, start_to_close=None) is None


def test_a_start_ahead_of_the_workers_clock_counts_from_now():
    """The server's clock is a little ahead of the worker's: the whole timeout is left."""
    assert _left(started_ago=-0.3, start_to_close=7) == pytest.approx(7)


def test_a_start_before_the_whole_timeout_says_nothing():
    """Past the deadline already: a lost attempt or clocks that disagree (ActivityEnvironment
    starts its attempts in 1970); the bound is ignored, never every save cancelled."""
    assert _left(started_ago=8, start_to_close=7) is None
    assert _left(started_ago=7, start_to_close=7) is None
    assert _left(started_ago=1, start_to_close=7, scheduled_ago=50, schedule_to_close=10) == 6
    info = ActivityEnvironment.default_info()
    assert (
        remaining_s(
            datetime.now(UTC),
            started=info.started_time,
            start_to_close=info.start_to_close_timeout,
            scheduled=info.scheduled_time,
            schedule_to_close=info.schedule_to_close_timeout,
        )
        is None
    )


def test_window_keeps_the_margin_and_the_cap():
    assert window_s(None, cap_s=15, margin_s=2) == 15
    assert window_s(60, cap_s=15, margin_s=2) == 15
    assert window_s(4.5, cap_s=15, margin_s=2) == pytest.approx(2.5)
    assert window_s(1.5, cap_s=15, margin_s=2) <= 0


@pytest.mark.parametrize("timeout_ms", [1000, 2000, 5000, 10_000, 30_000])
def test_every_budget_of_a_second_or_more_leaves_time_to_spill_and_return(timeout_ms):
    """start-to-close = budget + 5 s (FsSearchTools' tightest): a search that used its whole
    budget still gets a spill window, and the window ends SAVE_MARGIN_S before the deadline."""
    start_to_close = timeout_ms / 1000 + 5
    left = _left(started_ago=timeout_ms / 1000, start_to_close=start_to_close)
    assert left is not None
    window = window_s(left, cap_s=SPILL_TIMEOUT_S, margin_s=SAVE_MARGIN_S)
    assert 0 < window <= left - SAVE_MARGIN_S


async def test_a_spill_with_no_time_left_is_not_tried(tmp_path: Path, make_activities):
    """0.5 s left of the attempt: the page comes back at once, saying why it was not saved,
    and nothing is written to the store."""
    ws = write_tree(tmp_path / "ws", {f"f{i:02}.txt": "" for i in range(12)})
    acts = await make_activities(ws, glob_max_results=3)
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info,
        started_time=datetime.now(UTC) - timedelta(seconds=5.5),
        start_to_close_timeout=timedelta(seconds=6),
        scheduled_time=datetime.now(UTC) - timedelta(seconds=5.5),
        schedule_to_close_timeout=None,
    )
    r = await env.run(acts.glob, GlobRequest(pattern="*.txt"))
    assert r.spill is None and r.spill_error == NO_TIME_TO_SAVE and len(r.paths) == 3
    assert NO_TIME_TO_SAVE in r.text
    assert not list(acts.store.directory.rglob("*.txt"))


def test_a_save_takes_what_the_calls_budget_has_left_but_at_least_the_floor():
    """The call's budget bounds a save (the attempt's deadline may be minutes away), never
    below SAVE_FLOOR_S; the attempt's deadline still wins when it is nearer."""
    assert window_s(300, cap_s=15, margin_s=2, budget_left_s=2.9) == pytest.approx(2.9)
    assert window_s(None, cap_s=15, margin_s=2, budget_left_s=0.2) == SAVE_FLOOR_S
    assert window_s(300, cap_s=15, margin_s=2, budget_left_s=-4) == SAVE_FLOOR_S
    assert window_s(300, cap_s=15, margin_s=2, budget_left_s=40) == 15
    assert window_s(2.5, cap_s=15, margin_s=2, budget_left_s=2.9) == pytest.approx(0.5)
    assert window_s(300, cap_s=math.inf, margin_s=0.5, budget_left_s=None) == 299.5


async def test_a_kept_budget_bounds_a_payload_upload():
    """A payload upload that hangs gives up when the kept budget (at least the floor) runs
    out, as the contract's SEARCH_FAILED, not at the attempt's deadline."""

    async def upload() -> str:
        keep_budget(time.monotonic() + 0.3)  # what the activity keeps once rg has run

        async def hang() -> str:
            await asyncio.sleep(60)
            return "stored"

        return await storing_payload(hang, size=1_000_000, where="a store")

    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info,
        started_time=datetime.now(UTC),
        start_to_close_timeout=timedelta(minutes=5),
        scheduled_time=datetime.now(UTC),
        schedule_to_close_timeout=None,
    )
    started = time.monotonic()
    with pytest.raises(ApplicationError, match="did not answer in time"):
        await env.run(upload)
    assert SAVE_FLOOR_S - 0.1 <= time.monotonic() - started < SAVE_FLOOR_S + 3
