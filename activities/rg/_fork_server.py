"""The fork server that starts every sandboxed rg (run as a script: stdlib only).

Started once per executor by :mod:`fs_search.activities.rg._fork_client` as
``python -I -S _fork_server.py --parent PID --socket FD --child-module PATH [options]``, in
its own session. For each request on its Unix socket (a JSON message whose descriptors travel
with it, ``SCM_RIGHTS``: rg's stdout and stderr sockets, the directory it runs in, the tree it
may read; the argv follows the JSON line as NUL-separated bytes) a thread of its own, started
for that request and gone after it:

- changes into the directory (the worker's held descriptor, never a name; the server has no
  use for its working directory, and spawns one rg at a time),
- takes the request's niceness (a thread's own, on Linux: its children inherit it),
- restricts itself with Landlock to reading beneath the tree (the ruleset built before,
  ``_fork_child.ruleset``; ``_fork_child.enforce`` sets ``no_new_privs`` and the ruleset on
  the calling thread only),
- and starts rg with ``posix_spawn`` (the kernel's vfork: no copy of the server's memory,
  ~1.5 ms less a search than a fork of it and an exec): in a process group of its own, stdin
  from /dev/null, stdout and stderr the sockets, nothing else open (every descriptor of the
  server closes on exec). rg inherits the thread's confinement, niceness and directory, and
  the server's resource limits (``_fork_child.limit``, set once for the whole server: it
  writes no file and needs little memory).

The server answers ``{"id", "pid"}`` with a pidfd of rg (the worker's handle on it should the
server die) once rg runs, ``{"id", "exit": None, "failure"}`` when it could not be started
(``failure``: ``[stage, errno, message]``, the stage ``chdir``, ``sandbox`` or ``exec``), and
``{"id", "exit", "failure": None}`` once rg is reaped (the exit code, negative for a signal).
It kills a child's group with SIGKILL once the request's ``deadline_s`` has passed (the
backstop: it holds even while the worker is stuck). When the worker goes away (the socket
ends, or the kernel's SIGTERM on the worker's death, ``PR_SET_PDEATHSIG``) it kills every
child's group and exits. Should the server itself be killed, the worker kills the rg
processes it was told of, through their pidfds.

Should both be killed at once (SIGKILL: neither can act), a **guard** kills rg: a fork of the
server made at its start (before any thread), in a session of its own, holding a pidfd of
the server and one of every rg the server starts (sent to it as each starts). The moment the
server has exited it kills every rg still running, through those pidfds, and exits. rg has
no parent-death signal (``posix_spawn`` cannot set one, and rg's parent is a thread that
ends at once); a fork and exec that could set it cost ~3 ms of CPU more per search than
``posix_spawn`` (measured: docs/performance-journal.md), the guard a message per search.

Options (besides the three above): ``--memory-mb N``, ``--landlock-abi N`` and ``--file
PATH`` (repeated): the sandbox's settings.
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import heapq
import importlib.util
import itertools
import json
import os
import resource
import selectors
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from types import ModuleType

_PR_SET_PDEATHSIG = 1
_MAX_MESSAGE = 1 << 20
_MAX_FDS = 8
# The stack of a request's thread: it makes a handful of calls.
_THREAD_STACK = 256 * 1024
_M_ARENA_MAX = -8  # glibc's mallopt() parameter number


@dataclass
class _Child:
    rid: int
    pid: int
    pidfd: int
    deadline: float
    killed: bool = False


class _Start:
    """One rg started from a thread of its own (``run``), which confines itself first."""

    def __init__(
        self,
        argv: list[bytes],
        env: dict[str, str],
        nice: int,
        stdout: int,
        stderr: int,
        cwd: int,
        ruleset: int,
    ) -> None:
        self.argv, self.env, self.nice = argv, env, nice
        self.stdout, self.stderr, self.cwd, self.ruleset = stdout, stderr, cwd, ruleset
        self.ruleset_closed = False
        self.pid: int | None = None
        self.failure: list[object] | None = None

    def run(self, child: ModuleType, devnull: int) -> None:
        stage = "chdir"
        try:
            os.fchdir(self.cwd)
            stage = "setup"
            if self.nice:
                os.setpriority(os.PRIO_PROCESS, 0, self.nice)  # this thread's, on Linux
            stage = "sandbox"
            if self.ruleset >= 0:
                self.ruleset_closed = True  # enforce() closes it, whatever happens
                child.enforce(self.ruleset)
            stage = "exec"
            self.pid = os.posix_spawn(
                self.argv[0],
                self.argv,
                self.env,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, devnull, 0),
                    (os.POSIX_SPAWN_DUP2, self.stdout, 1),
                    (os.POSIX_SPAWN_DUP2, self.stderr, 2),
                ],
                setpgroup=0,
                setsigmask=(),
                setsigdef=(signal.SIGXFSZ, signal.SIGTERM),
            )
        except BaseException as e:  # noqa: BLE001 - anything: report it
            self.failure = [stage, getattr(e, "errno", 0) or 0, str(e)[:4000]]


def _load(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("fs_search_fork_child", path)
    if spec is None or spec.loader is None:
        raise OSError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Server:
    """The select loop: requests in, children started, exits and deadlines handled."""

    def __init__(
        self,
        sock: socket.socket,
        child: ModuleType,
        *,
        abi: int,
        files: list[str],
    ) -> None:
        self.sock = sock
        self.child = child
        self.abi = abi
        self.files = files
        self.children: dict[int, _Child] = {}  # by pidfd
        # (when, sequence, child): a reaped child's entry stays until it expires, and its
        # pidfd's number may by then be another child's: expiry checks the child itself.
        self.deadlines: list[tuple[float, int, _Child]] = []
        self.sequence = itertools.count()
        self.selector = selectors.DefaultSelector()
        self.selector.register(sock, selectors.EVENT_READ, None)
        self.devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        self.guard: _Guarded | None = None
        self._guard()

    def _guard(self) -> None:
        """Start the guard (module docstring), at start and again should it have died; only
        while no request's thread runs (a fork copies the calling thread alone)."""
        try:
            self.guard = _Guarded.start(self.devnull)
        except OSError as e:
            self.guard = None
            sys.stderr.write(f"fs-search fork server: no guard ({e})\n")
            return
        self.selector.register(self.guard.pidfd, selectors.EVENT_READ, _GUARD)

    def serve(self) -> None:
        while True:
            timeout = None
            if self.deadlines:
                timeout = max(0.0, self.deadlines[0][0] - time.monotonic())
            for key, _ in self.selector.select(timeout):
                if key.data is None:
                    if not self._request():
                        self._shutdown()
                        return
                elif key.data is _GUARD:
                    self._guard_gone()
                else:
                    self._reap(key.data)
            self._expire()

    # --- requests --------------------------------------------------------------------

    def _request(self) -> bool:
        """Handle one message; False when the worker has gone."""
        try:
            # Received descriptors close on exec: rg gets only what the spawn hands it.
            data, ancdata, flags, _ = self.sock.recvmsg(
                _MAX_MESSAGE, socket.CMSG_SPACE(_MAX_FDS * 4), socket.MSG_CMSG_CLOEXEC
            )
        except (ConnectionError, OSError):
            return False
        fds: list[int] = []
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                usable = len(payload) - len(payload) % 4
                fds.extend(memoryview(payload)[:usable].cast("i"))
        if not data and not fds:
            return False
        rid = None
        try:
            if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
                raise ValueError("request truncated")
            head, _, packed = data.partition(b"\n")
            request = json.loads(head)
            rid = request["id"]
            # The worker's death (SIGTERM) waits until this rg is known, to be killed too.
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
            try:
                self._spawn(request, packed.split(b"\0"), fds)
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        except (ValueError, KeyError, TypeError, IndexError, OSError, RuntimeError) as e:
            # RuntimeError: no thread could be started for the request.
            errno = getattr(e, "errno", 0) or 0
            self._send({"id": rid, "exit": None, "failure": ["spawn", errno, str(e)[:500]]})
        finally:
            for fd in fds:
                os.close(fd)
        return True

    def _spawn(self, request: dict, argv: list[bytes], fds: list[int]) -> None:
        rid = int(request["id"])
        env = {str(k): str(v) for k, v in request["env"].items()}
        nice = int(request.get("nice", 0))
        deadline = time.monotonic() + float(request["deadline_s"])
        stdout, stderr, cwd = fds[0], fds[1], fds[2]
        readable = fds[3:]
        ruleset = -1
        if self.abi:
            try:
                ruleset = self.child.ruleset(self.abi, readable, self.files, os.fsdecode(argv[0]))
            except OSError as e:
                self._send({"id": rid, "exit": None, "failure": ["sandbox", e.errno or 0, str(e)]})
                return
        start = _Start(argv, env, nice, stdout, stderr, cwd, ruleset)
        # A thread of its own: the confinement it takes on stays with it, not the server.
        thread = threading.Thread(target=start.run, args=(self.child, self.devnull))
        try:
            thread.start()
            thread.join()
        finally:
            if not start.ruleset_closed and ruleset >= 0:
                os.close(ruleset)
            # Holding no workspace's directory between runs.
            os.chdir("/")
        if start.pid is None:
            failure = start.failure or ["setup", 0, "rg was not started"]
            self._send({"id": rid, "exit": None, "failure": failure})
            return
        pid = start.pid
        pidfd = os.pidfd_open(pid)
        child = _Child(rid=rid, pid=pid, pidfd=pidfd, deadline=deadline)
        self.children[pidfd] = child
        heapq.heappush(self.deadlines, (deadline, next(self.sequence), child))
        self.selector.register(pidfd, selectors.EVENT_READ, pidfd)
        self._watched(pidfd)
        self._send({"id": rid, "pid": pid}, [pidfd])

    def _watched(self, pidfd: int) -> None:
        """The guard holds a pidfd of the new rg (a guard that died is started again)."""
        if self.guard is None:
            self._guard()
        if self.guard is not None and not self.guard.watch(pidfd):
            self._guard_gone()
            self._guard()
            if self.guard is not None:
                self.guard.watch(pidfd)

    def _guard_gone(self) -> None:
        if self.guard is not None:
            self.selector.unregister(self.guard.pidfd)
            self.guard.close()
            self.guard = None

    # --- exits and deadlines ---------------------------------------------------------

    def _reap(self, pidfd: int) -> None:
        child = self.children.pop(pidfd)
        self.selector.unregister(pidfd)
        _, status = os.waitpid(child.pid, 0)
        os.close(pidfd)
        self._send({"id": child.rid, "exit": os.waitstatus_to_exitcode(status), "failure": None})

    def _expire(self) -> None:
        now = time.monotonic()
        while self.deadlines and self.deadlines[0][0] <= now:
            _, _, child = heapq.heappop(self.deadlines)
            if self.children.get(child.pidfd) is child and not child.killed:
                child.killed = True
                _kill_group(child.pid)

    def _send(self, message: dict, fds: list[int] | None = None) -> None:
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
        try:
            self.sock.sendmsg([json.dumps(message).encode()], ancillary)
        except OSError:
            pass  # the worker is gone: the loop sees the socket end next

    def _shutdown(self) -> None:
        """The worker has gone: nothing it started may outlive it."""
        for child in self.children.values():
            _kill_group(child.pid)
        for child in self.children.values():
            try:
                os.waitpid(child.pid, 0)
            except OSError:
                pass


_GUARD = "guard"


class _Guarded:
    """The server's end of its guard: a socket the rg pidfds are sent on, the guard's pid."""

    def __init__(self, sock: socket.socket, pid: int, pidfd: int) -> None:
        self.sock, self.pid, self.pidfd = sock, pid, pidfd

    @classmethod
    def start(cls, devnull: int) -> _Guarded:
        """Fork the guard (the caller is the server's only thread)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        server = os.pidfd_open(os.getpid())
        try:
            pid = os.fork()
        except BaseException:
            ours.close()
            theirs.close()
            os.close(server)
            raise
        if pid == 0:  # the guard: never returns into the server's code
            code = 0
            try:
                ours.close()
                os.setsid()  # a kill of the server's group leaves the guard
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                for fd in (0, 1, 2):
                    os.dup2(devnull, fd)
                # Nothing of the server's stays open here (the worker's socket above all:
                # the worker must see it end when the server dies).
                keep = {0, 1, 2, theirs.fileno(), server}
                for name in os.listdir("/proc/self/fd"):
                    if int(name) not in keep:
                        with contextlib.suppress(OSError):
                            os.close(int(name))
                _guard(theirs, server)
            except BaseException:  # noqa: BLE001 - the guard's end, whatever happened
                code = 1
            os._exit(code)
        theirs.close()
        os.close(server)
        ours.setblocking(False)
        return cls(ours, pid, os.pidfd_open(pid))

    def watch(self, pidfd: int) -> bool:
        """Hand the guard a pidfd of a new rg; False when the guard has gone."""
        try:
            self.sock.sendmsg(
                [b"w"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [pidfd]))]
            )
        except OSError:
            return False
        return True

    def close(self) -> None:
        """Forget the guard (reaped if it has exited; it exits when its socket ends)."""
        self.sock.close()
        with contextlib.suppress(OSError):
            os.waitpid(self.pid, os.WNOHANG)
        os.close(self.pidfd)


def _guard(sock: socket.socket, server: int) -> None:
    """The guard's loop: hold each rg's pidfd until it exits; when the server has exited
    (its pidfd readable) or its socket ends, kill every rg still held, and return."""
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ, None)
    selector.register(server, selectors.EVENT_READ, _GUARD)
    held: set[int] = set()
    while True:
        for key, _ in selector.select():
            if key.data is _GUARD:
                return _kill_held(held)
            if key.data is None:
                try:
                    data, ancdata, _, _ = sock.recvmsg(16, socket.CMSG_SPACE(_MAX_FDS * 4))
                except OSError:
                    data, ancdata = b"", []
                fds = [
                    fd
                    for level, kind, payload in ancdata
                    if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS
                    for fd in memoryview(payload)[: len(payload) - len(payload) % 4].cast("i")
                ]
                if not data and not fds:
                    return _kill_held(held)
                for fd in fds:
                    held.add(fd)
                    selector.register(fd, selectors.EVENT_READ, fd)
            else:  # an rg exited
                selector.unregister(key.data)
                held.discard(key.data)
                os.close(key.data)


def _kill_held(held: set[int]) -> None:
    for fd in held:
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(fd, signal.SIGKILL)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def main(argv: list[str]) -> None:
    files: list[str] = []
    parent, sock_fd, memory_mb, abi, module = 0, -1, 0, 0, ""
    for flag, value in zip(argv[::2], argv[1::2], strict=True):
        if flag == "--parent":
            parent = int(value)
        elif flag == "--socket":
            sock_fd = int(value)
        elif flag == "--child-module":
            module = value
        elif flag == "--memory-mb":
            memory_mb = int(value)
        elif flag == "--landlock-abi":
            abi = int(value)
        elif flag == "--file":
            files.append(value)
        else:
            raise ValueError(f"unknown option {flag}")
    # Nothing the worker left open without close-on-exec stays here (rg starts from here).
    limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    os.closerange(3, sock_fd)
    os.closerange(sock_fd + 1, limit)
    libc = ctypes.CDLL(None, use_errno=True)
    # Told by the kernel when the worker dies (SIGTERM: handled, below); if the worker is
    # already gone, do not serve at all.
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:
        sys.exit(0)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sock = socket.socket(fileno=sock_fd)
    sock.set_inheritable(False)
    sock.setblocking(True)
    child = _load(module)
    # rg's limits, set on the server itself: every rg inherits them. The server writes no
    # file (a write to a log file would fail, not kill it: SIGXFSZ ignored here, rg gets it
    # back) and needs a few MB: one malloc arena, small thread stacks.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    libc.mallopt(_M_ARENA_MAX, 1)
    threading.stack_size(_THREAD_STACK)
    if memory_mb:
        child.limit(memory_mb)
    server = Server(sock, child, abi=abi, files=files)

    def worker_died(signum: int, frame: object) -> None:
        server._shutdown()
        os._exit(0)

    signal.signal(signal.SIGTERM, worker_died)
    server.serve()


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (OSError, ValueError) as e:
        sys.stderr.write(f"fs-search fork server: {e}\n")
        sys.exit(125)
