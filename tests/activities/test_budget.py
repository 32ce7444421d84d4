"""The budget model: a call's budget, the reserve both sides keep, the attempt's deadline
arithmetic and the windows saves take of it, the margins around an attempt."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.testing import ActivityEnvironment

from fs_search.activities._budget import (
    DEFAULT_QUEUE_TIMEOUT,
    RESERVE,
    RETRY_MARGIN,
    SAVE_FLOOR_S,
    SAVE_MARGIN_S,
    SAVE_TIMEOUT_S,
    budget_s,
    drain_for,
    execution_timeout,
    queue_budget_s,
    remaining_s,
    schedule_to_close_for,
    start_to_close_for,
    window_s,
)

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
    window = window_s(left, cap_s=SAVE_TIMEOUT_S, margin_s=SAVE_MARGIN_S)
    assert 0 < window <= left - SAVE_MARGIN_S


def test_a_save_takes_what_the_calls_budget_has_left_but_at_least_the_floor():
    """The call's budget bounds a save (the attempt's deadline may be minutes away), never
    below SAVE_FLOOR_S; the attempt's deadline still wins when it is nearer."""
    assert window_s(300, cap_s=15, margin_s=2, budget_left_s=2.9) == pytest.approx(2.9)
    assert window_s(None, cap_s=15, margin_s=2, budget_left_s=0.2) == SAVE_FLOOR_S
    assert window_s(300, cap_s=15, margin_s=2, budget_left_s=-4) == SAVE_FLOOR_S
    assert window_s(300, cap_s=15, margin_s=2, budget_left_s=40) == 15
    assert window_s(2.5, cap_s=15, margin_s=2, budget_left_s=2.9) == pytest.approx(0.5)
    assert window_s(300, cap_s=math.inf, margin_s=0.5, budget_left_s=None) == 299.5


@pytest.mark.parametrize(
    ("timeout_ms", "expected"), [(None, 30.0), (500, 0.5), (30_000, 30.0), (90_000, 30.0)]
)
def test_budget_is_the_request_up_to_the_worker_cap(timeout_ms, expected):
    """No timeout_ms means the cap; a smaller one wins; a larger one is capped."""
    assert budget_s(timeout_ms, cap_ms=30_000) == expected


@pytest.mark.parametrize("queue_s", [0.0, 0.5, 8.0, 300.0])
@pytest.mark.parametrize("timeout_ms", [1000, 30_000])
def test_the_worker_gives_the_queue_what_the_caller_scheduled_for_it(queue_s, timeout_ms):
    """The caller's start-to-close (queue left + budget + reserve) read back by the worker at
    the attempt's start: the wait it allows for a running slot is the queue left."""
    start_to_close = start_to_close_for(timedelta(seconds=queue_s), timeout_ms)
    assert start_to_close == timedelta(seconds=queue_s, milliseconds=timeout_ms) + RESERVE
    left = start_to_close.total_seconds()
    assert queue_budget_s(left, timeout_ms / 1000) == pytest.approx(queue_s)
    assert queue_budget_s(None, timeout_ms / 1000) == 0.0
    assert queue_budget_s(1.0, timeout_ms / 1000) == 0.0


def test_the_margins_around_an_attempt():
    """A standalone activity closes a retry margin after its attempt; the CLI's one-call
    workflow after the default queueing budget, the budget and that margin; a detached
    workspace's calls drain within the budget and the reserve."""
    assert schedule_to_close_for(timedelta(seconds=40)) == timedelta(seconds=40) + RETRY_MARGIN
    assert execution_timeout(30_000) == DEFAULT_QUEUE_TIMEOUT + timedelta(seconds=30) + RETRY_MARGIN
    assert execution_timeout(30_000) == timedelta(minutes=6, seconds=30)
    assert drain_for(30_000) == timedelta(seconds=35)
