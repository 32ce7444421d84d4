"""The queue checks' answers are kept a few seconds each, and a flood of made-up queues
cannot push a fresh answer out (issue 47, finding 6: the cache was dropped whenever it
passed 1,024 queues)."""

from __future__ import annotations

from fs_search.workflows._liveness import CACHE_S, Answers, QueueLiveness


def _answer(queue: str) -> QueueLiveness:
    return QueueLiveness(queue=queue, polled=False, detail="never polled recently")


def test_an_answer_in_use_survives_a_flood_of_made_up_queues():
    """An answer kept at 0 s and read again (calls waiting on that queue) is still there
    after 5,000 made-up queues' answers within its life, each asked once, and gone once it
    has expired; the made-up ones are kept at most ``size``."""
    real = ("ns", "fs-search/real")
    answers = Answers(size=1024, ttl=CACHE_S)
    answers.put(real, _answer("fs-search/real"), 0.0)
    assert answers.get(real, 0.1) is not None
    for i in range(5000):
        now = 0.1 + i * (CACHE_S - 0.5) / 5000
        answers.put(("ns", f"fs-search/made-up-{i}"), _answer(f"made-up-{i}"), now)
    assert answers.get(real, CACHE_S - 0.2) is not None
    assert len(answers) <= 1024 + 1
    assert answers.get(real, CACHE_S + 0.1) is None


def test_expired_answers_leave_as_new_ones_come():
    """Answers that have expired are dropped as new ones come, oldest first: the cache holds
    only about what the describe limiter let through in one life."""
    answers = Answers(size=1024, ttl=3.0)
    for i in range(600):
        answers.put(("ns", f"q{i}"), _answer(f"q{i}"), i * 0.1)  # 10 a second
    assert len(answers) <= 31
    assert answers.get(("ns", "q599"), 59.9) is not None
    assert answers.get(("ns", "q0"), 59.9) is None
