"""Run CPU-heavy digestion of rg output off the event loop, in helper processes when busy.

Parsing is pure Python, so threads share one core (the GIL). When several large grep
outputs are being digested at once, they go to helper processes instead
(``python -I -m fs_search.activities.results._helper``, our own subprocesses, each in its own
process group and gone when its stdin closes): concurrent searches then use every core
while the worker's event loop keeps heartbeating and serving Temporal. Small outputs and
every glob stay in a thread, where the hop costs less than shipping the bytes; a large grep
output digested alone is split: its second half parsed in a helper while a thread parses
the first.

A process serving many workspaces (``shared``) digests a large grep output in one helper
even when it is alone: split, it would take both cores (a helper, and a thread holding the
worker's interpreter lock) from every other workspace's calls in the process.

Helpers run isolated (``-I``: no PYTHONPATH, no user site, no script directory) in ``/``,
so nothing in the worker's working directory (a workspace, say) can shadow a module they
import.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ctypes
import fcntl
import functools
import logging
import os
import pickle
import signal
import socket
import sys
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from fs_search.activities.results._helper import (
    HEADER,
    JOBS,
    PASSED_FD,
    SPLITS,
    frame,
    job_name,
)

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

# Below this much raw output, a thread hop is cheaper than another process.
PROCESS_THRESHOLD_BYTES = 512 * 1024
# Below this much, the digest runs on the event loop itself (a few hundred microseconds at
# most): waking a thread and coming back costs more than that on a busy machine.
INLINE_THRESHOLD_BYTES = 32 * 1024
# From this much raw output, a job alone is split: half parsed in a helper, half in a thread.
SPLIT_THRESHOLD_BYTES = 4 * 1024 * 1024
# Allocations from this size are always served by mmap, so freeing them returns the memory.
MMAP_THRESHOLD_BYTES = 1024 * 1024
_M_MMAP_THRESHOLD = -3  # glibc's mallopt() parameter number
_IOV_MAX = 1024  # buffers one writev() takes at most (Linux)


def mmap_large_allocations(threshold: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Have glibc's malloc serve every allocation of ``threshold`` bytes or more with mmap.

    By default glibc raises that threshold after the first large free (up to 32 MiB), so
    later outputs, digests and artifacts come from the heap of whichever thread made them
    and stay resident after they are freed: a digest in one thread and a spill in another
    then held a large output several times over in RSS. Returns False where there is no
    glibc ``mallopt`` (the setting is process-wide and harmless to repeat).
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold))


def default_processes() -> int:
    """Helpers when none are configured: one per core up to 4; none on a single core."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return 0 if (cores or 1) < 2 else min(cores or 1, 4)


def halves(chunks: list[bytes], size: int) -> tuple[list[bytes], list[bytes]]:
    """``chunks`` (``size`` bytes in all) cut in two at the first line end past the middle
    (the tail is empty when there is none)."""
    at = size // 2
    for i, chunk in enumerate(chunks):
        if at < len(chunk):
            cut = chunk.find(b"\n", at) + 1
            if cut:
                head = [*chunks[:i], chunk[:cut]]
                rest = chunk[cut:]
                return head, ([rest] if rest else []) + chunks[i + 1 :]
        at = max(0, at - len(chunk))
    return chunks, []


class HelperDied(RuntimeError):
    """A helper process went away mid-request."""


class _Helper:
    """One helper process and its pipes; answers one request at a time.

    Requests go through its stdin, the raw output they digest through a pipe of its own
    (:attr:`data`, blocking), written by a thread in one ``writev``: the kernel copies it
    while the GIL is free, so a thread parsing meanwhile (the head of a split output) and
    the event loop are not held up.
    """

    def __init__(self, proc: asyncio.subprocess.Process, data: int, fds: socket.socket) -> None:
        self.proc = proc
        self.data = data  # the write end of the helper's data pipe
        self.fds = fds  # the socket descriptors go to the helper through
        self._lock = threading.Lock()
        self._writing = False  # a thread is writing to ``data``
        self._killed = False  # ``data`` is closed by kill(), or by the writer after it

    @classmethod
    async def start(cls) -> _Helper:
        read, write = os.pipe()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-I",
                "-m",
                "fs_search.activities.results._helper",
                str(read),
                str(theirs.fileno()),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                cwd="/",
                start_new_session=True,
                limit=1024 * 1024,
                pass_fds=(read, theirs.fileno()),
            )
        except BaseException:
            os.close(write)
            ours.close()
            raise
        finally:
            os.close(read)
            theirs.close()
        fds = [write]
        for pipe in (proc.stdin, proc.stdout):
            transport = getattr(pipe, "transport", None) or getattr(pipe, "_transport", None)
            fileobj = transport.get_extra_info("pipe") if transport is not None else None
            if fileobj is not None:
                fds.append(fileobj.fileno())
        if hasattr(fcntl, "F_SETPIPE_SZ"):
            for fd in fds:
                with contextlib.suppress(OSError, ValueError):
                    fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 1024 * 1024)
        return cls(proc, write, ours)

    def _write(self, chunks: list[bytes]) -> None:
        """Write ``chunks`` to the data pipe (in a thread: blocks until the helper has
        read all but the pipe's last megabyte)."""
        with self._lock:
            if self._killed:
                raise BrokenPipeError("digest helper killed")
            self._writing = True
        try:
            _write_all(self.data, chunks)
        finally:
            with self._lock:
                self._writing = False
                if self._killed:
                    os.close(self.data)

    async def call(
        self,
        name: str,
        chunks: list[bytes],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        sent: asyncio.Event | None = None,
        *,
        passed: dict[str, int] | None = None,
    ) -> Any:
        """The job's answer; ``passed``: keyword arguments that are descriptors, sent on
        the helper's socket (the helper gets them as its own)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            if passed:
                # A few bytes and descriptors into an empty socket buffer: never blocks.
                socket.send_fds(self.fds, [b"d"], list(passed.values()))
                kwargs = {**kwargs, **dict.fromkeys(passed, PASSED_FD)}
            self.proc.stdin.write(frame((name, args, kwargs)))
            self.proc.stdin.write(HEADER.pack(sum(len(c) for c in chunks)))
            await self.proc.stdin.drain()
            writing = asyncio.ensure_future(asyncio.to_thread(self._write, chunks))
            if sent is not None:
                sent.set()
            await writing
            header = await self.proc.stdout.readexactly(HEADER.size)
            body = await self.proc.stdout.readexactly(HEADER.unpack(header)[0])
        except (OSError, asyncio.IncompleteReadError) as e:  # its pipes or socket closed
            raise HelperDied(f"digest helper exited ({self.proc.returncode})") from e
        status, value = pickle.loads(body)
        if status == "error":
            raise cast(BaseException, value)
        return value

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with self._lock:
            if self._killed:
                return
            self._killed = True
            if not self._writing:  # else the writer closes it once its write fails
                os.close(self.data)
            self.fds.close()


def _write_all(fd: int, chunks: list[bytes]) -> None:
    """Write every chunk to the blocking ``fd`` (a ``writev`` or a few)."""
    views = [memoryview(chunk) for chunk in chunks if chunk]
    while views:
        written = os.writev(fd, views[:_IOV_MAX])
        while written:
            if written >= len(views[0]):
                written -= len(views.pop(0))
            else:
                views[0] = views[0][written:]
                written = 0


class Offload:
    """Where digestion runs: a thread for small outputs, a helper process for large ones.

    Creating one makes large allocations return to the OS when freed
    (:func:`mmap_large_allocations`), so RSS follows what digests hold.

    Args:
        processes: helper processes at most (0: always a thread). They start on demand.
        threshold: raw bytes from which work goes to a helper.
        inline_threshold: raw bytes below which work runs on the event loop (never more
            than ``threshold``).
        shared: the process serves many workspaces: a large job a helper can run goes to
            one helper, alone too (never split, never on a thread).
    """

    def __init__(
        self,
        processes: int,
        *,
        threshold: int = PROCESS_THRESHOLD_BYTES,
        split_threshold: int = SPLIT_THRESHOLD_BYTES,
        inline_threshold: int = INLINE_THRESHOLD_BYTES,
        shared: bool = False,
    ) -> None:
        mmap_large_allocations()
        self.processes = processes
        self.shared = shared
        self.threshold = threshold
        self.split_threshold = split_threshold
        self.inline_threshold = min(inline_threshold, threshold)
        self._idle: list[_Helper] = []
        self._in_flight = 0
        self._available: asyncio.Semaphore | None = None
        self._all: set[_Helper] = set()
        self._starting: asyncio.Future[bool] | None = None  # a helper started for later
        self._closed = False

    async def run(
        self,
        job: Callable[Concatenate[list[bytes], P], R],
        chunks: list[bytes],
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> R:
        """``job(chunks, *args, **kwargs)``: in a helper for a large output, else a thread
        (a tiny one on the event loop).

        A helper runs only jobs registered in :data:`_helper.JOBS` (found there by name: a
        grep digest); any other job (a glob digest) always runs in a thread. A lone job
        stays in a thread, except a large one that can be split (:data:`_helper.SPLITS`,
        from ``split_threshold`` bytes): the output's second half is then parsed in a
        helper while the first half is parsed in a thread, on two cores at once. Shipping
        a whole output to another process only pays off when digests would otherwise
        queue for the one core — or, in a ``shared`` process, always: there a large job
        goes to a helper whole, alone too, and keeps to one core.
        """
        size = sum(len(c) for c in chunks)
        if size < self.inline_threshold:
            return job(chunks, *args, **kwargs)
        self._in_flight += 1
        try:
            local = functools.partial(job, chunks, *args, **kwargs)
            name = job_name(job)
            alone = self._in_flight <= 1 and not self.shared
            if self.processes > 0 and alone and size >= self.split_threshold and name in SPLITS:
                head, tail = halves(chunks, size)
                if tail:
                    chunks.clear()  # handed over in two halves
                    return cast(R, await self._split(job, name, head, tail, args, kwargs))
            if self.processes <= 0 or alone or size < self.threshold or name not in JOBS:
                return await asyncio.to_thread(local)
            return cast(R, await self._in_helper(local, name, chunks, args, kwargs))
        finally:
            self._in_flight -= 1

    @contextlib.asynccontextmanager
    async def borrowed(self) -> AsyncIterator[_Helper | None]:
        """An idle helper lent for a run of requests (None when none is idle now: no
        waiting; one is started for next time if there may be more). It goes back to the
        pool when the block ends normally, and is stopped when it raises (a request may be
        half answered)."""
        if self._available is None:
            self._available = asyncio.Semaphore(self.processes)
        if self.processes <= 0 or not self._idle or self._available.locked():
            self._start_later()
            yield None
            return
        await self._available.acquire()  # at once: it is not locked
        helper = self._idle.pop()
        try:
            yield helper
        except BaseException:
            self._discard(helper)
            raise
        else:
            self._idle.append(helper)
        finally:
            self._available.release()

    async def _split(
        self,
        job: Callable[..., Any],
        name: str,
        head: list[bytes],
        tail: list[bytes],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        """A lone large job on two cores: its output's tail parsed in a helper while the job
        parses the head in a thread, then takes the tail's part (its ``rest`` argument)."""
        part = SPLITS[name]
        sent = asyncio.Event()
        remainder = asyncio.ensure_future(
            self._in_helper(
                functools.partial(part, tail, *args, **kwargs),
                job_name(part),
                tail,
                args,
                kwargs,
                sent=sent,
            )
        )
        handed: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def hand_over(task: asyncio.Future[Any]) -> None:
            if task.cancelled():
                handed.cancel()
            elif (error := task.exception()) is not None:
                handed.set_exception(error)
            else:
                handed.set_result(task.result())

        remainder.add_done_callback(hand_over)
        shipped = asyncio.ensure_future(sent.wait())
        try:
            # The head's parse starts once the tail's shipping has: its request through the
            # helper's stdin, its bytes through the data pipe by a thread of their own.
            await asyncio.wait([remainder, shipped], return_when=asyncio.FIRST_COMPLETED)
            return await asyncio.to_thread(job, head, *args, rest=handed.result, **kwargs)
        finally:
            shipped.cancel()
            if not remainder.done():
                remainder.cancel()  # the head failed or the call was cancelled

    async def _in_helper(
        self,
        local: Callable[[], Any],
        name: str,
        chunks: list[bytes],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        sent: asyncio.Event | None = None,
    ) -> Any:
        """The job in an idle helper (one started if none); in a thread if that fails.

        ``sent`` is set once the output is in the helper's pipe (or the job goes to a
        thread instead)."""
        if self._available is None:
            self._available = asyncio.Semaphore(self.processes)
        async with self._available:
            helper = self._idle.pop() if self._idle else None
            if helper is None:
                try:
                    helper = await _Helper.start()
                except OSError as e:
                    log.warning("cannot start a digest helper (%s); digesting in a thread", e)
                    if sent is not None:
                        sent.set()
                    return await asyncio.to_thread(local)
                self._all.add(helper)
            try:
                result = await helper.call(name, chunks, args, kwargs, sent)
            except HelperDied as e:
                log.warning("%s; digesting in a thread instead", e)
                self._discard(helper)
                if sent is not None:
                    sent.set()
                return await asyncio.to_thread(local)
            except asyncio.CancelledError:
                # Mid-request, its pipe holds a half-read answer: it cannot be reused.
                self._discard(helper)
                raise
            except BaseException:
                self._idle.append(helper)  # an error answered cleanly leaves it usable
                raise
            self._idle.append(helper)
            return result

    async def _start_one(self) -> bool:
        """One more idle helper, up to ``processes``; False when it could not be started
        (logged: large outputs then use a thread)."""
        try:
            helper = await _Helper.start()
        except OSError as e:
            log.warning("cannot start a digest helper (%s); large outputs use a thread", e)
            return False
        if self._closed or len(self._all) >= self.processes:
            helper.kill()  # shut down, or another start filled the pool meanwhile
        else:
            self._all.add(helper)
            self._idle.append(helper)
        return True

    def _start_later(self) -> None:
        """A helper started in the background for the next request (one at a time)."""
        if self._starting is None and len(self._all) < self.processes:
            self._starting = asyncio.ensure_future(self._start_one())
            self._starting.add_done_callback(lambda _: setattr(self, "_starting", None))

    async def warm(self) -> None:
        """Start the helpers ahead of the first large search (a worker calls this at start)."""
        while len(self._all) < self.processes and not self._closed:
            if not await self._start_one():
                return

    def _discard(self, helper: _Helper) -> None:
        helper.kill()
        self._all.discard(helper)

    @property
    def helper_pids(self) -> list[int]:
        """Process ids of the running helpers."""
        return [helper.proc.pid for helper in self._all]

    def shutdown(self) -> None:
        """Stop every helper process."""
        self._closed = True
        for helper in list(self._all):
            helper.kill()
        self._all.clear()
        self._idle.clear()
