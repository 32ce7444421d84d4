"""Which entries of a workspaces root changed, from the kernel's filesystem events (inotify).

A fleet (``worker/_fleet.py``) watches its root directory itself — one watch, not one per
workspace nor any inside a workspace's tree — for entries created, deleted or renamed in or
out (``IN_CREATE``, ``IN_DELETE``, ``IN_MOVED_FROM``, ``IN_MOVED_TO``). The watch is added
through the root's held descriptor (``/proc/self/fd/N``), so it is on the directory the
fleet holds, whatever its path names later. What this module hands on is *names*, never
verdicts: the fleet vets each named entry as its scan does (beneath the held root, a valid
id, a directory, not a link out of the root) before anything is attached.

The calls are made directly, through ``ctypes`` on libc's ``inotify_init1`` and
``inotify_add_watch`` (the same way ``activities/_held_root.py`` binds ``openat2``), and the
descriptor is read on the event loop (``loop.add_reader``): no thread, no dependency, and
the overflow of the kernel's queue is seen as such. The registry's wrappers were weighed:
``inotify-simple`` is these same few ctypes calls; ``asyncinotify`` queues an object per
event; ``watchdog`` runs its own thread with an unbounded queue; ``watchfiles`` (Rust
``notify``) is built for recursive watches and batches on its own timer.

Bounded under a flood: names coalesce in one set of at most ``max_pending``; past it, or
when the kernel's queue overflowed (``IN_Q_OVERFLOW``, after
``/proc/sys/fs/inotify/max_queued_events`` unread events, 16,384 by default), the names
are dropped and a rescan of the whole root is asked for instead. Dot-names (never a
workspace) are dropped as they are read.

Where events cannot be trusted (:func:`plan`): on a network or cluster filesystem (NFS, SMB,
FUSE, virtiofs, ...) the kernel reports the changes made through this machine only, so the
fleet also scans at its scan interval there; where a watch cannot be had at all (no
inotify, ``max_user_instances`` or ``max_user_watches`` reached) it scans only.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import functools
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_UNMOUNT = 0x00002000
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

# What the fleet watches: entries appearing or vanishing, and the root itself going away.
WATCHED = (
    IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR
)
_ENTRY = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO
_ROOT_LOST = {
    IN_DELETE_SELF: "the workspaces root was deleted",
    IN_MOVE_SELF: "the workspaces root was moved",
    IN_UNMOUNT: "the workspaces root's filesystem was unmounted",
    IN_IGNORED: "the kernel dropped the watch of the workspaces root",
}

_HEADER = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then the name
MAX_PENDING = 4096
_READ_BYTES = 64 * 1024
_READS_PER_WAKE = 16  # at most 1 MiB of events per loop turn: searches keep the loop too

EventsMode = Literal["auto", "on", "off"]
EVENTS_MODES: tuple[EventsMode, ...] = ("auto", "on", "off")

# Filesystems on which the kernel raises no event for a change made by another machine
# (or by the host of a virtual machine): network, cluster and FUSE filesystems.
EVENTS_BLIND = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "9p",
        "virtiofs",
        "ceph",
        "glusterfs",
        "lustre",
        "gpfs",
        "afs",
        "ocfs2",
        "gfs2",
        "beegfs",
        "orangefs",
        "pvfs2",
        "fuse",
        "fuseblk",
    }
)


class EventsUnavailable(Exception):
    """No watch can be had on the root (the reason is the message)."""


def parse(buffer: bytes) -> Iterator[tuple[int, str]]:
    """``(mask, name)`` of each ``struct inotify_event`` in ``buffer`` (what one read
    returns: whole events only); ``name`` is ``""`` for an event of the root itself."""
    offset, end = 0, len(buffer)
    while offset + _HEADER.size <= end:
        _wd, mask, _cookie, length = _HEADER.unpack_from(buffer, offset)
        offset += _HEADER.size
        raw = buffer[offset : offset + length].split(b"\0", 1)[0]
        offset += length
        yield mask, os.fsdecode(raw)


@dataclass(frozen=True)
class Changes:
    """What happened under the root since the last :meth:`RootEvents.take`.

    ``names``: entries created, deleted or renamed (to vet again); ``rescan``: events were
    lost (the kernel's queue overflowed, or more names than kept), scan the whole root;
    ``lost``: why the watch ended (the root deleted, moved, unmounted), or None;
    ``overflows``: kernel queue overflows among them."""

    names: frozenset[str] = frozenset()
    rescan: bool = False
    lost: str | None = None
    overflows: int = 0


class RootEvents:
    """An inotify watch of one directory: the names of its entries that changed, coalesced.

    Args:
        fd: an inotify descriptor with the watch added (closed with this object).
        max_pending: names kept between two :meth:`take` calls; past it, a rescan is asked.
    """

    def __init__(self, fd: int, *, max_pending: int = MAX_PENDING) -> None:
        self.fd = fd
        self.max_pending = max_pending
        self.changed = asyncio.Event()  # set while something waits to be taken
        self._names: set[str] = set()
        self._rescan = False
        self._overflows = 0
        self._lost: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.events = 0  # events read so far (all kinds)

    @classmethod
    def watch(cls, root_fd: int, *, max_pending: int = MAX_PENDING) -> RootEvents:
        """Watch the directory ``root_fd`` holds (an ``O_PATH`` descriptor will do).

        Raises:
            EventsUnavailable: no inotify here, or a limit of it reached."""
        libc = _libc()
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            raise EventsUnavailable(_failure("inotify_init1", ctypes.get_errno()))
        target = f"/proc/self/fd/{root_fd}"
        if libc.inotify_add_watch(fd, os.fsencode(target), WATCHED) < 0:
            code = ctypes.get_errno()
            os.close(fd)
            raise EventsUnavailable(_failure("inotify_add_watch", code))
        return cls(fd, max_pending=max_pending)

    def start(self) -> None:
        """Read events as they come, on the running event loop."""
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self.fd, self._readable)

    def close(self) -> None:
        if self.fd < 0:
            return
        if self._loop is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self.fd)
        os.close(self.fd)
        self.fd = -1

    def _readable(self) -> None:
        for _ in range(_READS_PER_WAKE):
            try:
                buffer = os.read(self.fd, _READ_BYTES)
            except BlockingIOError:
                return
            except OSError as e:
                self._lose(f"reading its events failed: {e}")
                return
            if not buffer:
                return
            self.feed(buffer)

    def feed(self, buffer: bytes) -> None:
        """Take in what one read returned."""
        for mask, name in parse(buffer):
            self.events += 1
            if mask & IN_Q_OVERFLOW:
                self._overflows += 1
                self._ask_rescan()
            elif mask & _ENTRY:
                if name and not name.startswith(".") and not self._rescan:
                    self._names.add(name)
                    if len(self._names) > self.max_pending:
                        self._ask_rescan()
            else:
                for bit, why in _ROOT_LOST.items():
                    if mask & bit:
                        self._lose(why)
                        break
                continue
            self.changed.set()

    def _ask_rescan(self) -> None:
        # Names gathered before are part of what the rescan sees: keep none.
        self._rescan = True
        self._names = set()
        self.changed.set()

    def _lose(self, why: str) -> None:
        if self._lost is None:
            self._lost = why
        if self._loop is not None and self.fd >= 0:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self.fd)
        self.changed.set()

    def take(self) -> Changes:
        """What changed since the last call (and clear it)."""
        changes = Changes(
            frozenset(self._names), self._rescan, self._lost, overflows=self._overflows
        )
        self._names = set()
        self._rescan = False
        self._overflows = 0
        if self._lost is None:
            self.changed.clear()
        return changes


def _failure(call: str, code: int) -> str:
    why = {
        errno.EMFILE: "the inotify instances per user are used up (fs.inotify.max_user_instances)",
        errno.ENOSPC: "the inotify watches per user are used up (fs.inotify.max_user_watches)",
        errno.ENOSYS: "this kernel has no inotify",
        errno.ENOMEM: "the kernel is out of memory for inotify",
    }.get(code, os.strerror(code))
    return f"{call} failed: {why}"


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.inotify_init1.argtypes = [ctypes.c_int]
    libc.inotify_init1.restype = ctypes.c_int
    libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    libc.inotify_add_watch.restype = ctypes.c_int
    return libc


# --- which filesystem, and what to do on it ----------------------------------------------


def filesystem_type(fd: int, path: str, mountinfo: str | None = None) -> str | None:
    """The filesystem type (``ext4``, ``nfs4``, ``fuse.sshfs``...) of the directory ``fd``
    holds at ``path``, read from ``/proc/self/mountinfo``; None when it cannot be told."""
    if mountinfo is None:
        try:
            with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
                mountinfo = f.read()
        except OSError:
            return None
    try:
        dev = os.fstat(fd).st_dev
    except OSError:
        return None
    return mount_type(mountinfo, f"{os.major(dev)}:{os.minor(dev)}", path)


def mount_type(mountinfo: str, device: str, path: str) -> str | None:
    """The type of the mount a directory is on: the last mount of its device (``major:minor``
    as ``st_dev`` gives it), else the longest mount point that is a prefix of ``path``."""
    by_device: str | None = None
    best: tuple[int, str] | None = None
    for line in mountinfo.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if not sep or len(fields) < 5 or not rest:
            continue
        point = _unescape(fields[4])
        if fields[2] == device:
            by_device = rest[0]
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= best[0]):
            best = (len(point), rest[0])
    if by_device is not None:
        return by_device
    return best[1] if best else None


def _unescape(field: str) -> str:
    """mountinfo's octal escapes (``\\040`` for a space)."""
    if "\\" not in field:
        return field
    return field.encode().decode("unicode_escape").encode("latin-1").decode(errors="replace")


def events_blind(fstype: str | None) -> bool:
    """Whether changes on this filesystem may come from elsewhere, unseen by inotify."""
    if fstype is None:
        return False
    return fstype in EVENTS_BLIND or fstype.startswith("fuse.")


@dataclass(frozen=True)
class Plan:
    """How the fleet learns of changes: ``events`` (an inotify watch), ``poll`` (a scan at
    the scan interval; else only the slow backstop), and why, for the log."""

    events: bool
    poll: bool
    why: str


def plan(mode: EventsMode, fstype: str | None) -> Plan:
    """``mode`` (``FS_SEARCH_ROOT_EVENTS``) on a root of filesystem type ``fstype``."""
    on = fstype or "an unknown filesystem"
    if mode == "off":
        return Plan(False, True, "FS_SEARCH_ROOT_EVENTS=off")
    if mode == "on" or not events_blind(fstype):
        return Plan(True, False, f"inotify on {on}")
    return Plan(
        True,
        True,
        f"{on}: changes made by other machines raise no event here (FS_SEARCH_ROOT_EVENTS=on "
        "trusts the events alone)",
    )
