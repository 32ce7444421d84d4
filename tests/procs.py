"""Processes in tests: `fs-search worker` subprocesses, their rg children, RSS, liveness."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import psutil

from fs_search.worker._binaries import find_binary

FS_SEARCH = find_binary("fs-search") or "fs-search"
RG = os.path.realpath(find_binary("rg") or "rg")


class WorkerProcess:
    """A running `fs-search worker`; its stderr is drained into ``lines`` by a thread."""

    def __init__(
        self,
        ws: Path,
        address: str,
        workspace_id: str | None,
        *,
        env: dict[str, str] | None = None,
        args: tuple[str, ...] = ("--sample-over-cap-glob-results",),
        ready_timeout: float = 30.0,
        prefix: Sequence[str] = (),
    ) -> None:
        """``workspace_id`` None: serve every workspace under ``ws`` (--workspaces-root).

        ``prefix``: a command that runs the worker (say, ``setpriv`` dropping capabilities)."""
        full = {k: v for k, v in os.environ.items() if not k.startswith(("FS_SEARCH_", "OTEL_"))}
        full.update(env or {})
        self.proc = subprocess.Popen(
            [
                *prefix,
                FS_SEARCH,
                "worker",
                *(
                    ["--workspaces-root", str(ws)]
                    if workspace_id is None
                    else ["--workspace", str(ws), "--workspace-id", workspace_id]
                ),
                "--address",
                address,
                *args,
            ],
            env=full,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._ready = threading.Event()
        threading.Thread(target=self._drain, daemon=True).start()
        if not self._ready.wait(ready_timeout):
            self.kill()
            raise AssertionError("worker did not start:\n" + "".join(self.lines[-30:]))

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            if "polling task queue" in line or "serving the workspaces under" in line:
                self._ready.set()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss(self) -> int:
        return psutil.Process(self.pid).memory_info().rss

    def rg_processes(self) -> list[psutil.Process]:
        """rg processes started by this worker (through the `timeout` backstop)."""
        return [p for p in rg_processes() if _descends_from(p, self.pid)]

    def terminate(self, timeout: float = 30.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def log(self) -> str:
        return "".join(self.lines)


def without_dac_override() -> list[str] | None:
    """A command prefix that runs a program without the capabilities that let root ignore
    file permissions (so a directory's mode 000 holds for it too); [] when not root; None
    when root and ``setpriv`` is not available."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    caps = "-dac_override,-dac_read_search"
    return [setpriv, f"--bounding-set={caps}", f"--inh-caps={caps}", "--"]


def rg_processes(cwd_under: Path | None = None) -> list[psutil.Process]:
    """Live rg processes of this machine's ripgrep wheel (optionally only those searching a tree)."""
    found = []
    # Fresh Process objects, /proc read directly: psutil caches a process's exe, and rg
    # starts as a child of the fork server (python) that execs rg under the same pid, so a
    # cached (process_iter) object seen during the launch would never look like rg.
    for pid in psutil.pids():
        try:
            if os.readlink(f"/proc/{pid}/exe") != RG:
                continue
            p = psutil.Process(pid)
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            if cwd_under is not None and not os.readlink(f"/proc/{pid}/cwd").startswith(
                str(cwd_under)
            ):
                continue
            found.append(p)
        except (psutil.Error, OSError):
            continue
    return found


def alive(procs: Iterable[psutil.Process]) -> list[psutil.Process]:
    """Those of ``procs`` still running: the suite's one liveness check (zombies count as gone)."""

    def running(p: psutil.Process) -> bool:
        try:
            return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    return [p for p in procs if running(p)]


def group(pgid: int) -> list[psutil.Process]:
    """The processes of a process group (``alive(group(pgid))``: is any member left?)."""
    members = []
    for p in psutil.process_iter():
        try:
            if os.getpgid(p.pid) == pgid:
                members.append(p)
        except (OSError, psutil.Error):
            continue
    return members


def _descends_from(p: psutil.Process, ancestor: int) -> bool:
    try:
        return any(parent.pid == ancestor for parent in p.parents())
    except psutil.Error:
        return False


def wait_until(predicate, timeout: float, interval: float = 0.05) -> float:
    """Poll until ``predicate()`` is true; return the seconds it took (AssertionError on timeout)."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if predicate():
            return time.monotonic() - start
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s")


async def wait_for_rg(activities, timeout: float = 15.0) -> int:
    """The process group of the first rg ``activities`` start (AssertionError if none does)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        groups = activities.executor.live_process_groups
        if groups:
            return groups[0]
        await asyncio.sleep(0.02)
    raise AssertionError("rg never started")


def exe_of(p: psutil.Process) -> str:
    """The process's executable now (psutil caches exe(), which misses the fork child's exec)."""
    try:
        return os.readlink(f"/proc/{p.pid}/exe")
    except OSError:
        return ""
