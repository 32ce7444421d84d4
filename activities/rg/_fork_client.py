"""The worker's side of the fork server (``_fork_server.py``) that starts every sandboxed rg.

One :class:`ForkServerClient` per executor starts the fork server (stdlib only, ``python -I
-S``) on first use, with ``os.posix_spawn`` (nothing of the multi-threaded worker runs
between its fork and exec), in its own session, holding one end of a ``SOCK_SEQPACKET``
socket pair. Each run sends the argv, the environment, the niceness and the budget plus the
descriptors (rg's stdout and stderr sockets, the directory it runs in, the tree it may read);
the server starts rg confined (``_fork_child.py``), answers with the pid (rg's process
group) and a pidfd of it, kills the group at the budget (the backstop), and reports the
exit. The worker reads the outputs itself and may signal the group at any time.

The server dies with the worker (``PR_SET_PDEATHSIG``), killing its children first; if it
exits for any other reason, the worker kills the rg processes in flight through their
pidfds (no pid it did not start can be hit), those runs end, and the next run starts a new
server.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import itertools
import json
import logging
import os
import signal
import socket
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fs_search.activities._shown import escaped
from fs_search.activities.rg._sandbox import FORK_CHILD, Sandbox

log = logging.getLogger(__name__)

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_fork_server.py")
# Where the server finds its end of the socket pair.
_SERVER_FD = 3
_SERVER_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LC_ALL": "C"}
# The longest line of the server's stderr logged (the rest of it is its own lines).
_ERROR_LINE = 2000


@dataclass(frozen=True)
class Failure:
    """Why a child never became rg: its stage (``chdir``, ``sandbox``, ``exec``, ``setup``,
    ``spawn`` or ``server``), the errno (0: none) and the message (for the log)."""

    stage: str
    errno: int
    message: str


class ForkError(Exception):
    """rg could not be started (no process to wait for)."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(f"{failure.stage}: {failure.message}")
        self.failure = failure


@dataclass
class _Pending:
    pid: asyncio.Future[int | None]
    exit: asyncio.Future[tuple[int, Failure | None]]
    pidfd: int | None = None  # rg's, from the server with its pid, until its exit is known

    def forget(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


@dataclass(eq=False)
class Forked:
    """A process the server started, as the executor reads it (an asyncio ``Process``'s
    ``pid``, ``stdout``, ``stderr``, ``wait()`` and ``returncode``)."""

    pid: int
    stdout: asyncio.StreamReader
    stderr: asyncio.StreamReader
    _exit: asyncio.Future[tuple[int, Failure | None]]
    _transports: list[asyncio.BaseTransport] = field(default_factory=list)

    @property
    def returncode(self) -> int | None:
        """The exit code once reaped (negative: killed by that signal), else None."""
        if not self._exit.done() or self._exit.cancelled():
            return None
        return self._exit.result()[0]

    @property
    def failure(self) -> Failure | None:
        """Why the child failed before exec, once reaped (None: it ran rg)."""
        if not self._exit.done() or self._exit.cancelled():
            return None
        return self._exit.result()[1]

    async def wait(self) -> int:
        """The exit code, once the server has reaped the process."""
        code, _ = await asyncio.shield(self._exit)
        return code


class _Connection:
    """One running server: its pid, socket, and the runs waiting for its answers."""

    def __init__(self, sandbox: Sandbox, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.pending: dict[int, _Pending] = {}
        self.ids = itertools.count(1)
        self.alive = True
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # The server's own stderr: a pipe this process reads and logs, line by line, cut
        # (its stdout: /dev/null). It never writes into the worker's log directly.
        errors_r, errors_w = os.pipe2(os.O_CLOEXEC)
        try:
            argv = [sandbox.python, "-I", "-S", SERVER, *_options(sandbox)]
            # dup2 onto the same number would keep close-on-exec: never the same number.
            source = theirs.fileno() if theirs.fileno() != _SERVER_FD else os.dup(theirs.fileno())
            try:
                self.pid = os.posix_spawn(
                    argv[0],
                    argv,
                    _SERVER_ENV,
                    file_actions=[
                        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                        (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                        (os.POSIX_SPAWN_DUP2, errors_w, 2),
                        (os.POSIX_SPAWN_DUP2, source, _SERVER_FD),
                    ],
                    setsid=True,
                )
            finally:
                if source != theirs.fileno():
                    os.close(source)
        except BaseException:
            ours.close()
            os.close(errors_r)
            raise
        finally:
            theirs.close()
            os.close(errors_w)
        self.sock = ours
        threading.Thread(
            target=_log_errors,
            args=(errors_r, self.pid),
            name="fs-search-fork-server-errors",
            daemon=True,
        ).start()
        ours.setblocking(False)
        # Reaped by a thread of its own (asyncio's child watchers know only their own).
        threading.Thread(
            target=_reap, args=(self.pid,), name="fs-search-fork-server-reaper", daemon=True
        ).start()
        loop.add_reader(ours.fileno(), self._readable)
        weakref.finalize(self, ours.close)

    def send(self, message: dict[str, object], argv: Sequence[str], fds: Sequence[int]) -> _Pending:
        """Send one request (a JSON line, then the argv as NUL-separated bytes, encoded as
        ``subprocess`` encodes an argv); its pending answers."""
        rid = next(self.ids)
        pending = _Pending(self.loop.create_future(), self.loop.create_future())
        head = json.dumps({"id": rid, **message}).encode()
        data = head + b"\n" + b"\0".join(os.fsencode(arg) for arg in argv)
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
        self.sock.sendmsg([data], ancillary)
        self.pending[rid] = pending
        return pending

    def _readable(self) -> None:
        while True:
            try:
                data, ancdata, _, _ = self.sock.recvmsg(
                    65536, socket.CMSG_SPACE(4), socket.MSG_CMSG_CLOEXEC
                )
            except BlockingIOError:
                return
            except OSError:
                data, ancdata = b"", []
            fds: list[int] = []
            for level, kind, payload in ancdata:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    usable = len(payload) - len(payload) % 4
                    fds.extend(memoryview(payload)[:usable].cast("i"))
            if not data:
                for fd in fds:
                    os.close(fd)
                self._lost()
                return
            self._answer(json.loads(data), fds)

    def _answer(self, message: dict[str, object], fds: list[int]) -> None:
        rid = message.get("id")
        pending = self.pending.get(rid) if isinstance(rid, int) else None
        if pending is None or not isinstance(rid, int):
            for fd in fds:
                os.close(fd)
            log.error("the fork server answered an unknown request: %r", message)
            return
        if "pid" in message:
            pid = message["pid"]
            if not pending.pid.done() and isinstance(pid, int):
                pending.pidfd, fds = (fds[0], fds[1:]) if fds else (None, fds)
                pending.pid.set_result(pid)
            for fd in fds:
                os.close(fd)
            return
        for fd in fds:
            os.close(fd)
        pending.forget()
        del self.pending[rid]
        code = message.get("exit")
        raw = message.get("failure")
        failure = Failure(str(raw[0]), int(raw[1]), str(raw[2])) if isinstance(raw, list) else None
        if not pending.pid.done():
            pending.pid.set_result(None)
        if not pending.exit.done():
            pending.exit.set_result((code if isinstance(code, int) else -signal.SIGKILL, failure))

    def _lost(self) -> None:
        """The server has gone: the rg processes it started and had not reaped are killed
        here, through their pidfds."""
        if not self.alive:
            return
        self.alive = False
        with contextlib.suppress(Exception):
            self.loop.remove_reader(self.sock.fileno())
        self.sock.close()
        gone = Failure("server", 0, "the fork server exited")
        for pending in self.pending.values():
            # A started rg is killed with the server (reported as SIGKILLed); one not yet
            # started never will be.
            started = pending.pid.done()
            if pending.pidfd is not None:
                with contextlib.suppress(OSError):
                    signal.pidfd_send_signal(pending.pidfd, signal.SIGKILL)
            pending.forget()
            if not started:
                pending.pid.set_result(None)
            if not pending.exit.done():
                pending.exit.set_result((-signal.SIGKILL, None if started else gone))
        self.pending.clear()
        log.warning(
            "the rg fork server (pid %d) exited; a new one starts on the next search", self.pid
        )

    def close(self) -> None:
        """Close the socket: the server kills its children and exits."""
        if self.alive:
            self.alive = False
            with contextlib.suppress(Exception):
                self.loop.remove_reader(self.sock.fileno())
            self.sock.close()
            for pending in self.pending.values():
                pending.forget()


class ForkServerClient:
    """Starts rg under ``sandbox`` through one fork server (started on first use, again if
    it exits or the event loop changes)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self._conn: _Connection | None = None

    @property
    def pid(self) -> int | None:
        """The running server's pid (None before the first run)."""
        return self._conn.pid if self._conn is not None and self._conn.alive else None

    def _connection(self) -> _Connection:
        loop = asyncio.get_running_loop()
        conn = self._conn
        if conn is None or not conn.alive or conn.loop is not loop:
            if conn is not None:
                conn.close()
            conn = self._conn = _Connection(self.sandbox, loop)
        return conn

    async def spawn(
        self,
        argv: Sequence[str],
        *,
        cwd: int,
        readable: Sequence[int],
        env: Mapping[str, str],
        deadline_s: float,
        nice: int = 0,
        limit: int = 2**16,
        pipe_bytes: int = 0,
    ) -> Forked:
        """Start ``argv`` in the directory open as ``cwd``, confined to reading beneath the
        directories open as ``readable``; the group is killed after ``deadline_s``.

        Raises:
            ForkError: the server could not fork (or has gone).
        """
        loop = asyncio.get_running_loop()
        conn = self._connection()
        out_r, out_w = _output_channel(pipe_bytes)
        err_r, err_w = _output_channel(0)
        message = {"env": dict(env), "nice": nice, "deadline_s": deadline_s}
        fds = [out_w, err_w, cwd, *readable]
        try:
            try:
                pending = conn.send(message, argv, fds)
            except (BrokenPipeError, ConnectionError):
                # The server went away since the last run (its end not seen yet): again,
                # through a new one.
                conn._lost()
                conn = self._connection()
                pending = conn.send(message, argv, fds)
        except BaseException:
            os.close(out_r)
            os.close(err_r)
            raise
        finally:
            os.close(out_w)
            os.close(err_w)
        stdout, out_t = await _reader(loop, out_r, limit)
        stderr, err_t = await _reader(loop, err_r, limit)
        transports = [out_t, err_t]
        try:
            pid = await asyncio.shield(pending.pid)
        except asyncio.CancelledError:
            # Cancelled before the pid came: the group dies as soon as it is known.
            pending.pid.add_done_callback(_kill_when_known)
            for transport in transports:
                transport.close()
            raise
        if pid is None:
            for transport in transports:
                transport.close()
            _, failure = pending.exit.result()
            raise ForkError(failure or Failure("spawn", 0, "no process"))
        return Forked(pid, stdout, stderr, pending.exit, transports)

    def close(self) -> None:
        """Stop the server (its children die with it)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _output_channel(buffer_bytes: int) -> tuple[int, int]:
    """``(read end, write end)`` for one of rg's outputs: a one-way Unix stream socket, not a
    pipe. An ignore file planted as a link to ``/dev/stdout`` (or ``/proc/self/fd/1``,
    ``/dev/stderr``...) makes rg open its own output for reading: a pipe opened again that
    way blocks rg on itself forever, while a socket cannot be opened (``ENXIO``), so rg
    treats that ignore file as unreadable and goes on. Both ends close on exec."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        ours.shutdown(socket.SHUT_WR)
        theirs.shutdown(socket.SHUT_RD)
        if buffer_bytes:
            # How much rg may write before it waits for us (the kernel caps it at
            # net.core.wmem_max); fewer, larger reads for output-heavy searches.
            with contextlib.suppress(OSError):
                theirs.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffer_bytes)
        return ours.detach(), theirs.detach()
    except BaseException:
        ours.close()
        theirs.close()
        raise


def _options(sandbox: Sandbox) -> list[str]:
    options = ["--parent", str(os.getpid()), "--socket", str(_SERVER_FD)]
    options += ["--child-module", FORK_CHILD, "--memory-mb", str(sandbox.memory_mb)]
    if sandbox.landlock_abi:
        options += ["--landlock-abi", str(sandbox.landlock_abi)]
        for path in sandbox.loader:
            options += ["--file", path]
    return options


async def _reader(
    loop: asyncio.AbstractEventLoop, fd: int, limit: int
) -> tuple[asyncio.StreamReader, asyncio.BaseTransport]:
    reader = asyncio.StreamReader(limit=limit, loop=loop)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop), os.fdopen(fd, "rb", buffering=0)
    )
    return reader, transport


def _kill_when_known(future: asyncio.Future[int | None]) -> None:
    if future.cancelled() or future.exception() is not None:
        return
    pid = future.result()
    if pid is not None:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)


def _log_errors(fd: int, pid: int) -> None:
    """Log what the fork server writes on its stderr (bounded lines, escaped) until it
    exits."""
    with os.fdopen(fd, "rb", buffering=0) as errors:
        for line in iter(lambda: errors.readline(_ERROR_LINE), b""):
            text = line.decode("utf-8", "replace").rstrip("\n")
            log.warning("the rg fork server (pid %d) says: %s", pid, escaped(text))


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, 0)
