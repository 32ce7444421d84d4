"""HeldSlots: the calls a worker process holds (taken from Temporal, running or waiting for
one of the executor's running slots), shared fairly by every workspace queue it polls.

Temporal reserves a slot before each poll and releases it when the task ends (or when the
poll came back empty). One :class:`HeldSlots` is the activity slot supplier of every
``Worker`` in the process, so:

* a queue never holds more than ``per_workspace`` slots (reserved or running): one busy
  workspace cannot take the process;
* no new poll starts while ``total`` tasks are running, so calls wait in Temporal
  (schedule-to-start), not in the worker burning their start-to-close time; waiting
  queues are served first come, first served.

A poll already in flight when the last slot fills can still deliver a task: the process
may run up to one task per polling queue over ``total``, never more than ``per_workspace``
on any queue.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from temporalio.worker import (
    CustomSlotSupplier,
    SlotMarkUsedContext,
    SlotPermit,
    SlotReleaseContext,
    SlotReserveContext,
)


@dataclass(eq=False)
class QueuePermit(SlotPermit):
    """A slot on one task queue; ``used`` once a task runs in it."""

    queue: str
    used: bool = False


@dataclass
class _Queue:
    held: int = 0  # permits reserved or running on this queue


@dataclass
class HeldSlots(CustomSlotSupplier):
    """The process-wide slot supplier (see the module docstring).

    Args:
        total: tasks running at once across all queues.
        per_workspace: slots one queue may hold at once.
        shared_queues: queues that may hold up to ``total`` (a host queue: all of the host's
            workspaces share it; its router keeps each to its share of held calls, and the
            executor's running slots take turns between them).
    """

    total: int
    per_workspace: int
    shared_queues: frozenset[str] = frozenset()
    running: int = 0
    _queues: dict[str, _Queue] = field(default_factory=dict)
    _waiters: collections.deque[tuple[str, asyncio.Future[QueuePermit]]] = field(
        default_factory=collections.deque
    )

    def held(self, queue: str) -> int:
        """Slots ``queue`` holds now (reserved or running)."""
        state = self._queues.get(queue)
        return state.held if state else 0

    async def reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit:
        """Wait (first come, first served) until the queue and the process have room."""
        waiter: asyncio.Future[QueuePermit] = asyncio.get_running_loop().create_future()
        self._waiters.append((ctx.task_queue, waiter))
        self._wake()
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._give_back(waiter.result())  # granted as the poller was cancelled
            raise

    def try_reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit | None:
        """Eager tasks: a slot only when one is free now and nobody waits for it."""
        if self._waiters or not self._room(ctx.task_queue):
            return None
        return self._grant(ctx.task_queue)

    def mark_slot_used(self, ctx: SlotMarkUsedContext) -> None:
        """A task arrived in the permit's slot."""
        permit = ctx.permit
        if isinstance(permit, QueuePermit) and not permit.used:
            permit.used = True
            self.running += 1

    def release_slot(self, ctx: SlotReleaseContext) -> None:
        """The task ended, or the poll came back empty: give the slot to the next waiter."""
        permit = ctx.permit
        if not isinstance(permit, QueuePermit):
            return
        if permit.used:
            self.running -= 1
            permit.used = False
        self._give_back(permit)

    def _give_back(self, permit: QueuePermit) -> None:
        state = self._queues.get(permit.queue)
        if state is not None:
            state.held -= 1
            if state.held <= 0:
                del self._queues[permit.queue]
        self._wake()

    @contextlib.contextmanager
    def lent(self, queue: str) -> Iterator[None]:
        """A task of ``queue`` that waits without working (a host queue's call parked
        behind its workspace's share) lends its slot while the block runs: it counts
        neither towards ``total`` nor its queue's slots, so a poll may take another task
        meanwhile (another workspace's call). Given back when the block ends, before the
        task itself does: its release is counted as usual."""
        self.running -= 1
        state = self._queues.get(queue)
        if state is not None:
            state.held -= 1
        self._wake()
        try:
            yield
        finally:
            self.running += 1
            self._queues.setdefault(queue, _Queue()).held += 1

    def cap(self, queue: str) -> int:
        """Slots ``queue`` may hold at once."""
        return self.total if queue in self.shared_queues else self.per_workspace

    def _room(self, queue: str) -> bool:
        return self.running < self.total and self.held(queue) < self.cap(queue)

    def _grant(self, queue: str) -> QueuePermit:
        self._queues.setdefault(queue, _Queue()).held += 1
        return QueuePermit(queue)

    def _wake(self) -> None:
        """Grant every waiter that fits now, oldest first; the others keep their place.

        A waiter whose own queue is full does not hold up waiters of other queues.
        """
        kept: collections.deque[tuple[str, asyncio.Future[QueuePermit]]] = collections.deque()
        while self._waiters:
            queue, waiter = self._waiters.popleft()
            if waiter.done():
                continue
            if self._room(queue):
                waiter.set_result(self._grant(queue))
            else:
                kept.append((queue, waiter))
        self._waiters = kept
