"""Is anything serving a task queue? Asked only when a call was not picked up in time.

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
queue reads as missing once its last poll is older than :data:`LIVE_S`. A queue nothing has
polled for that long (an unknown workspace, a worker stopped a while ago) is missing at the
first check. ``DescribeTaskQueue`` is rate-limited process-wide and its answer for a queue
reused for :data:`CACHE_S`, so many calls waiting on one dead queue cost one call to the
server every few seconds, not one per call.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from pydantic import BaseModel
from temporalio import activity
from temporalio.client import Client

from fs_search.workflows.task_queues import DESCRIBES, list_pollers, poll_ages

QUEUE_LIVENESS_ACTIVITY = "fs_search.queue_liveness"
# A poll lasts up to 60 s; a poller seen within this is taken as live.
LIVE_S = 70.0
CACHE_S = 3.0


class QueueLiveness(BaseModel):
    """Who polls a task queue: ``polled`` True (a live poller), False (none), None (could
    not be asked: ``detail`` says why)."""

    queue: str
    polled: bool | None
    detail: str = ""


@dataclass
class _Cached:
    at: float
    answer: QueueLiveness


_CACHE: dict[tuple[str, str], _Cached] = {}


@activity.defn(name=QUEUE_LIVENESS_ACTIVITY)
async def queue_liveness(queue: str) -> QueueLiveness:
    """Whether a live worker polls the activity task queue ``queue`` (never raises)."""
    return await liveness_of(activity.client(), queue)


async def liveness_of(client: Client, queue: str) -> QueueLiveness:
    """Whether a live worker polls the activity task queue ``queue`` of ``client``'s
    namespace (never raises): what the local activity answers, and what the Nexus handler
    and one-off calls ask directly."""
    key = (client.namespace, queue)
    cached = _CACHE.get(key)
    if cached is not None and time.monotonic() - cached.at < CACHE_S:
        return cached.answer
    await DESCRIBES.wait()
    try:
        pollers = await list_pollers(client, queue)
    except Exception as e:  # noqa: BLE001 - any failure: not known
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
    if len(_CACHE) > 1024:
        _CACHE.clear()
    _CACHE[key] = _Cached(time.monotonic(), answer)
    return answer
