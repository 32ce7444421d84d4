"""A glob's listing put in modification order while rg is still walking.

rg walks with ``--threads=1`` and no sort (:mod:`._modified` says why that order, sorted
stably by time, is ``rg --sort=modified``'s). Its output comes here as it is read
(:meth:`ModifiedOrder.feed`, the executor's sink) into one buffer, and is handed out in
units of about :data:`UNIT_BYTES` ending at a name's end, whose files' times two lanes read
at once: a thread of the worker and, when one is idle, a digest helper (with the search
root's descriptor). So the walk and the reading of times overlap. Once rg is done
(:meth:`ModifiedOrder.finish`), the last units are read and the listing is sorted in a
thread with NumPy (:func:`in_order`: a stable argsort of the times, the names gathered into a
new buffer a block at a time): a few arrays of one integer per name beside the two buffers,
where a Python list and sort of every name held several times the listing.

A helper that dies leaves its unit to be read in a thread; an error in a thread is raised
from :meth:`~ModifiedOrder.finish`. :meth:`~ModifiedOrder.discard` stops the lanes (the call
failed or was cancelled).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np

from fs_search.activities.results._helper import job_name
from fs_search.activities.results._modified import times
from fs_search.activities.results._offload import HelperDied, Offload

log = logging.getLogger(__name__)

# The output read at once (a unit of work for a lane): ~2,000-4,000 names, ~5-10 ms of stats.
UNIT_BYTES = 96 * 1024
# Below this much output in all, a helper's round trips cost more than they save.
_HELPER_FROM_BYTES = 2 * UNIT_BYTES
# Names gathered into the sorted buffer at a time (the gather's index is 8 bytes a byte).
_GATHER_NAMES = 512
# Bytes of the listing searched for name ends at a time.
_WINDOW = 256 * 1024
_TIMES = job_name(times)
_T = TypeVar("_T")


class ModifiedOrder:
    """One glob's listing (``rg --files --null`` output, fed as it comes) in modification
    order, the files' times read beneath ``dir_fd`` (held by the caller until
    :meth:`finish` or :meth:`discard` returns)."""

    def __init__(self, offload: Offload, dir_fd: int, *, unit: int = UNIT_BYTES) -> None:
        self.offload = offload
        self.dir_fd = dir_fd
        self.unit = unit
        self._raw = bytearray()  # everything fed
        self._cut_at = 0  # where the next unit starts in it
        self._units: list[tuple[int, int]] = []  # (start, stop) in ``_raw``
        self._times: list[bytes | None] = []
        self._queue: asyncio.Queue[int | None] = asyncio.Queue()
        self._lanes: list[asyncio.Task[None]] = []

    def feed(self, piece: bytes) -> None:
        """A piece of rg's output, as read (on the event loop)."""
        self._raw += piece
        if len(self._raw) - self._cut_at >= self.unit:
            self._cut(final=False)

    def _cut(self, *, final: bool) -> None:
        """Units of what was fed since the last, each ending at a name's end (the last
        one wherever the output ends, when ``final``)."""
        raw = self._raw
        end = len(raw) if final else raw.rfind(b"\0", self._cut_at) + 1
        start = self._cut_at
        while start < end:
            stop = raw.find(b"\0", min(start + self.unit, end) - 1, end) + 1 or end
            self._dispatch(start, stop)
            start = stop
        self._cut_at = max(self._cut_at, end)

    def _dispatch(self, start: int, stop: int) -> None:
        self._units.append((start, stop))
        self._times.append(None)
        self._queue.put_nowait(len(self._units) - 1)
        if not self._lanes:
            self._lanes.append(asyncio.ensure_future(self._thread_lane()))
        if len(self._lanes) == 1 and len(self._raw) >= _HELPER_FROM_BYTES:
            self._lanes.append(asyncio.ensure_future(self._helper_lane()))

    def _unit(self, i: int) -> bytes:
        """A copy of unit ``i`` for a lane (taken on the event loop: the buffer keeps
        growing, so no view of it may be held)."""
        start, stop = self._units[i]
        return bytes(self._raw[start:stop])

    async def _thread_lane(self) -> None:
        while (i := await self._queue.get()) is not None:
            # The thread reads beneath a descriptor of its own: cancelled, it goes on until
            # its unit is read, and by then the caller's descriptor may be closed and its
            # number another call's tree.
            self._times[i] = await in_thread(times, [self._unit(i)], dir_fd=self.dir_fd)

    async def _helper_lane(self) -> None:
        try:
            async with self.offload.borrowed() as helper:
                if helper is None:
                    return
                while (i := await self._queue.get()) is not None:
                    self._times[i] = await helper.call(
                        _TIMES, [self._unit(i)], (), {}, passed={"dir_fd": self.dir_fd}
                    )
        except HelperDied as e:
            log.warning("%s; reading the glob's times in a thread instead", e)

    async def finish(self) -> list[bytes]:
        """The whole listing in modification order, as ``rg --files --null`` output in one
        buffer (rg has exited: nothing more is fed)."""
        if self._cut_at < len(self._raw):
            self._cut(final=True)
        for _ in self._lanes:
            self._queue.put_nowait(None)
        try:
            await asyncio.gather(*self._lanes)
        finally:
            for lane in self._lanes:
                lane.cancel()  # the others, when one failed
            self._lanes.clear()
        return await in_thread(self._ordered, dir_fd=self.dir_fd)

    async def discard(self) -> None:
        """Stop the lanes once each has read its unit in hand (a few ms: its helper stays
        usable), or at once should this be cancelled (a helper stopped mid-request is not
        reused); what was fed is dropped."""
        while not self._queue.empty():
            self._queue.get_nowait()
        for _ in self._lanes:
            self._queue.put_nowait(None)
        try:
            await asyncio.gather(*self._lanes, return_exceptions=True)
        finally:
            for lane in self._lanes:
                lane.cancel()
            self._lanes.clear()
            self._raw = bytearray()
            self._units.clear()
            self._times.clear()

    def _ordered(self, *, dir_fd: int) -> list[bytes]:
        """In a thread: the times a dead helper left unread (beneath ``dir_fd``), then the
        sorted listing."""
        parts = [
            got if got is not None else times([self._unit(i)], dir_fd=dir_fd)
            for i, got in enumerate(self._times)
        ]
        self._times.clear()
        # One array of the times, each unit's dropped once copied in: they are never held
        # twice, and nothing of them is left once the order is taken.
        mtimes = np.empty(sum(map(len, parts)) // 8, dtype=np.int64)
        at = 0
        for i, got in enumerate(parts):
            parts[i] = b""
            mtimes[at : at + len(got) // 8] = np.frombuffer(got, dtype=np.int64)
            at += len(got) // 8
        order = np.argsort(mtimes, kind="stable")
        del mtimes
        raw, self._raw = self._raw, bytearray()
        self._units.clear()
        if not raw:
            return []
        if not raw.endswith(b"\0"):
            raw += b"\0"  # a last name rg did not end (its time was read all the same)
        ordered = in_order(raw, order)
        # One bytearray: the glob digest takes it as its names buffer, with no copy.
        return cast("list[bytes]", [ordered])


async def in_thread(job: Callable[..., _T], *args: Any, dir_fd: int) -> _T:
    """``job(*args, dir_fd=...)`` in a thread, beneath a descriptor of its own (a ``dup``
    of ``dir_fd``): cancelled, the thread goes on until the job is done, and by then the
    caller's descriptor may be closed and its number another call's tree; the thread's own
    one still names this one. Closed when the job ends, or here when it never started."""
    lease = _Lease(os.dup(dir_fd))

    def run() -> _T:
        fd = lease.take()
        if fd is None:
            raise asyncio.CancelledError  # abandoned before it started
        try:
            return job(*args, dir_fd=fd)
        finally:
            os.close(fd)

    try:
        return await asyncio.to_thread(run)
    except asyncio.CancelledError:
        lease.abandon()
        raise


class _Lease:
    """A descriptor handed to a thread, or closed by its owner if the thread never takes it."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd
        self._lock = threading.Lock()

    def take(self) -> int | None:
        with self._lock:
            fd, self._fd = self._fd, None
            return fd

    def abandon(self) -> None:
        fd = self.take()
        if fd is not None:
            os.close(fd)


def in_order(raw: bytearray, order: np.ndarray) -> bytearray:
    """Pure: the NUL-terminated names of ``raw`` in ``order`` (the indices of the names, one
    each: a stable argsort of their times), in a new buffer.

    Beside the two buffers and the order: where each name starts (4 bytes a name), and per
    block of names gathered an index of 8 bytes a byte.
    """
    count = len(order)
    buf = np.frombuffer(raw, dtype=np.uint8)
    # Where each name starts, and (last) where the listing ends: name i is
    # ``buf[starts[i] : starts[i + 1]]``, its NUL included.
    starts = np.empty(count + 1, dtype=np.int32)
    starts[0] = 0
    found = 0
    for window in range(0, len(buf), _WINDOW):  # the comparison's array stays small
        nuls = np.flatnonzero(buf[window : window + _WINDOW] == 0)
        if found + len(nuls) > count:
            raise ValueError(f"more names than the {count} ordered")
        starts[found + 1 : found + 1 + len(nuls)] = nuls + (window + 1)
        found += len(nuls)
    if found != count:
        raise ValueError(f"{found} names but {count} ordered")
    out = bytearray(len(buf))
    view = np.frombuffer(out, dtype=np.uint8)
    at = 0
    for first in range(0, count, _GATHER_NAMES):
        picked = order[first : first + _GATHER_NAMES]
        begin = starts[picked]
        sizes = starts[picked + 1] - begin
        size = int(sizes.sum())
        # Each output byte's place in ``buf``: its name's start plus its offset in the name.
        offsets = np.cumsum(sizes, dtype=np.int64) - sizes
        view[at : at + size] = buf[np.repeat(begin - offsets, sizes) + np.arange(size)]
        at += size
    del view
    return out
