"""A workspace queue has one host: refuse to poll a queue another host's worker polls.

Two hosts with a workspace of the same name would both poll ``fs-search/<name>``, and each
call would be answered from whichever host polled first, out of that host's directory.
Before a worker polls a workspace queue it asks Temporal who polls it (``DescribeTaskQueue``,
activity task queue type) and refuses when a live poller of *another host* is listed.

The rules, and why:

* **A host is a host id**, not a process: ``FS_SEARCH_HOST_ID`` (the DaemonSet sets the
  node's name), default the host name. It is part of the worker's identity
  (``fs-search-worker <pid>@<hostname> host=<host-id>``; without ``host=`` when it is the
  host name), so a worker restarted on the same host (new pid, new pod name) is never
  refused because of its predecessor, whose poller the server keeps listing for 5 minutes.
  Pollers of the same host id are never a conflict: they serve the same files.
* **Only live pollers count.** The server records when each poll *started*; a live idle
  worker re-polls at least once a minute (a poll lasts up to 60 s), so a poller last seen
  more than ``LIVE_S`` (90 s) ago has stopped. A worker that is busy with every slot full
  does not poll; one starved longer than 90 s is taken for gone (a missed conflict, never a
  false one).
* **A poller whose identity names no host** (neither ours nor the SDK's ``<pid>@<host>``)
  is another host: something else polls the queue.
* **A check that cannot be made does not stop a worker**: Temporal unreachable, the call
  refused or rate-limited — the worker logs a warning and polls (as it did before the check
  existed). The check guards against a deployment mistake; it must not turn a Temporal
  hiccup into an outage.
* ``FS_SEARCH_ALLOW_SHARED_QUEUE=1`` skips the check (hosts that see the same files, e.g.
  one shared volume).

Pollers are listed from every partition of the queue (:func:`list_pollers`): a fleet's
worker has one poller, which the default mode, describing the root partition only, can miss.

Limits: two hosts that start polling the same queue within a few seconds of each other both
pass (neither is listed yet: the server caches the list for about 5 s); clocks are assumed
within a few seconds of the server's (ages are local time minus the server's poll time).

``DescribeTaskQueue`` counts against Temporal Cloud's visibility limit (30 calls/s per
namespace), so it is asked once per attach, never per search, and every check in the process
shares one limiter (:data:`DESCRIBES`: 10 calls/s, bursts of 10): a fleet attaching 1,000
workspaces at start-up takes about 100 s to check them all.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

from temporalio.client import Client

from fs_search.activities import ID_SYNTAX, ConfigError, FsSearchConfig, host_id_of, this_host
from fs_search.workflows._task_queues import (  # noqa: F401 - re-exported for the checks
    DESCRIBE_TIMEOUT,
    DESCRIBES,
    LIVE_S,
    RateLimit,
    list_pollers,
)

log = logging.getLogger(__name__)

HOST_ID_ENV = "FS_SEARCH_HOST_ID"
ALLOW_SHARED_ENV = FsSearchConfig.env_name("allow_shared_queue")
# The same syntax as a workspace id.
HOST_ID = re.compile(ID_SYNTAX)
IDENTITY_PREFIX = "fs-search-worker"

_OURS = re.compile(rf"{IDENTITY_PREFIX} \d+@(?P<hostname>\S+)(?: host=(?P<host>\S+))?")
_SDK_DEFAULT = re.compile(r"\d+@(?P<hostname>\S+)")


class QueueTaken(Exception):
    """Another host's worker polls the workspace's queue; this worker will not."""

    def __init__(self, message: str, queue: str) -> None:
        super().__init__(message)
        self.queue = queue


_as_host_id = host_id_of


def default_host_id() -> str:
    """The host name, in host-id syntax."""
    return this_host()


def host_id_from_env(getenv: Callable[[str], str | None] = os.environ.get) -> str:
    """``FS_SEARCH_HOST_ID``, or the host name.

    Raises:
        ConfigError: the variable is set to something that is not a valid id.
    """
    raw = (getenv(HOST_ID_ENV) or "").strip()
    if not raw:
        return default_host_id()
    if not HOST_ID.fullmatch(raw):
        raise ConfigError(
            f"invalid fs-search configuration: {HOST_ID_ENV} must match "
            f"[A-Za-z0-9][A-Za-z0-9._-]{{0,127}} (got {raw!r})"
        )
    return raw


def identity_for(host_id: str) -> str:
    """This process's Temporal identity on ``host_id``: ``fs-search-worker <pid>@<hostname>``,
    plus `` host=<host_id>`` when the host id is not the host name."""
    hostname = socket.gethostname()
    base = f"{IDENTITY_PREFIX} {os.getpid()}@{hostname}"
    return base if host_id == _as_host_id(hostname) else f"{base} host={host_id}"


def host_of(identity: str) -> str | None:
    """The host id a poller's identity names (ours, or the SDK's ``<pid>@<host>``), or None."""
    ours = _OURS.fullmatch(identity)
    if ours:
        return ours["host"] or _as_host_id(ours["hostname"])
    sdk = _SDK_DEFAULT.fullmatch(identity)
    return _as_host_id(sdk["hostname"]) if sdk else None


@dataclass(frozen=True)
class Poller:
    """A live poller of another host."""

    identity: str
    host: str | None
    age_s: float

    def __str__(self) -> str:
        host = self.host or "unknown"
        return f"{self.identity!r} (host {host}, last polled {self.age_s:.0f} s ago)"


@dataclass(frozen=True)
class QueueCheck:
    """Who else polls a queue: ``others`` (live, other hosts), or why it is not known."""

    queue: str
    others: tuple[Poller, ...] = ()
    error: str | None = None
    live_s: float = LIVE_S

    @property
    def taken(self) -> bool:
        """Another host's worker polls the queue."""
        return bool(self.others)

    def clears_in(self) -> float:
        """Seconds until every poller of ``others`` is past the live window, if none re-polls."""
        return max(0.0, self.live_s - min(p.age_s for p in self.others)) if self.others else 0.0

    def refusal(self, identity: str, host_id: str, what: str) -> str:
        """The error naming both sides."""
        others = "; ".join(str(p) for p in self.others)
        return (
            f"task queue {self.queue} is polled by a worker on another host: {others}. "
            f"This worker ({identity!r}, host {host_id}) {what}: two hosts on one queue would "
            f"each answer calls from their own directory of that name. Give the workspaces "
            f"distinct ids, or set {ALLOW_SHARED_ENV}=1 if both hosts see the same files."
        )


class QueueOwners:
    """Asks Temporal who polls a workspace queue (``DescribeTaskQueue``), rate-limited.

    Args:
        client: the Temporal client.
        host_id: this worker's host id.
        live_s: a poller seen longer ago than this is gone.
        limit: the shared limiter (default: the process-wide :data:`DESCRIBES`).
        clock: wall-clock seconds (the server's poll times are wall-clock).
    """

    def __init__(
        self,
        client: Client,
        host_id: str,
        *,
        live_s: float = LIVE_S,
        limit: RateLimit | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.host_id = host_id
        self.live_s = live_s
        self.limit = limit or DESCRIBES
        self.clock = clock

    async def check(self, queue: str) -> QueueCheck:
        """The live pollers of other hosts on the activity task queue ``queue``."""
        await self.limit.wait()
        try:
            listed = await list_pollers(self.client, queue)
        except Exception as e:  # noqa: BLE001 - any failure: the check is not made
            return QueueCheck(queue, error=f"{type(e).__name__}: {e}", live_s=self.live_s)
        now = self.clock()
        others: dict[str, Poller] = {}
        for poller in listed:
            age = 0.0  # no time recorded: take it as just seen
            if poller.HasField("last_access_time"):
                polled = poller.last_access_time
                age = now - (polled.seconds + polled.nanos / 1e9)
            if age > self.live_s:
                continue
            host = host_of(poller.identity)
            if host == self.host_id:
                continue
            seen = others.get(poller.identity)
            if seen is None or age < seen.age_s:  # listed by several partitions: the latest
                others[poller.identity] = Poller(poller.identity, host, max(0.0, age))
        return QueueCheck(queue, tuple(others.values()), live_s=self.live_s)


async def claim_queue(
    client: Client,
    queue: str,
    *,
    host_id: str,
    identity: str,
    allow_shared: bool,
    owners: QueueOwners | None = None,
) -> None:
    """Before a single-workspace worker polls ``queue``: refuse when another host polls it.

    Raises:
        QueueTaken: a live poller of another host is listed (and sharing is not allowed);
            the error is logged naming both identities.
    """
    if allow_shared:
        log.info("%s=1: not checking task queue %s for other hosts", ALLOW_SHARED_ENV, queue)
        return
    check = await (owners or QueueOwners(client, host_id)).check(queue)
    if check.error:
        log.warning(
            "could not check who else polls task queue %s (%s); polling it anyway",
            queue,
            check.error,
        )
        return
    if check.taken:
        message = check.refusal(identity, host_id, "refuses to start")
        log.error("%s", message)
        raise QueueTaken(message, queue)
