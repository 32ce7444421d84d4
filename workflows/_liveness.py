"""Is anything serving a task queue? Asked only when a call was not picked up in time; and
what such a call reads (:func:`unserved`, the same words on every route).

A worker takes many more calls than it runs (the rest wait in it, heartbeating "queued"), so
a call that no worker picked up within the schedule-to-start timeout means, almost always,
that no worker serves the queue. To tell that from a worker that is merely full, the caller
then asks Temporal who polls the queue, once, through the local activity
:func:`queue_liveness` (registered by ``FsSearchPlugin`` on the caller's workers): a poller
seen within :data:`LIVE_S` means "busy, schedule the call again"; none means "missing".
The Nexus handler (for callers in other namespaces, which cannot ask) and one-off calls ask
the same question directly (:func:`liveness_of`).

Temporal records when each poll *started*, and a live idle worker re-polls at least once a
minute, so a worker that died without shutting down is listed for up to a minute more: its
queue reads as missing once its last poll is older than :data:`LIVE_S` (90 s, the worker's
queue-owner check's too). A queue nothing has
polled for that long (an unknown workspace, a worker stopped a while ago) is missing at the
first check. ``DescribeTaskQueue`` is rate-limited process-wide and its answer for a queue
reused for :data:`CACHE_S`, so many calls waiting on one dead queue cost one call to the
server every few seconds, not one per call.

Temporal's time-skipping test server has no ``DescribeTaskQueue``. Its workers, in a test,
run in the test's own process: :func:`fs_search.worker.testing.time_skipping_env` registers
its server here (:func:`pollers_here`) and counts the queues its workers poll
(:func:`polling_here`), and that count answers instead.
"""

from __future__ import annotations

import collections
import contextlib
import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta

from pydantic import BaseModel
from temporalio import activity
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from fs_search.activities import ErrorCode, ToolResult
from fs_search.workflows._task_queues import (
    DESCRIBES,
    LIVE_S,
    RateLimit,
    list_pollers,
    poll_ages,
)

QUEUE_LIVENESS_ACTIVITY = "fs_search.queue_liveness"
CACHE_S = 3.0


class QueueLiveness(BaseModel):
    """Who polls a task queue: ``polled`` True (a live poller), False (none), None (could
    not be asked: ``detail`` says why)."""

    queue: str
    polled: bool | None
    detail: str = ""


class Answers:
    """Answers kept :data:`CACHE_S` each, in two segments of bounded size: one for answers
    never read again (``size`` of them), one for answers read again (``protected``): the
    queue many waiting calls ask about. Expired answers go first, in the order they came,
    then each segment's least recently used. A flood of made-up queues, each asked once,
    only ever churns the first segment, so it never pushes out an answer in use (before,
    the whole cache was dropped whenever it passed 1,024 queues)."""

    def __init__(self, size: int = 1024, protected: int = 256, ttl: float = CACHE_S) -> None:
        self.ttl = ttl
        self._new: _Segment = _Segment(size)
        self._used: _Segment = _Segment(protected)

    def get(self, key: tuple[str, str], now: float) -> QueueLiveness | None:
        """The answer for ``key`` if still fresh at ``now``."""
        for segment in (self._used, self._new):
            found = segment.items.get(key)
            if found is None:
                continue
            if now - found[0] >= self.ttl:
                return None
            if segment is self._new:  # read again: in use
                del self._new.items[key]
                self._used.add(key, found, now, self.ttl)
            else:
                self._used.items.move_to_end(key)
            return found[1]
        return None

    def put(self, key: tuple[str, str], answer: QueueLiveness, now: float) -> None:
        """Keep ``answer`` for ``key`` from ``now``."""
        if key in self._used.items:
            self._used.add(key, (now, answer), now, self.ttl)
        else:
            self._new.add(key, (now, answer), now, self.ttl)

    def __len__(self) -> int:
        return len(self._new.items) + len(self._used.items)


class _Segment:
    def __init__(self, size: int) -> None:
        self.size = size
        self.items: collections.OrderedDict[tuple[str, str], tuple[float, QueueLiveness]] = (
            collections.OrderedDict()
        )

    def add(
        self, key: tuple[str, str], value: tuple[float, QueueLiveness], now: float, ttl: float
    ) -> None:
        items = self.items
        items.pop(key, None)
        items[key] = value
        while items and now - next(iter(items.values()))[0] >= ttl:
            items.popitem(last=False)
        while len(items) > self.size:
            items.popitem(last=False)


_CACHE = Answers()
# (server, namespace) -> how many of this process's workers poll each activity queue there,
# for servers registered by ``pollers_here``.
_HERE: dict[tuple[str, str], Counter[str]] = {}


@contextlib.contextmanager
def pollers_here(server: str, namespace: str) -> Iterator[None]:
    """While open, queue checks on ``server`` that cannot ask it (no ``DescribeTaskQueue``)
    are answered by the workers of this process (counted by :func:`polling_here`)."""
    key = (server, namespace)
    _HERE[key] = Counter()
    try:
        yield
    finally:
        _HERE.pop(key, None)


@contextlib.contextmanager
def polling_here(server: str, namespace: str, queue: str) -> Iterator[None]:
    """A worker of this process polls the activity queue ``queue`` while open."""
    counts = _HERE.get((server, namespace))
    if counts is None:
        yield
        return
    counts[queue] += 1
    try:
        yield
    finally:
        counts[queue] -= 1


def _answered_here(key: tuple[str, str], queue: str, error: Exception) -> QueueLiveness | None:
    """The answer of this process's workers, for a registered server that cannot list
    pollers; None otherwise."""
    counts = _HERE.get(key)
    unlisted = isinstance(error, RPCError) and error.status == RPCStatusCode.UNIMPLEMENTED
    if counts is None or not unlisted:
        return None
    if counts[queue] > 0:
        return QueueLiveness(queue=queue, polled=True, detail="a worker of this process polls it")
    return QueueLiveness(
        queue=queue,
        polled=False,
        detail="no worker of this test process polls it; the test server lists no pollers",
    )


@activity.defn(name=QUEUE_LIVENESS_ACTIVITY)
async def queue_liveness(queue: str) -> QueueLiveness:
    """Whether a live worker polls the activity task queue ``queue`` (never raises)."""
    return await liveness_of(activity.client(), queue)


async def liveness_of(client: Client, queue: str) -> QueueLiveness:
    """Whether a live worker polls the activity task queue ``queue`` of ``client``'s
    namespace (never raises): what the local activity answers, and what one-off calls ask
    directly (waiting for the process-wide limiter)."""
    cached = _CACHE.get((client.namespace, queue), time.monotonic())
    if cached is not None:
        return cached
    await DESCRIBES.wait()
    return await _described(client, queue)


async def liveness_if_free(
    client: Client, queue: str, *, budget: RateLimit | None = None
) -> QueueLiveness | None:
    """:func:`liveness_of` without waiting: a cached answer, or one asked now when the
    process-wide limiter (and ``budget``, say the caller's own share of it) has a slot free
    at once; None otherwise. The Nexus handler asks this way: a check never holds one of
    its slots asleep, and a waiter of the limiter (the fleet's attach check) goes first."""
    cached = _CACHE.get((client.namespace, queue), time.monotonic())
    if cached is not None:
        return cached
    if budget is not None and not budget.try_take():
        return None
    if not DESCRIBES.try_take():
        if budget is not None:
            budget.give_back()
        return None
    return await _described(client, queue)


async def _described(client: Client, queue: str) -> QueueLiveness:
    """Who polls ``queue`` (a limiter's slot taken), the answer kept a few seconds."""
    key = (client.namespace, queue)
    try:
        pollers = await list_pollers(client, queue)
    except Exception as e:  # noqa: BLE001 - any failure: not known
        server = (client.service_client.config.target_host, client.namespace)
        here = _answered_here(server, queue, e)
        if here is not None:
            return here
        return QueueLiveness(queue=queue, polled=None, detail=f"{type(e).__name__}: {e}")
    ages = poll_ages(pollers, time.time())
    live = [age for age in ages if age <= LIVE_S]
    if live:
        answer = QueueLiveness(
            queue=queue, polled=True, detail=f"last polled {min(live):.0f} s ago"
        )
    elif ages:
        answer = QueueLiveness(
            queue=queue, polled=False, detail=f"last polled {min(ages):.0f} s ago"
        )
    else:
        answer = QueueLiveness(queue=queue, polled=False, detail="never polled recently")
    _CACHE.put(key, answer, time.monotonic())
    return answer


def unserved(
    liveness: QueueLiveness,
    *,
    workspace_id: str,
    host: str | None,
    took: timedelta,
    queue_timeout: timedelta,
) -> ToolResult:
    """The ``Error:`` result of a call no worker took within ``took``: SEARCH_ABORTED when
    a worker polls the queue (busy for the whole ``queue_timeout``), else SEARCH_FAILED
    naming the workspace (the activity route, one-off calls and the Nexus handler alike)."""
    who = f"workspace {workspace_id!r}"
    if host is not None:
        who += f" on host {host!r}"
    queue = liveness.queue
    if liveness.polled:
        return ToolResult.failure(
            ErrorCode.SEARCH_ABORTED,
            f"the worker of {who} stayed busy for the whole queueing budget "
            f"({_seconds(queue_timeout)}) and the call did not run; try again later",
        )
    if liveness.polled is None:
        return ToolResult.failure(
            ErrorCode.SEARCH_FAILED,
            f"no fs-search worker took the call for {who} within {_seconds(took)} "
            f"(task queue {queue!r}), and whether one polls that queue could not be "
            f"checked ({liveness.detail}); is the worker for that workspace running?",
        )
    return ToolResult.failure(
        ErrorCode.SEARCH_FAILED,
        f"no fs-search worker is serving {who}: nothing polls its task queue "
        f"{queue!r} ({liveness.detail}); start the worker for that "
        f"{'host' if host is not None else 'workspace'}, or check the id",
    )


def _seconds(span: timedelta) -> str:
    seconds = span.total_seconds()
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min"
