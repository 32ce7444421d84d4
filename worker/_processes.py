"""Service processes in their own process groups, always stopped by pid; free loopback ports."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

_handed_out: set[int] = set()


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now and this process has not handed out."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _handed_out:
            _handed_out.add(port)
            return port


class PortTaken(ValueError):
    """A port asked for explicitly is in use."""


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could listen on host:port now (bound as Go servers bind: with
    SO_REUSEADDR, so a closed connection's TIME_WAIT does not count as taken)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
            s.listen(1)
        except OSError:
            return False
    return True


def usual_port(asked: int | None, usual: int, *, option: str) -> tuple[int, str | None]:
    """``asked`` (which must be free), else ``usual`` when free, else a free port; and, when
    the usual port was taken, a sentence saying so.

    Raises:
        PortTaken: ``asked`` is in use (it was asked for: no other port will do).
    """
    if asked is not None:
        if not port_is_free(asked):
            raise PortTaken(f"{option} {asked}: the port is in use")
        return asked, None
    if port_is_free(usual):
        return usual, None
    port = free_port()
    return port, f"port {usual} is in use, so {option} is {port} (give {option} to choose)"


@dataclass
class ManagedProcess:
    """A service process in its own process group, always stoppable by its pid."""

    argv: Sequence[str]
    log_path: Path | None = None
    env: dict[str, str] | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, init=False)
    _log: IO[bytes] | None = field(default=None, init=False)

    def start(self) -> None:
        """Start the process (stdin from /dev/null, output to the log file or discarded)."""
        self._log = open(self.log_path, "ab") if self.log_path else None  # noqa: SIM115
        out = self._log if self._log else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            list(self.argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            env=self.env,
            start_new_session=True,
        )

    @property
    def pid(self) -> int | None:
        """The process id (and process group id)."""
        return self.proc.pid if self.proc else None

    def running(self) -> bool:
        """Whether the process is still alive."""
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM the group, wait up to ``timeout``, then SIGKILL it (some servers ignore TERM)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        if self._log:
            self._log.close()
            self._log = None


async def wait_for_port(host: str, port: int, *, timeout: float, proc: ManagedProcess) -> None:
    """Wait until something accepts connections on host:port (or the process died)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proc.running():
            raise RuntimeError(f"{proc.argv[0]} exited before it was ready (see {proc.log_path})")
        try:
            _, writer = await asyncio.open_connection(host, port)
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            return
        except OSError:
            await asyncio.sleep(0.05)
    raise TimeoutError(f"{proc.argv[0]} did not listen on {host}:{port} within {timeout:.0f} s")


def tail_of(path: Path | None, lines: int = 3) -> str:
    """The last ``lines`` lines of a log file on one line (for error messages)."""
    if path is None:
        return ""
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])[-1500:]
    except OSError:
        return ""
