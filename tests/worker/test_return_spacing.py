"""ReturnSpacing (pure): a workspace's handed-back calls are told to come back one after
another, as often as its calls end, between the first and the longest pause."""

from __future__ import annotations

import pytest

from fs_search.activities._attempts import HAND_BACKS_ON_SERVER, retried_by_server
from fs_search.worker._return_spacing import ReturnSpacing


def test_a_burst_is_spaced_not_sent_back_at_once():
    spacing = ReturnSpacing(first=1.0, longest=30.0, initial=0.2)
    pauses = [spacing.pause("flood", 100.0) for _ in range(10)]
    assert pauses == pytest.approx([1.0 + 0.2 * i for i in range(10)])


def test_the_spacing_follows_how_often_the_workspace_calls_end():
    spacing = ReturnSpacing(first=1.0, longest=30.0, fastest=0.05, slowest=0.5, initial=0.2)
    spacing.pause("flood", 0.0)  # handed back: its calls' ends are followed from now
    for i in range(40):  # a call ends every 0.4 s
        spacing.ended("flood", 0.4 * i)
    now = 16.0
    first, second = spacing.pause("flood", now), spacing.pause("flood", now)
    assert second - first == pytest.approx(0.4, abs=0.01)
    # Ends faster or slower than the bounds are taken at the bounds.
    for i in range(40):
        spacing.ended("flood", 20.0 + 0.001 * i)
    first, second = spacing.pause("flood", 20.1), spacing.pause("flood", 20.1)
    assert second - first == pytest.approx(0.05, abs=0.01)


def test_a_pause_is_never_shorter_than_the_first_and_never_longer_than_the_longest():
    spacing = ReturnSpacing(first=1.0, longest=30.0, initial=0.5)
    pauses = [spacing.pause("flood", 0.0) for _ in range(500)]
    assert min(pauses) == pytest.approx(1.0)
    assert max(pauses) <= 30.0
    # Beyond what the longest pause spaces, calls come back spread over the pauses, not all
    # at the longest.
    beyond = pauses[60:]
    assert len({round(p, 3) for p in beyond}) == len(beyond)
    assert sum(p > 20 for p in beyond) < len(beyond) / 2


def test_the_next_free_time_moves_with_the_clock():
    """A workspace whose spaced calls have all come back gets the first pause again."""
    spacing = ReturnSpacing(first=1.0, longest=30.0, initial=0.2)
    for _ in range(20):
        spacing.pause("flood", 0.0)
    assert spacing.pause("flood", 60.0) == pytest.approx(1.0)


def test_workspaces_are_spaced_apart_and_forgotten():
    spacing = ReturnSpacing(first=1.0, longest=30.0, initial=0.2)
    for _ in range(5):
        spacing.pause("a", 0.0)
    assert spacing.pause("b", 0.0) == pytest.approx(1.0)  # another's burst is not b's
    assert len(spacing) == 2
    spacing.forget("a")
    spacing.ended("a", 1.0)  # a workspace not handed back keeps nothing
    assert len(spacing) == 1
    assert spacing.pause("a", 0.0) == pytest.approx(1.0)


def test_the_server_brings_a_call_back_on_its_first_hand_backs_only():
    """Attempts before HAND_BACKS_ON_SERVER are retried by the server (no workflow task, no
    timer); from it on, the caller takes the call back (its budget, its lowest priority)."""

    def by_server(attempt: int) -> bool:
        return retried_by_server(attempt=attempt, pause_s=2.0, queue_left_s=60.0, close_left_s=None)

    assert HAND_BACKS_ON_SERVER == 3
    assert [by_server(a) for a in (1, 2, 3, 4, 10)] == [True, True, False, False, False]


@pytest.mark.parametrize(
    ("pause_s", "queue_left_s", "close_left_s", "expected"),
    [
        (2.0, None, None, True),  # nothing bounds the call
        (2.0, 2.0, None, True),  # the pause just fits in the queueing budget
        (2.5, 2.0, None, False),  # it would run past it: the caller ends it to the letter
        (2.0, -1.0, None, False),  # the budget is spent already (or unknown to this host)
        (2.0, 60.0, 1.0, False),  # no room for another attempt before schedule-to-close
        (2.0, 60.0, 30.0, True),
    ],
)
def test_a_pause_past_the_calls_budget_goes_back_to_the_caller(
    pause_s, queue_left_s, close_left_s, expected
):
    assert (
        retried_by_server(
            attempt=1, pause_s=pause_s, queue_left_s=queue_left_s, close_left_s=close_left_s
        )
        is expected
    )
