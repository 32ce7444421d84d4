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
    """Pids of the digest helper processes ``pid`` started (``fs_search.activities.results._helper``)."""
    helpers: list[int] = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if "fs_search.activities.results._helper" in child.cmdline():
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


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (every thread's ``/proc/<pid>/task/<tid>/children``)."""
    found: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                found.extend(int(x) for x in f.read().split())
        except OSError:
            continue
    return found


def _boot_wall() -> float:
    """The wall-clock time of boot, as /proc's start times count from it."""
    return time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)


def started_at(pid: int, boot_wall: float) -> float | None:
    """When ``pid`` started, wall clock (``starttime`` of /proc/<pid>/stat, 1/CLK_TCK s)."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    return boot_wall + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def cmdline(pid: int) -> list[str]:
    """The argv of ``pid`` (empty once it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


@dataclass
class ChildRun:
    """One child process seen by :class:`ChildWatcher` (times are wall clock)."""

    argv: list[str]
    started: float
    last_seen: float


class ChildWatcher:
    """Watches a process's children and grandchildren from a thread every ``interval`` seconds: each
    child's argv, its start (from /proc, to a clock tick) and when it was last seen alive."""

    def __init__(self, pid: int, interval: float = 0.005) -> None:
        self._pid = pid
        self._interval = interval
        self._boot = _boot_wall()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="child-watcher", daemon=True)
        self.runs: dict[tuple[int, float], ChildRun] = {}

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.time()
            for pid in children(self._pid):
                self._see(pid, now)
                # rg is forked by the worker's launch server: a grandchild.
                for grandchild in children(pid):
                    self._see(grandchild, now)
            self._stop.wait(self._interval)

    def _see(self, pid: int, now: float) -> None:
        started = started_at(pid, self._boot)
        if started is None:
            return
        # Read every time: a child seen between fork and exec still shows our argv.
        argv = cmdline(pid)
        if not argv:
            return
        run = self.runs.setdefault((pid, started), ChildRun(argv, started, now))
        run.argv = argv
        run.last_seen = now

    def __enter__(self) -> ChildWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
