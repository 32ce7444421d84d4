"""Unblock an rg stuck opening a FIFO planted as an ignore file (Linux /proc).

rg opens every ``.ignore``/``.gitignore``/``.rgignore`` it walks past; opening a FIFO for
reading blocks until a writer appears, so a planted FIFO would hang every grep until its
budget ran out. While rg runs, :func:`watch_fifos` calls :func:`unblock_fifo_opens` now and
then: a thread of rg blocked in a FIFO open is found through ``/proc``, the path it is
opening is read from its memory, and — only if that path resolves to a FIFO inside the
workspace — the FIFO is opened for writing and closed at once, which hands rg an empty file
(end of input); a FIFO anywhere else gets rg's process group killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import signal
import stat
from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)

# Kernel functions a FIFO open sleeps in (fs/pipe.c), as /proc/<pid>/task/<tid>/wchan names them.
_FIFO_WAITS = ("wait_for_partner", "fifo_open")
_OPEN_SYSCALLS = {2: "open", 257: "openat"}  # x86_64
_AT_FDCWD = -100
_PATH_MAX = 4096
# How often a running rg is checked for a thread blocked on a planted FIFO.
FIFO_CHECK_S = 0.25


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def process_tree(pid: int) -> Iterator[int]:
    """``pid`` and its descendants (the backstop's child is rg)."""
    seen = [pid]
    while seen:
        current = seen.pop()
        yield current
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{current}/task"):
                with contextlib.suppress(OSError):
                    seen += [int(c) for c in _read(f"/proc/{current}/task/{task}/children").split()]


def blocked_fifo_opens(pid: int) -> list[str]:
    """Absolute paths the threads of ``pid`` are blocked opening as FIFOs."""
    found = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                if _read(f"/proc/{pid}/task/{task}/wchan") not in _FIFO_WAITS:
                    continue
                fields = _read(f"/proc/{pid}/task/{task}/syscall").split()
                number = int(fields[0])
                if number not in _OPEN_SYSCALLS:
                    continue
                if number == 257:
                    dirfd, pointer = _signed_int(int(fields[1], 16)), int(fields[2], 16)
                else:
                    dirfd, pointer = _AT_FDCWD, int(fields[1], 16)
                name = _read_c_string(pid, pointer)
                if not name.startswith("/"):
                    base = f"/proc/{pid}/cwd" if dirfd == _AT_FDCWD else f"/proc/{pid}/fd/{dirfd}"
                    name = os.path.join(os.readlink(base), name)
                found.append(name)
    return found


def unblock_fifo_opens(pid: int, inside: Callable[[str], bool]) -> list[str]:
    """Hand every FIFO inside the workspace that rg is blocked on an end of input.

    Returns:
        the blocked paths that could not be unblocked (not a FIFO inside the workspace).
    """
    # Imported here: paths imports the error model, this module stays importable alone.
    from fs_search.activities.paths import Missing, Unresolvable, resolve_strict

    refused = []
    for process in process_tree(pid):
        for path in blocked_fifo_opens(process):
            try:
                real = resolve_strict("/", path)
                if not inside(real) or not stat.S_ISFIFO(os.lstat(real).st_mode):
                    refused.append(path)
                    continue
                fd = os.open(real, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
                os.close(fd)
                log.warning("rg was blocked opening a FIFO in the workspace; gave it an empty file")
            except OSError as e:
                if e.errno != errno.ENXIO:  # ENXIO: no reader left, rg moved on by itself
                    refused.append(path)
            except (Unresolvable, Missing):
                refused.append(path)
    return refused


async def watch_fifos(pid: int, workspace: str, *, interval_s: float = FIFO_CHECK_S) -> list[str]:
    """Until cancelled, unblock FIFO opens inside ``workspace``; returns (killing the group)
    the paths of one it must not touch."""
    root = workspace.rstrip("/") or "/"

    def inside(real: str) -> bool:
        return root == "/" or real == root or real.startswith(root + "/")

    while True:
        await asyncio.sleep(interval_s)
        refused = await asyncio.to_thread(unblock_fifo_opens, pid, inside)
        if refused:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            return refused


def _signed_int(value: int) -> int:
    """A C ``int`` argument as /proc shows it (its low 32 bits, unsigned) as a Python int."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _read_c_string(pid: int, pointer: int) -> str:
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        mem.seek(pointer)
        raw = mem.read(_PATH_MAX)
    return os.fsdecode(raw.split(b"\0", 1)[0])
