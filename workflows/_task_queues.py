"""Who polls a task queue: ``DescribeTaskQueue`` on every partition, rate-limited process-wide.

``DescribeTaskQueue`` counts against Temporal Cloud's visibility limit (30 calls/s per
namespace): nothing asks it once per search. A worker asks once per attach
(:mod:`fs_search.worker._queue_owner`), a caller only when a call was not picked up in time
(:mod:`fs_search.workflows._liveness`), and every such call of a process shares one limiter
(:data:`DESCRIBES`: 10 calls/s, bursts of 10).
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta

from temporalio.api.enums.v1 import DescribeTaskQueueMode, TaskQueueKind, TaskQueueType
from temporalio.api.taskqueue.v1 import PollerInfo, TaskQueue, TaskQueueVersionSelection
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

DESCRIBE_TIMEOUT = timedelta(seconds=5)
# How recently a poller must have polled to count as live: both checks ask it (a caller's
# "does anything serve this queue", a worker's "does another host poll it"). The server
# records when each poll *started*, and a poll lasts up to 60 s (an idle live worker then
# polls again at once), so a live worker's last poll is at most ~60 s old; 30 s more covers
# a worker clock a little off the server's (ages are local time minus the server's poll
# time) and a worker between polls with every slot briefly full. Longer reports a worker
# that died without shutting down later; shorter would report a live worker missing (a call
# failed as unserved, a conflict missed), which is worse.
LIVE_S = 90.0


async def list_pollers(client: Client, queue: str) -> list[PollerInfo]:
    """The pollers the server lists on the activity task queue ``queue``, on every partition.

    The default mode of ``DescribeTaskQueue`` describes the root partition only, which misses
    a single-poller worker (a fleet's) whose polls sit on another partition; the "enhanced"
    mode (deprecated in the API, served by the server) asks every partition, and its answer
    is cached for about 5 s. The default mode's list is added, in case a server stops
    honouring the enhanced one.
    """
    activity = TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY
    request = DescribeTaskQueueRequest(
        namespace=client.namespace,
        task_queue=TaskQueue(name=queue, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL),
        task_queue_type=activity,
        api_mode=DescribeTaskQueueMode.DESCRIBE_TASK_QUEUE_MODE_ENHANCED,
        task_queue_types=[activity],
        versions=TaskQueueVersionSelection(unversioned=True, all_active=True),
        report_pollers=True,
    )
    described = await client.workflow_service.describe_task_queue(request, timeout=DESCRIBE_TIMEOUT)
    found = list(described.pollers)
    for version in described.versions_info.values():
        for kind, info in version.types_info.items():
            if kind == activity:
                found.extend(info.pollers)
    return found


class RateLimit:
    """At most ``per_second`` calls a second on average, ``burst`` at once (GCRA).

    Loop-agnostic (a reservation is a time to sleep until), so one instance can be shared
    by every worker of a process, whatever event loop each runs on.
    """

    def __init__(self, per_second: float, burst: int = 1) -> None:
        self.interval = 1.0 / per_second
        self.burst = max(1, burst)
        self._next = 0.0
        self._lock = threading.Lock()

    def reserve(self) -> float:
        """Take the next slot; seconds to wait before using it."""
        with self._lock:
            now = time.monotonic()
            due = max(self._next, now)
            self._next = due + self.interval
            return max(0.0, due - now - (self.burst - 1) * self.interval)

    def try_take(self) -> bool:
        """Take a slot only if one is free now (nothing to wait for); never queues, so any
        waiter (:meth:`wait`) goes first."""
        with self._lock:
            now = time.monotonic()
            due = max(self._next, now)
            if due - now - (self.burst - 1) * self.interval > 0:
                return False
            self._next = due + self.interval
            return True

    def give_back(self) -> None:
        """Return a slot taken and not used (its waiter gave up): the next caller may have
        it, rather than every later one waiting one interval more for nothing."""
        with self._lock:
            self._next = max(time.monotonic(), self._next - self.interval)

    async def wait(self) -> None:
        """Wait for the next slot; cancelled while waiting, it is given back."""
        delay = self.reserve()
        if delay > 0:
            try:
                await asyncio.sleep(delay)
            except asyncio.CancelledError:
                self.give_back()
                raise


# Every queue check of this process: a third of Temporal Cloud's 30 calls/s per namespace.
DESCRIBES = RateLimit(per_second=10.0, burst=10)


def poll_ages(pollers: list[PollerInfo], now: float) -> list[float]:
    """Seconds since each poller last polled (0 when the server recorded no time)."""
    ages = []
    for poller in pollers:
        age = 0.0
        if poller.HasField("last_access_time"):
            polled = poller.last_access_time
            age = max(0.0, now - (polled.seconds + polled.nanos / 1e9))
        ages.append(age)
    return ages
