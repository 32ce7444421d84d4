"""One queue for a whole host: ``fs-search-host/<host-id>`` (docs/workers.md, host-routed
queues).

Per-workspace queues cost the Temporal server a long poll and a few loaded partitions each,
so they stop at about a thousand workspaces per namespace. A host-routed worker polls one
queue; every request on it names its workspace (``workspace_id``) and :class:`HostRouter`
hands it to that workspace's own :class:`SearchActivities` — the same confinement (its held
root), spills keyed by it, its telemetry, and its key in the executor's running slots, so a
flooding workspace waits its turn behind a quiet one on the same queue.

A request naming a workspace this host has not attached yet attaches it on the spot when it
exists under the host's root (``attach``: the fleet vets the entry as its scan would), so a
workspace created a moment before its first call is served. One naming no workspace of this
host fails at once, non-retryable SEARCH_FAILED naming the workspace and the host (retrying
on the same host queue could only reach this same host); an expected refusal, it is of
category BENIGN: the SDK logs it at DEBUG, without a traceback.

Fairness holds for held calls too (``share``): a workspace holds at most ``share`` glob and
grep calls of the host queue at once. A poll cannot choose whose task it takes, so a call
beyond its workspace's share is **parked**: it waits in the worker, first come first served
behind its workspace's other parked calls, for a place in its workspace's share, heartbeating
("queued") and lending its slot back (``lend``: the process's held slots count it neither
towards the calls the process holds nor the host queue's), so the next poll takes another
workspace's call at once. It runs when one of its workspace's held calls ends (the place
passes to it), within its queueing budget (what its attempt's start-to-close leaves beyond
its own budget and the reserve). This needs nothing of the caller: a flood's calls are taken
from the queue once each and wait here, whatever the caller's retry policy or pauses.

Parking is bounded (:data:`PARKED_PER_WORKSPACE`, :data:`PARKED`): beyond it, or when its
queueing budget runs out while parked, a call is handed back — a ``WORKSPACE_BUSY`` failure
whose next retry delay is the pause the call should wait (FsSearchTools schedules it again
after that pause, within its queueing budget) — and the slot polls again. The pauses are
spaced (``worker/_return_spacing.py``): a workspace's handed-back calls come back about as
often as its calls end. The server brings a call back itself (a retry after the pause) on its
first hand-backs, while the pause fits in its queueing budget; the caller takes it back after
that (``retried_by_server``). A caller that ignores the pause (``max_attempts: 1``, scheduled
again at once) cycled its calls through the queue as fast as the host handed them back, and
a quiet workspace's grep waited behind them (4-8 s instead of 0.1-1 s); parked, the same
calls wait here instead.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from fs_search.activities import (
    DEFAULT_TIMEOUT_MS,
    GLOB_ACTIVITY,
    GREP_ACTIVITY,
    READ_SPILL_ACTIVITY,
    TOOLS_ACTIVITY,
    WORKSPACE_BUSY,
    ErrorCode,
    GlobRequest,
    GlobResult,
    GrepRequest,
    GrepResult,
    Progress,
    ReadSpillRequest,
    ReadSpillResult,
    SearchActivities,
    SearchError,
    ToolsRequest,
    ToolsResult,
    contract_errors,
    heartbeating,
    host_queue_for,
    invalid_argument,
    queue_budget_s,
    retried_by_server,
    time_left,
)
from fs_search.worker._return_spacing import ReturnSpacing

Lookup = Callable[[str], SearchActivities | None]
Attach = Callable[[str], Awaitable[SearchActivities | None]]
Lend = Callable[[str], contextlib.AbstractContextManager[None]]
# Calls parked behind their workspace's share, per workspace and in all: each is a coroutine
# and a heartbeat every 2 s (or a third of its heartbeat timeout).
PARKED_PER_WORKSPACE = 64
PARKED = 512


class HostRouter:
    """The four activities of a host queue, each dispatched to the named workspace.

    Args:
        host_id: this host (named in errors).
        lookup: the attached workspace of an id, or None.
        share: glob and grep calls one workspace may hold at once (None: no limit); a call
            beyond it is handed back to wait in Temporal (``WORKSPACE_BUSY``).
        attach: for an id ``lookup`` does not know, attach it on the spot if it exists
            (None: not served).
    """

    def __init__(
        self,
        host_id: str,
        lookup: Lookup,
        *,
        share: int | None = None,
        attach: Attach | None = None,
        lend: Lend | None = None,
        parked_per_workspace: int = PARKED_PER_WORKSPACE,
        parked: int = PARKED,
    ) -> None:
        self.host_id = host_id
        self.queue = host_queue_for(host_id)
        self._lookup = lookup
        self._attach = attach
        self.share = share
        self._lend: Lend = lend or (lambda _queue: contextlib.nullcontext())
        self.parked_per_workspace = parked_per_workspace
        self.parked_cap = parked
        self._held: collections.Counter[str] = collections.Counter()
        # Per workspace, its parked calls in arrival order (each waits for a place).
        self._parked: dict[str, collections.deque[asyncio.Future[None]]] = {}
        self.parked = 0  # calls parked now
        self._returns = ReturnSpacing()
        self.handed_back = 0  # calls handed back to Temporal so far (a workspace at its share)
        self.server_retries = 0  # of them, those the server was to bring back itself

    def held(self, workspace_id: str) -> int:
        """glob and grep calls of ``workspace_id`` this router holds now."""
        return self._held[workspace_id]

    def all(self) -> list[object]:
        """Every activity, for ``Worker(activities=...)``."""
        return [self.glob, self.grep, self.tools, self.read_spill]

    @activity.defn(name=GLOB_ACTIVITY)
    async def glob(self, req: GlobRequest) -> GlobResult:
        """glob in the workspace the request names."""
        async with self._holding(req.workspace_id, req.timeout_ms) as workspace:
            return await workspace.glob(req)

    @activity.defn(name=GREP_ACTIVITY)
    async def grep(self, req: GrepRequest) -> GrepResult:
        """grep in the workspace the request names."""
        async with self._holding(req.workspace_id, req.timeout_ms) as workspace:
            return await workspace.grep(req)

    @activity.defn(name=TOOLS_ACTIVITY)
    async def tools(self, req: ToolsRequest | None = None) -> ToolsResult:
        """The catalogue of the workspace the request names."""
        workspace_id = req.workspace_id if req is not None else None
        return await (await self._workspace(workspace_id)).tools(req)

    @activity.defn(name=READ_SPILL_ACTIVITY)
    async def read_spill(self, req: ReadSpillRequest) -> ReadSpillResult:
        """A page of a spill artifact of the workspace the request names."""
        return await (await self._workspace(req.workspace_id)).read_spill(req)

    async def _workspace(self, workspace_id: str | None) -> SearchActivities:
        async with contract_errors():
            return await self._find(workspace_id)

    @contextlib.asynccontextmanager
    async def _holding(
        self, workspace_id: str | None, timeout_ms: int | None
    ) -> AsyncIterator[SearchActivities]:
        """The named workspace, this call (of budget ``timeout_ms``) counted in its share
        while the block runs.

        Raises:
            ApplicationError: WORKSPACE_BUSY (benign; retryable by the server on the call's
                first attempts, see :meth:`_busy`) when the workspace already holds its share.
        """
        workspace = await self._workspace(workspace_id)
        assert workspace_id is not None  # _find refuses a call naming none
        held = self._held[workspace_id]
        if self.share is not None and held >= self.share:
            if not await self._park(workspace_id, timeout_ms):
                self.handed_back += 1
                raise self._busy(workspace_id, held, timeout_ms)
            # A held call's place passed to this one: it is counted already.
        else:
            self._held[workspace_id] += 1
        try:
            yield workspace
        finally:
            self._end(workspace_id)

    def _end(self, workspace_id: str) -> None:
        """A held call of ``workspace_id`` ended: its place passes to the oldest call parked
        behind it, or is free."""
        self._returns.ended(workspace_id, time.monotonic())
        waiting = self._parked.get(workspace_id)
        while waiting:
            waiter = waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._held[workspace_id] -= 1
        if self._held[workspace_id] <= 0:
            del self._held[workspace_id]
            self._returns.forget(workspace_id)

    def parked_for(self, workspace_id: str) -> int:
        """Calls of ``workspace_id`` parked now."""
        return sum(1 for w in self._parked.get(workspace_id, ()) if not w.done())

    async def _park(self, workspace_id: str, timeout_ms: int | None) -> bool:
        """Wait (heartbeating, the slot lent back) for a place in ``workspace_id``'s share;
        False when the call cannot be parked (the caps, no queueing budget left) or its
        budget ran out waiting: then it is handed back."""
        limit = self._queue_left_s(timeout_ms)
        waiting = self._parked.setdefault(workspace_id, collections.deque())
        if (
            (limit is not None and limit <= 0)
            or self.parked >= self.parked_cap
            or self.parked_for(workspace_id) >= self.parked_per_workspace
        ):
            return False
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiting.append(waiter)
        self.parked += 1
        try:
            with self._lend(self.queue):
                async with heartbeating(Progress(phase="queued")):
                    await asyncio.wait_for(asyncio.shield(waiter), limit)
            return True
        except TimeoutError:
            if waiter.done():
                return True  # the place came with the deadline: taken
            waiter.cancel()
            return False
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._end(workspace_id)  # handed a place as it was cancelled: pass it on
            else:
                waiter.cancel()
            raise
        finally:
            self.parked -= 1
            if not any(not w.done() for w in waiting):
                self._parked.pop(workspace_id, None)

    @staticmethod
    def _queue_left_s(timeout_ms: int | None) -> float | None:
        """What the running attempt leaves for waiting beyond its own budget and the
        reserve (the caller's start_to_close_for, read backwards); None: unbounded."""
        left = time_left()
        if left is None:
            return None
        return queue_budget_s(left, (timeout_ms or DEFAULT_TIMEOUT_MS) / 1000)

    def _busy(self, workspace_id: str, held: int, timeout_ms: int | None) -> ApplicationError:
        """The hand-back of a call: its pause as the next retry delay, retryable while the
        server should bring it back (``retried_by_server``), else for its caller to."""
        pause = self._returns.pause(workspace_id, time.monotonic())
        info = activity.info()
        waited = max(0.0, (datetime.now(UTC) - info.scheduled_time).total_seconds())
        attempt_s = _seconds(info.start_to_close_timeout)
        queue_left = close_left = None
        if attempt_s is not None:  # the caller's start_to_close_for, read backwards
            budget = (timeout_ms or DEFAULT_TIMEOUT_MS) / 1000
            queue_left = queue_budget_s(attempt_s - waited, budget)
        whole_s = _seconds(info.schedule_to_close_timeout)
        if whole_s is not None:
            close_left = whole_s - waited - (attempt_s or 0.0)
        by_server = retried_by_server(
            attempt=info.attempt, pause_s=pause, queue_left_s=queue_left, close_left_s=close_left
        )
        self.server_retries += by_server
        return ApplicationError(
            f"workspace {workspace_id!r} already has {held} calls held on host "
            f"{self.host_id!r} (its share of the host's calls); this call waits in Temporal "
            "and is tried again",
            type=WORKSPACE_BUSY,
            non_retryable=not by_server,
            next_retry_delay=timedelta(milliseconds=round(pause * 1000)),
            category=ApplicationErrorCategory.BENIGN,
        )

    async def _find(self, workspace_id: str | None) -> SearchActivities:
        if workspace_id is None:
            raise invalid_argument(
                f"a call on host queue {self.queue!r} must name its workspace (workspace_id)"
            )
        found = self._lookup(workspace_id)
        if found is None and self._attach is not None:
            found = await self._attach(workspace_id)
        if found is None:
            raise SearchError(
                ErrorCode.SEARCH_FAILED,
                f"workspace {workspace_id[:200]!r} is not served on host {self.host_id!r} "
                f"(task queue {self.queue!r}): it is not attached here; check which host "
                "holds it",
                benign=True,
            )
        return found


def _seconds(timeout: timedelta | None) -> float | None:
    return None if timeout is None else timeout.total_seconds()
