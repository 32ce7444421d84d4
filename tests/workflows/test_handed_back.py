"""A call a host queue hands back (WORKSPACE_BUSY: its workspace holds its share of the host)
and the server does not retry comes back to the caller, which schedules it again after the
pause the host asks, at the lowest priority, behind every other workspace's new calls (the
flood through the queue is tests/worker/test_fleet_hostile.py)."""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy

from fs_search.activities._attempts import (
    HANDED_BACK_PAUSE,
    HANDED_BACK_PRIORITY,
    MAX_HANDED_BACK_PAUSE,
    MIN_HANDED_BACK_PAUSE,
    pause_after_hand_back,
    with_contract_codes,
)
from fs_search.activities._contract import WORKSPACE_BUSY, ErrorCode, fairness_key_for
from fs_search.workflows import FsSearchTools


def test_the_host_decides_whether_the_server_retries_a_hand_back():
    """The caller's own retry policy gains the contract codes as non-retryable, not
    WORKSPACE_BUSY: the host marks each hand-back retryable (the server brings the call back)
    or not (the caller does), see tests/worker/test_return_spacing.py."""
    merged = with_contract_codes(RetryPolicy(maximum_attempts=7))
    assert WORKSPACE_BUSY not in merged.non_retryable_error_types
    assert ErrorCode.SEARCH_FAILED.value in merged.non_retryable_error_types
    assert merged.maximum_attempts == 7


def test_a_host_routed_call_handed_back_goes_behind_new_calls():
    tools = FsSearchTools("ws-1", host="host-a")
    first = tools.activity_config()["priority"]
    again = tools.activity_config(handed_back=True)["priority"]
    assert first.priority_key is None  # the workflow's own priority
    assert again.priority_key == HANDED_BACK_PRIORITY == 5
    assert first.fairness_key == again.fairness_key == fairness_key_for("ws-1")


def test_a_workspace_queue_call_carries_no_priority():
    """Only a host queue hands calls back; a workspace's own queue call keeps the workflow's
    priority untouched."""
    assert "priority" not in FsSearchTools("ws-1").activity_config(handed_back=True)


def test_a_handed_back_call_waits_the_pause_its_host_asks_within_bounds():
    """The host spaces a workspace's handed-back calls (worker/_return_spacing.py): the
    caller waits what it asks, within bounds and what is left of the queueing budget."""
    budget = timedelta(minutes=5)
    second = timedelta(seconds=1)
    assert pause_after_hand_back(budget, second, timedelta(seconds=7)) == timedelta(seconds=7)
    assert pause_after_hand_back(budget, second) == HANDED_BACK_PAUSE  # a host asking none
    assert pause_after_hand_back(budget, second, timedelta(0)) == MIN_HANDED_BACK_PAUSE
    assert pause_after_hand_back(budget, second, timedelta(days=1)) == MAX_HANDED_BACK_PAUSE
    assert pause_after_hand_back(budget, budget - second, timedelta(seconds=7)) == second
    assert pause_after_hand_back(budget, budget, timedelta(seconds=7)) is None
