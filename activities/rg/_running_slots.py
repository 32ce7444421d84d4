"""RunningSlots: at most ``total`` searches run rg at once, shared fairly between workspaces
(the calls a worker holds wait here for one: ``worker/_held_slots.py`` counts those).

A worker takes many more calls than it runs (they wait here, heartbeating "queued", so a
busy worker is never mistaken for a missing one). Which waiting call runs next is decided
per workspace, round-robin: each workspace with calls waiting gets the next free slot in
turn, its own calls first come first served, and no workspace runs more than ``per_key`` at
once. One workspace flooding a host queue therefore delays another's call by at most one
running search per slot, never by its whole backlog.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class RunningSlots:
    """Slots for running searches, granted round-robin between keys (workspaces).

    Args:
        total: searches running at once, all keys together.
        per_key: searches one key may run at once (default: ``total``).
    """

    def __init__(self, total: int, per_key: int | None = None) -> None:
        if total < 1:
            raise ValueError("total must be at least 1")
        self.total = total
        self.per_key = max(1, min(per_key or total, total))
        self.running = 0
        self._running: collections.Counter[str] = collections.Counter()
        self._waiting: dict[str, collections.deque[asyncio.Future[None]]] = {}
        # Keys with calls waiting, in the order they get the next slot.
        self._turns: collections.deque[str] = collections.deque()

    def waiting(self, key: str | None = None) -> int:
        """Calls waiting for a slot (of ``key``, or of every key)."""
        if key is not None:
            return len(self._waiting.get(key, ()))
        return sum(len(q) for q in self._waiting.values())

    def busy(self, key: str) -> bool:
        """Whether a call of ``key`` arriving now would wait."""
        return (
            self.running >= self.total
            or self._running[key] >= self.per_key
            or bool(self._waiting.get(key))
        )

    @asynccontextmanager
    async def slot(self, key: str) -> AsyncIterator[None]:
        """Hold a running slot for ``key`` (waiting for it first, if need be)."""
        await self.acquire(key)
        try:
            yield
        finally:
            self.release(key)

    async def acquire(self, key: str) -> None:
        """Wait for a running slot for ``key``; give it back with :meth:`release`.

        Cancellation while waiting gives up the place in line (and a slot granted in the
        same instant is passed on)."""
        if not self.busy(key):
            self._take(key)
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue = self._waiting.setdefault(key, collections.deque())
        if not queue:
            self._turns.append(key)
        queue.append(waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.release(key)  # granted as we were cancelled: pass it on
            else:
                self._forget(key, waiter)
            raise

    def _take(self, key: str) -> None:
        self.running += 1
        self._running[key] += 1

    def release(self, key: str) -> None:
        """Give back a slot :meth:`acquire` granted."""
        self.running -= 1
        self._running[key] -= 1
        if self._running[key] <= 0:
            del self._running[key]
        self._wake()

    def _forget(self, key: str, waiter: asyncio.Future[None]) -> None:
        queue = self._waiting.get(key)
        if queue is None:
            return
        try:
            queue.remove(waiter)
        except ValueError:
            pass
        if not queue:
            del self._waiting[key]
            try:
                self._turns.remove(key)
            except ValueError:
                pass

    def _wake(self) -> None:
        """Grant free slots to waiting keys in turn, skipping keys at their own cap."""
        skipped = 0
        while self.running < self.total and self._turns and skipped < len(self._turns):
            key = self._turns[0]
            if self._running[key] >= self.per_key:
                self._turns.rotate(-1)
                skipped += 1
                continue
            queue = self._waiting[key]
            waiter = queue.popleft()
            self._turns.popleft()
            if queue:
                self._turns.append(key)  # its next call waits for the next turn
            else:
                del self._waiting[key]
            if waiter.done():  # cancelled, not yet forgotten
                continue
            self._take(key)
            waiter.set_result(None)
            skipped = 0
