"""Unblock an rg stuck opening a FIFO planted as an ignore file (Linux /proc).

rg opens every ``.ignore``/``.gitignore``/``.rgignore`` it walks past; opening a FIFO for
reading blocks until a writer appears, so a planted FIFO would hang every grep until its
budget ran out. While rg runs, :func:`watch_fifos` calls :func:`unblock_fifo_opens` now and
then: a thread of rg blocked in a FIFO open is found through ``/proc``, the path it is
opening is read from its memory, and — only if that path resolves, beneath the workspace's
held root, to a FIFO — the FIFO is opened for writing and closed at once, which hands rg an
empty file (end of input); a FIFO anywhere else gets rg's process group killed.

Which system call a thread sleeps in, and where its path argument is, depends on the
architecture (``openat`` is 257 on x86_64 but 56 on arm64, which has no ``open``): the table
below covers the ones we ship for, and on any other a blocked FIFO open is never touched
(the group is killed, and a grep runs again without ignore files).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import logging
import os
import platform
import signal
import stat
from collections.abc import Iterator, Mapping

from fs_search.activities._held_root import HeldRoot, Missing, Outside, Unresolvable

log = logging.getLogger(__name__)

# Kernel functions a FIFO open sleeps in (fs/pipe.c), as /proc/<pid>/task/<tid>/wchan names them.
_FIFO_WAITS = ("wait_for_partner", "fifo_open")
# The system calls that open a path, per architecture (`uname -m`): number -> (index of
# the directory descriptor argument, or None for the cwd; index of the path argument).
# From the kernel's syscall tables (arch/x86/entry/syscalls/syscall_64.tbl,
# include/uapi/asm-generic/unistd.h for arm64 and riscv64).
_AT = (0, 1)  # openat(dirfd, path, ...), openat2(dirfd, path, how, size)
Table = Mapping[int, tuple[int | None, int]]
OPEN_SYSCALLS: Mapping[str, Table] = {
    "x86_64": {2: (None, 0), 257: _AT, 437: _AT},
    "aarch64": {56: _AT, 437: _AT},
    "riscv64": {56: _AT, 437: _AT},
}
_ALIASES = {"amd64": "x86_64", "arm64": "aarch64"}
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


@functools.cache
def open_syscalls(machine: str | None = None) -> Table:
    """The path-opening system calls of ``machine`` (default: this one's); empty when
    unknown (then no blocked open is ever identified)."""
    machine = machine or platform.machine()
    table = OPEN_SYSCALLS.get(_ALIASES.get(machine, machine), {})
    if not table:
        log.warning("no system call table for %s: a FIFO rg blocks on is never unblocked", machine)
    return table


def blocked_open(
    syscall: str, table: Mapping[int, tuple[int | None, int]]
) -> tuple[int, int] | None:
    """Pure: ``(dirfd, path pointer)`` of a ``/proc/<pid>/task/<tid>/syscall`` line when it
    is a path-opening call of ``table``, else None."""
    fields = syscall.split()
    try:
        number = int(fields[0])
    except (IndexError, ValueError):
        return None
    where = table.get(number)
    if where is None:
        return None
    dirfd_at, path_at = where
    dirfd = _AT_FDCWD if dirfd_at is None else _signed_int(int(fields[1 + dirfd_at], 16))
    return dirfd, int(fields[1 + path_at], 16)


def blocked_fifo_opens(pid: int) -> tuple[list[str], int]:
    """Absolute paths the threads of ``pid`` are blocked opening as FIFOs, and how many
    blocked FIFO opens could not be identified."""
    found: list[str] = []
    unknown = 0
    table = open_syscalls()
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                if _read(f"/proc/{pid}/task/{task}/wchan") not in _FIFO_WAITS:
                    continue
                call = blocked_open(_read(f"/proc/{pid}/task/{task}/syscall"), table)
                if call is None:
                    unknown += 1
                    continue
                dirfd, pointer = call
                name = _read_c_string(pid, pointer)
                if not name.startswith("/"):
                    base = f"/proc/{pid}/cwd" if dirfd == _AT_FDCWD else f"/proc/{pid}/fd/{dirfd}"
                    name = os.path.join(os.readlink(base), name)
                found.append(name)
    return found, unknown


def unblock_fifo_opens(pid: int, tree: HeldRoot) -> list[str]:
    """Hand every FIFO inside ``tree`` that rg is blocked on an end of input.

    Returns:
        the blocked opens that could not be unblocked (not a FIFO inside the tree, or not
        identifiable on this architecture).
    """
    refused = []
    for process in process_tree(pid):
        paths, unknown = blocked_fifo_opens(process)
        refused += ["(an open this architecture's table does not know)"] * unknown
        for path in paths:
            try:
                found = tree.resolve(path)
            except (Outside, Unresolvable, Missing):
                refused.append(path)
                continue
            try:
                if not stat.S_ISFIFO(found.st.st_mode):
                    refused.append(path)
                    continue
                # Reopened through the kernel's link to what was resolved: never by name.
                fd = os.open(
                    f"/proc/self/fd/{found.fd}", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC
                )
                os.close(fd)
                log.warning("rg was blocked opening a FIFO in the workspace; gave it an empty file")
            except OSError as e:
                if e.errno != errno.ENXIO:  # ENXIO: no reader left, rg moved on by itself
                    refused.append(path)
            finally:
                found.close()
    return refused


async def watch_fifos(pid: int, tree: HeldRoot, *, interval_s: float = FIFO_CHECK_S) -> list[str]:
    """Until cancelled, unblock FIFO opens inside ``tree``; returns (killing the group)
    the paths of one it must not touch."""
    while True:
        await asyncio.sleep(interval_s)
        refused = await asyncio.to_thread(unblock_fifo_opens, pid, tree)
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
