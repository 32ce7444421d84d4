"""The fork server that starts every sandboxed rg (run as a script: stdlib only).

Started once per executor by :mod:`fs_search.activities.rg._fork_client` as
``python -I -S _fork_server.py --parent PID --socket FD --child-module PATH [options]``,
single-threaded, in its own session. For each request on its Unix socket (a JSON message
whose descriptors travel with it, ``SCM_RIGHTS``: rg's stdout and stderr sockets, the
directory it runs in, the tree it may read; the argv follows the JSON line as NUL-separated
bytes) it forks a child that:

- makes itself a process group of its own, dies with this server (``PR_SET_PDEATHSIG``),
- takes the request's niceness, stdin from /dev/null, stdout and stderr from the sockets,
- changes into the directory (the worker's held descriptor, never a name),
- limits itself (``_fork_child.limit``) and restricts itself with Landlock to reading
  beneath the tree (the ruleset built by the server before the fork,
  ``_fork_child.ruleset``; enforced in the child, ``_fork_child.enforce``),
- closes every other descriptor and execs rg with the request's argv and environment.

The server answers ``{"id", "pid"}`` once forked and ``{"id", "exit", "failure"}`` once
the child is reaped (``exit``: the exit code, negative for a signal; ``failure``: ``[stage,
errno, message]`` when the child failed before exec: ``chdir``, ``sandbox`` or ``exec``).
It kills a child's group with SIGKILL once the request's ``deadline_s`` has passed (the
backstop: it holds even while the worker is stuck). When the worker goes away (the socket
ends) it kills every child's group and exits; the kernel kills it (``PR_SET_PDEATHSIG``)
if the worker is SIGKILLed, and its children with it.

Options (besides the three above): ``--memory-mb N``, ``--landlock-abi N`` and ``--file
PATH`` (repeated): the sandbox's settings the child applies.
"""

from __future__ import annotations

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
import time
from dataclasses import dataclass
from types import ModuleType

_PR_SET_PDEATHSIG = 1
_MAX_MESSAGE = 1 << 20
_MAX_FDS = 8
# Exit codes of a child that failed before exec (the worker reads its ``failure``).
_SETUP_FAILED = 125
_EXEC_FAILED = 127


@dataclass
class _Child:
    rid: int
    pid: int
    pidfd: int
    status: int  # read end of the child's close-on-exec status pipe
    deadline: float
    killed: bool = False


def _load(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("fs_search_fork_child", path)
    if spec is None or spec.loader is None:
        raise OSError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Server:
    """The select loop: requests in, children forked, exits and deadlines handled."""

    def __init__(
        self,
        sock: socket.socket,
        child: ModuleType,
        *,
        memory_mb: int,
        abi: int,
        files: list[str],
    ) -> None:
        self.sock = sock
        self.child = child
        self.memory_mb = memory_mb
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
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.pid = os.getpid()

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
                else:
                    self._reap(key.data)
            self._expire()

    # --- requests --------------------------------------------------------------------

    def _request(self) -> bool:
        """Handle one message; False when the worker has gone."""
        try:
            data, ancdata, flags, _ = self.sock.recvmsg(
                _MAX_MESSAGE, socket.CMSG_SPACE(_MAX_FDS * 4)
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
            self._spawn(request, packed.split(b"\0"), fds)
        except (ValueError, KeyError, TypeError, IndexError, OSError) as e:
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
            # Built here, before the fork: in the child (copying the pages Python touches,
            # loading ctypes' functions) the same work took ~0.8 ms a search.
            try:
                ruleset = self.child.ruleset(self.abi, readable, self.files, os.fsdecode(argv[0]))
            except OSError as e:
                self._send({"id": rid, "exit": None, "failure": ["sandbox", e.errno or 0, str(e)]})
                return
        status_r, status_w = os.pipe2(os.O_CLOEXEC)
        try:
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child execs or exits
                self._child(argv, env, nice, stdout, stderr, cwd, ruleset, status_w)
            # Also here: the group exists once this returns, whatever the child has done.
            try:
                os.setpgid(pid, pid)
            except OSError:
                pass
        except BaseException:
            os.close(status_r)
            raise
        finally:
            os.close(status_w)
            if ruleset >= 0:
                os.close(ruleset)
        pidfd = os.pidfd_open(pid)
        child = _Child(rid=rid, pid=pid, pidfd=pidfd, status=status_r, deadline=deadline)
        self.children[pidfd] = child
        heapq.heappush(self.deadlines, (deadline, next(self.sequence), child))
        self.selector.register(pidfd, selectors.EVENT_READ, pidfd)
        self._send({"id": rid, "pid": pid})

    def _child(
        self,
        argv: list[bytes],
        env: dict[str, str],
        nice: int,
        stdout: int,
        stderr: int,
        cwd: int,
        ruleset: int,
        status: int,
    ) -> None:
        stage = "setup"
        code = _SETUP_FAILED
        try:
            os.setpgid(0, 0)
            if self.libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
            if os.getppid() != self.pid:  # the server died before the line above
                os._exit(code)
            if nice:
                os.setpriority(os.PRIO_PROCESS, 0, nice)
            os.dup2(self.devnull, 0)
            os.dup2(stdout, 1)
            os.dup2(stderr, 2)
            stage = "chdir"
            os.fchdir(cwd)
            stage = "sandbox"
            if self.memory_mb:
                self.child.limit(self.memory_mb)
            if ruleset >= 0:
                self.child.enforce(ruleset)
            # rg keeps nothing of ours: only 0-2 and the status pipe (closed by exec).
            limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            os.closerange(3, status)
            os.closerange(status + 1, limit)
            stage = "exec"
            code = _EXEC_FAILED
            os.execve(argv[0], argv, env)
        except BaseException as e:  # noqa: BLE001 - anything: report it, never return
            errno = getattr(e, "errno", 0) or 0
            message = f"{stage}\0{errno}\0{e}".encode("utf-8", "replace")[:4000]
            try:
                os.write(status, message)
            finally:
                os._exit(code)

    # --- exits and deadlines ---------------------------------------------------------

    def _reap(self, pidfd: int) -> None:
        child = self.children.pop(pidfd)
        self.selector.unregister(pidfd)
        _, status = os.waitpid(child.pid, 0)
        os.close(pidfd)
        failure = None
        try:
            os.set_blocking(child.status, False)
            report = os.read(child.status, 8192)
        except OSError:
            report = b""
        finally:
            os.close(child.status)
        if report:
            stage, errno, message = (report.split(b"\0", 2) + [b"", b""])[:3]
            failure = [
                stage.decode("utf-8", "replace"),
                int(errno or b"0"),
                message.decode("utf-8", "replace"),
            ]
        self._send({"id": child.rid, "exit": os.waitstatus_to_exitcode(status), "failure": failure})

    def _expire(self) -> None:
        now = time.monotonic()
        while self.deadlines and self.deadlines[0][0] <= now:
            _, _, child = heapq.heappop(self.deadlines)
            if self.children.get(child.pidfd) is child and not child.killed:
                child.killed = True
                _kill_group(child.pid)

    def _send(self, message: dict) -> None:
        try:
            self.sock.send(json.dumps(message).encode())
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
    libc = ctypes.CDLL(None, use_errno=True)
    # Die with the worker; if it is already gone, do not serve at all.
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        sys.exit(0)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sock = socket.socket(fileno=sock_fd)
    sock.setblocking(True)
    Server(sock, _load(module), memory_mb=memory_mb, abi=abi, files=files).serve()


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (OSError, ValueError) as e:
        sys.stderr.write(f"fs-search fork server: {e}\n")
        sys.exit(125)
