"""A glob's listing put in modification order while rg is still walking.

rg walks with ``--threads=1`` and no sort (:mod:`._modified` says why that order, sorted
stably by time, is ``rg --sort=modified``'s). Its output comes here as it is read
(:meth:`ModifiedOrder.feed`, the executor's sink) into one buffer, and is handed out in
units of about :data:`UNIT_BYTES` ending at a name's end, whose files' times two lanes read
at once: a thread of the worker and, when one is idle, a digest helper (with the search
root's descriptor). So the walk and the reading of times overlap. Once rg is done
(:meth:`ModifiedOrder.finish`), the last units are read and the listing is sorted in a
thread with NumPy: a stable argsort of the times, then :func:`in_order`, which puts the
names in order in the listing's own buffer through a second one that is filled as the
first is emptied (the memory of what has been read is given back as it goes), so the
names are never held twice; beside them, a few integers a name.

A helper that dies leaves its unit to be read in a thread; an error in a thread is raised
from :meth:`~ModifiedOrder.finish`. :meth:`~ModifiedOrder.discard` stops the lanes (the call
failed or was cancelled).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import mmap
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
# Bytes gathered at a time (the gather's index is 4 bytes a byte).
_GATHER_BYTES = 32 * 1024
# Bytes of the listing read at a time, and searched for name ends at a time.
_WINDOW = 256 * 1024
# The sort's buckets (consecutive places in the sorted listing): about this many bytes of
# names each, and at least this many buckets (one is sorted at a time, beside the rest).
_BUCKET_BYTES = 64 * 1024
_MIN_BUCKETS = 16
_MAX_BUCKETS = 4096
# Names whose places are set at a time (the block's temporaries stay small).
_PLACE_BLOCK = 1 << 16
_TIMES = job_name(times)
_T = TypeVar("_T")


class ModifiedOrder:
    """One glob's listing (``rg --files --null`` output, fed as it comes) in modification
    order, the files' times read beneath ``dir_fd`` (held by the caller until
    :meth:`finish` or :meth:`discard` returns)."""

    def __init__(
        self, offload: Offload, dir_fd: int, *, unit: int = UNIT_BYTES, reserve: int = 0
    ) -> None:
        self.offload = offload
        self.dir_fd = dir_fd
        self.unit = unit
        # Everything fed: ``_raw[:_fed]``, in room for ``reserve`` bytes taken at once (its
        # memory is taken as it is written), so it never moves as it grows.
        self._raw = reserved(reserve)
        self._fed = 0
        self._cut_at = 0  # where the next unit starts in it
        self._units: list[tuple[int, int]] = []  # (start, stop) in ``_raw``
        self._times: list[bytes | None] = []
        self._queue: asyncio.Queue[int | None] = asyncio.Queue()
        self._lanes: list[asyncio.Task[None]] = []

    def feed(self, piece: bytes) -> None:
        """A piece of rg's output, as read (on the event loop)."""
        end = self._fed + len(piece)
        if end > len(self._raw):
            self._raw += bytes(end - len(self._raw))  # past the reserve
        self._raw[self._fed : end] = piece
        self._fed = end
        if end - self._cut_at >= self.unit:
            self._cut(final=False)

    def _cut(self, *, final: bool) -> None:
        """Units of what was fed since the last, each ending at a name's end (the last
        one wherever the output ends, when ``final``)."""
        raw = self._raw
        end = self._fed if final else raw.rfind(b"\0", self._cut_at, self._fed) + 1
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
        if len(self._lanes) == 1 and self._fed >= _HELPER_FROM_BYTES:
            self._lanes.append(asyncio.ensure_future(self._helper_lane()))

    def _unit(self, i: int) -> bytes:
        """A copy of unit ``i`` for a lane (taken on the event loop: the buffer keeps
        growing, so no view of it may be held)."""
        start, stop = self._units[i]
        return bytes(memoryview(self._raw)[start:stop])

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
        if self._cut_at < self._fed:
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
            self._fed = 0
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
        _trim()  # the units' times, freed
        order = np.argsort(mtimes, kind="stable")
        del mtimes
        places = places_of(order)
        del order
        _trim()  # the times and the argsort's arrays, freed
        raw, self._raw = self._raw, bytearray()
        del raw[self._fed :]  # the reserve's rest, never written, never taken
        self._units.clear()
        if not raw:
            return []
        if not raw.endswith(b"\0"):
            raw += b"\0"  # a last name rg did not end (its time was read all the same)
        ordered = in_order(raw, places)
        del places
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


_new_bytearray = ctypes.pythonapi.PyByteArray_FromStringAndSize
_new_bytearray.restype = ctypes.py_object
_new_bytearray.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)


def reserved(size: int) -> bytearray:
    """A bytearray of ``size`` bytes whose memory is taken only as it is written: its
    contents are undefined until then (``bytearray(size)`` writes zeros over all of it
    at once). Large ones are mapped apart (:func:`~._offload.mmap_large_allocations`),
    so their pages are the kernel's zero pages until written."""
    return cast(bytearray, _new_bytearray(None, size))


def places_of(order: np.ndarray) -> np.ndarray:
    """Pure: each name's place in the sorted listing (4 bytes a name), from ``order`` (the
    names' indices in sorted order: a stable argsort of their times)."""
    count = len(order)
    places = np.empty(count, dtype=np.int32 if count < 1 << 31 else np.int64)
    for first in range(0, count, _PLACE_BLOCK):
        block = order[first : first + _PLACE_BLOCK]
        places[block] = np.arange(first, first + len(block), dtype=places.dtype)
    return places


def in_order(raw: bytearray, places: np.ndarray) -> bytearray:
    """Pure: the NUL-terminated names of ``raw`` put at their ``places``
    (:func:`places_of`), in ``raw`` itself, which is returned.

    Never holds the names twice. The sorted listing is cut into buckets of consecutive
    places; a first pass reads ``raw`` a window at a time and copies each name to its
    bucket's part of a second buffer (each bucket's part is where its names go in the
    sorted listing: its bytes are counted beforehand), giving back the memory of what it
    has read; a second pass puts each bucket's names in order, from the second buffer
    into ``raw``, giving back the memory of the bucket. Beside the names: their places,
    their places again by bucket (4 bytes a name each), and a window's or a bucket's
    temporaries.
    """
    count = len(places)
    size = len(raw)
    if raw and not raw.endswith(b"\0"):
        raise ValueError("the listing does not end at a name's end")
    if not size:
        _bucket_bytes(raw, np.empty(0, dtype=np.uint8), places, 1, 1)  # checks the count
        return raw
    buf = np.frombuffer(raw, dtype=np.uint8)
    buckets = min(max(size // _BUCKET_BYTES, _MIN_BUCKETS), _MAX_BUCKETS, max(count, 1))
    per = -(-count // buckets)  # places a bucket holds
    ends = np.cumsum(_bucket_bytes(raw, buf, places, per, buckets)).tolist()
    at = [0, *ends[:-1]]  # where each bucket's next name goes
    # The second buffer: anonymous memory, taken as it is written and given back as it is
    # read (and not made of huge pages, as NumPy asks for its own large arrays).
    with mmap.mmap(-1, size) as memory:
        spread = np.frombuffer(memory, dtype=np.uint8)
        taken: list[list[np.ndarray]] = [[] for _ in range(buckets)]
        first = released = 0
        for start, end in _windows(raw):
            window = buf[start:end]
            starts = _starts(window)
            mine = places[first : first + len(starts) - 1]
            first += len(mine)
            bucket = (mine // per).astype(np.uint16)  # _MAX_BUCKETS fit
            by_bucket = np.argsort(bucket, kind="stable")  # a radix sort: linear
            gathered = np.empty(end - start, dtype=np.uint8)
            _gather(window, starts, by_bucket, gathered)
            mine = mine[by_bucket]
            counts = np.bincount(bucket, minlength=buckets)
            sizes = np.bincount(bucket, weights=np.diff(starts), minlength=buckets)
            present = np.flatnonzero(counts)
            lo = low = 0
            for b, n, nbytes in zip(
                present.tolist(), counts[present].tolist(), sizes[present].tolist(), strict=True
            ):
                high = low + int(nbytes)
                spread[at[b] : at[b] + high - low] = gathered[low:high]
                at[b] += high - low
                taken[b].append(mine[lo : lo + n])
                lo, low = lo + n, high
            released = _give_back(buf, released, end)
        begin = released = 0
        part = None
        for b in range(buckets):
            stop = ends[b]
            if taken[b]:
                local = np.concatenate(taken[b]) - b * per
                taken[b] = []
                order = np.empty(len(local), dtype=local.dtype)
                order[local] = np.arange(len(local), dtype=local.dtype)
                part = spread[begin:stop]
                _gather(part, _starts(part), order, buf[begin:stop])
                released = _give_back(spread, released, stop)
            begin = stop
        del spread, part  # the memory's views, before it is unmapped
    return raw


def _bucket_bytes(
    raw: bytearray, buf: np.ndarray, places: np.ndarray, per: int, buckets: int
) -> np.ndarray:
    """The bytes of the names each bucket holds (a bucket: ``per`` consecutive places),
    counted a window at a time; the names must be as many as the places."""
    count = len(places)
    sizes = np.zeros(buckets, dtype=np.int64)
    first = 0
    for start, end in _windows(raw):
        starts = _starts(buf[start:end])
        if first + len(starts) - 1 > count:
            raise ValueError(f"more names than the {count} ordered")
        bucket = places[first : first + len(starts) - 1] // per
        sizes += np.bincount(bucket, weights=np.diff(starts), minlength=buckets).astype(np.int64)
        first += len(starts) - 1
    if first != count:
        raise ValueError(f"{first} names but {count} ordered")
    return sizes


def _windows(raw: bytearray) -> list[tuple[int, int]]:
    """(start, end) spans of ``raw`` of about ``_WINDOW`` bytes, each ending just after a
    NUL (``raw`` ends with one)."""
    spans = []
    start, size = 0, len(raw)
    while start < size:
        end = raw.index(b"\0", min(start + _WINDOW, size) - 1) + 1
        spans.append((start, end))
        start = end
    return spans


def _starts(buf: np.ndarray) -> np.ndarray:
    """Where each NUL-terminated name of ``buf`` starts, and (last) where the names end:
    name i is ``buf[starts[i] : starts[i + 1]]``, its NUL included."""
    return np.concatenate(([0], np.flatnonzero(buf == 0) + 1))


def _gather(buf: np.ndarray, starts: np.ndarray, order: np.ndarray, out: np.ndarray) -> None:
    """The names of ``buf`` (split at ``starts``) in ``order``, written to ``out``."""
    count = len(order)
    # Names gathered at a time: about _GATHER_BYTES of them, by their average length.
    per = max(1, _GATHER_BYTES * count // max(int(starts[-1]), 1))
    index = np.int32 if len(buf) < 1 << 31 else np.int64  # a byte's place in ``buf``
    at = 0
    for first in range(0, count, per):
        picked = order[first : first + per]
        begin = starts[picked]
        sizes = starts[picked + 1] - begin
        ends = np.cumsum(sizes)
        size = int(ends[-1])
        # Each output byte's place in ``buf``: its name's start plus its offset in the name.
        places = np.repeat((begin - (ends - sizes)).astype(index), sizes)
        places += np.arange(size, dtype=index)
        np.take(buf, places, out=out[at : at + size])
        at += size


_libc = ctypes.CDLL(None, use_errno=True)


def _give_back(array: np.ndarray, start: int, end: int) -> int:
    """Give the memory of the whole pages of ``array[start:end]`` back to the kernel
    (``madvise(MADV_DONTNEED)``: they read as zeros until written again), for a part of a
    buffer that is read no more before being written. Returns where the pages given back
    end (the next call's ``start``: a page cut by ``end`` goes with the next part)."""
    address = array.ctypes.data
    first = -(-(address + start) // mmap.PAGESIZE) * mmap.PAGESIZE
    last = (address + end) // mmap.PAGESIZE * mmap.PAGESIZE
    if last <= first:
        return start
    _libc.madvise(ctypes.c_void_p(first), ctypes.c_size_t(last - first), mmap.MADV_DONTNEED)
    return last - address


def _trim() -> None:
    """Give back to the kernel the memory this thread's sort freed but its malloc arena
    kept (the sort's arrays of a few integers a name are each under the size that is
    mapped apart): the digest that follows runs in another thread, with its own arena."""
    with contextlib.suppress(AttributeError):
        _libc.malloc_trim(0)
