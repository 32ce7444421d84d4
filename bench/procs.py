"""Process helpers over /proc: group members, liveness, peak RSS, an RSS sampler."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

import psutil


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (state first), or None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return raw.rsplit(b")", 1)[1].decode().split()


def group_members(pgid: int) -> list[int]:
    """Pids whose process group is ``pgid`` (zombies included)."""
    members: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = _stat_fields(int(name))
        if fields is not None and int(fields[2]) == pgid:
            members.append(int(name))
    return members


def alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (killed but not yet reaped)."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def group_exists(pgid: int) -> bool:
    """Whether any process (zombies included) is still in the group."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class GroupEnd:
    """When a process group ended, as ``time.perf_counter()`` values."""

    dead: float
    """No member is alive any more (all killed; zombies may remain)."""
    reaped: float | None
    """No member exists at all (None: still zombies at the time limit)."""


def wait_group_end(pgid: int, members: list[int], *, timeout: float) -> GroupEnd:
    """Poll (1 ms) until every member is dead, then until the group is gone.

    Runs in a thread: it only reads /proc and sleeps, so it barely holds the GIL.

    Raises:
        TimeoutError: a member is still alive after ``timeout`` seconds.
    """
    deadline = time.perf_counter() + timeout
    watched = list(members) or [pgid]
    while any(alive(pid) for pid in watched):
        if time.perf_counter() > deadline:
            raise TimeoutError(f"process group {pgid} still alive after {timeout:.0f} s")
        time.sleep(0.001)
    dead = time.perf_counter()
    reaped: float | None = None
    while time.perf_counter() < deadline:
        if not group_exists(pgid):
            reaped = time.perf_counter()
            break
        time.sleep(0.001)
    return GroupEnd(dead=dead, reaped=reaped)


def status_kb(pid: int, key: str) -> int:
    """A ``kB`` value of /proc/<pid>/status, e.g. ``VmRSS`` or ``VmHWM``."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(f"{key} not in /proc/{pid}/status")


def digest_helpers(pid: int) -> list[int]:
    """Pids of the digest helper processes ``pid`` started (``fs_search.activities.helper``)."""
    helpers: list[int] = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if "fs_search.activities.helper" in child.cmdline():
                helpers.append(child.pid)
        except psutil.Error:
            continue
    return helpers


def reset_peak(pid: int) -> bool:
    """Reset ``VmHWM`` to the current RSS (``echo 5 > clear_refs``); False if not allowed."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


class RssSampler:
    """Samples a process's RSS every ``interval`` seconds in a thread; keeps the peak."""

    def __init__(self, pid: int, interval: float = 0.005) -> None:
        self._proc = psutil.Process(pid)
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self.peak = 0
        self.samples = 0

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                rss = self._proc.memory_info().rss
            except psutil.Error:
                return
            self.peak = max(self.peak, rss)
            self.samples += 1
            self._stop.wait(self._interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
