"""The fs_search handler's shares between caller namespaces, and the describe limiter's slots
(issue 47, finding 3): pure parts, no server."""

from __future__ import annotations

import asyncio
import logging
import time

import nexusrpc
import pytest

from fs_search.worker._caller_share import STARTS_BURST, CallerShare, caller_of
from fs_search.worker._own_operations import NotOurs, own_activity
from fs_search.worker._queue_owner import RateLimit
from fs_search.worker._quiet_failures import ThinRepeats


def _link(url: str) -> nexusrpc.Link:
    return nexusrpc.Link(url=url, type="temporal.api.common.v1.Link.WorkflowEvent")


def test_the_caller_is_the_namespace_of_its_workflow_link():
    """The caller namespace comes from the link to the calling workflow's event; no link (a
    request to the HTTP API itself) is the caller ""."""
    url = "temporal:///namespaces/team%2Da/workflows/w/r/history?eventID=5&eventType=x"
    assert caller_of([_link(url)]) == "team-a"
    assert caller_of([_link("https://example.invalid/x"), _link(url)]) == "team-a"
    assert caller_of([]) == ""


def test_a_caller_beyond_its_share_is_refused_and_a_newcomer_always_gets_in():
    """Alone a caller may hold all but the reserve; a second caller is admitted while the
    first holds its whole share; beyond its share, RESOURCE_EXHAUSTED (retryable)."""
    share = CallerShare(slots=8, reserve=2)
    held = []
    for _ in range(6):
        cm = share.admitted("flood")
        cm.__enter__()
        held.append(cm)
    with pytest.raises(nexusrpc.HandlerError) as refused, share.admitted("flood"):
        pass
    assert refused.value.type == nexusrpc.HandlerErrorType.RESOURCE_EXHAUSTED
    assert refused.value.retryable
    with share.admitted("quiet"):
        assert share.held("quiet") == 1 and share.share("quiet") == 3
    for cm in held:
        cm.__exit__(None, None, None)
    assert share.held("flood") == 0


def test_a_caller_starts_at_most_its_rate():
    """Past its burst, a caller's starts are refused until its budget refills; another
    caller's are not."""
    share = CallerShare(slots=1000)
    started = 0
    with pytest.raises(nexusrpc.HandlerError):  # noqa: PT012 - counts, then the refusal
        for _ in range(STARTS_BURST * 3):
            with share.admitted("flood"):
                started += 1
    assert STARTS_BURST <= started <= STARTS_BURST + 2
    with share.admitted("quiet"):
        pass


def test_a_check_budget_is_per_caller():
    """Each caller has its own budget of queue checks."""
    share = CallerShare()
    flood, quiet = share.checks("flood"), share.checks("quiet")
    while flood.try_take():
        pass
    assert quiet.try_take()
    assert share.checks("flood") is flood


async def test_a_waiter_that_gives_up_gives_its_slot_back():
    """A reservation whose waiter is cancelled is returned: the next caller waits no longer
    for it (before, every cancelled waiter pushed every later one back an interval)."""
    limit = RateLimit(per_second=10.0, burst=1)
    assert limit.try_take()
    waiters = [asyncio.ensure_future(limit.wait()) for _ in range(20)]
    await asyncio.sleep(0.05)
    for waiter in waiters:
        waiter.cancel()
    await asyncio.gather(*waiters, return_exceptions=True)
    started = time.monotonic()
    await limit.wait()
    assert time.monotonic() - started < 0.5


def test_try_take_never_jumps_ahead_of_a_waiter():
    """A slot is taken without waiting only when nobody has reserved ahead."""
    limit = RateLimit(per_second=10.0, burst=2)
    assert limit.try_take() and limit.try_take()
    assert not limit.try_take()
    assert limit.reserve() > 0
    assert not limit.try_take()


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"t": 1, "ns": "search", "wid": "w"}, "not an activity's"),
        ({"t": 2, "ns": "other", "aid": "fs-search-grep-1", "rid": "r"}, "another namespace"),
        ({"t": 2, "ns": "search", "aid": "fs-search-glob-1", "rid": "r"}, "not one this service"),
        ({"t": 2, "ns": "search", "aid": "fs-search-grep-", "rid": "r"}, "not one this service"),
        ({"t": 2, "ns": "search", "aid": "fs-search-grep-1"}, "no run"),
    ],
)
def test_a_cancel_token_must_name_an_activity_of_its_operation(fields, why):
    """Pure: only an activity token of the handler's namespace, with the operation's id
    scheme and a run, could be the service's own."""
    import base64
    import json

    token = base64.urlsafe_b64encode(json.dumps(fields).encode()).decode().rstrip("=")
    with pytest.raises(NotOurs, match=why):
        own_activity(token, operation="grep", namespace="search")
    ok = {"t": 2, "ns": "search", "aid": "fs-search-grep-abc", "rid": "r"}
    token = base64.urlsafe_b64encode(json.dumps(ok).encode()).decode().rstrip("=")
    assert own_activity(token, operation="grep", namespace="search").activity_id.endswith("abc")


def test_repeated_sdk_warnings_are_thinned():
    """One record per message every 10 s, the next saying how many were held back."""
    now = [0.0]
    thin = ThinRepeats(every_s=10.0, clock=lambda: now[0])

    def record() -> logging.LogRecord:
        return logging.LogRecord("x", logging.WARNING, __file__, 1, "refused", None, None)

    assert thin.filter(record())
    assert not any(thin.filter(record()) for _ in range(50))
    now[0] = 11.0
    later = record()
    assert thin.filter(later) and "50 more like it" in later.getMessage()
