"""A glob's listing put in modification order here, rather than by ``rg --sort=modified``.

``rg --sort=modified`` walks the tree on one thread, then reads every file's modification
time on that same thread (two thirds of its time on 100,000 files: a ``statx`` costs ~2 µs
here). Its order is the single-threaded walk's, sorted stably by time, with the files whose
time cannot be read last. So the glob runs rg with ``--threads=1`` and no sort, the times
are read here on two cores while rg walks (a thread and a digest helper, a unit of the
listing at a time: :mod:`._modified_order`), and the names are sorted stably by them: the
same order, sooner.

The times are read beneath the search root's held descriptor, never by a name from ``/``:
each directory of the listing is opened with :func:`~fs_search.activities._held_root.
open_beneath` (no symlink followed, nothing outside the tree), and each file is
``lstat``-ed in it. rg lists no symlink (it follows none), so an ``lstat`` reads what rg's
sort reads; a directory swapped for a symlink since the walk cannot be opened, and its
files go last, as files rg could not read.

:func:`times` does the reading (I/O, run in a thread or a helper; it imports nothing
heavy, as helpers load it).
"""

from __future__ import annotations

import array
import os

from fs_search.activities._held_root import open_beneath

# The time of a file that cannot be read: after every real time, as rg sorts them.
UNREADABLE = 2**63 - 1
# Directory descriptors kept open while reading one listing (a walk lists a directory's
# files together, mostly: a few are enough; all are closed when this many are open).
_OPEN_DIRS = 64


def names_of(chunks: list[bytes]) -> list[bytes]:
    """The NUL-terminated names of ``rg --files --null`` output (a last name without its
    NUL, from an interrupted rg, is kept)."""
    raw = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    names = raw.split(b"\0")
    if names and not names[-1]:
        names.pop()
    return names


def times(chunks: list[bytes], *, dir_fd: int) -> bytes:
    """The modification time (ns) of each name listed in ``chunks``, relative to the
    directory ``dir_fd``, as the bytes of an ``array('q')`` in listing order
    (:data:`UNREADABLE` where it cannot be read)."""
    got = array.array("q")
    append = got.append
    dirs: dict[bytes, int] = {}
    stat = os.stat
    try:
        for name in names_of(chunks):
            parent, slash, base = name.rpartition(b"/")
            if not slash:
                fd = dir_fd
            else:
                fd = dirs.get(parent, -2)
                if fd == -2:
                    if len(dirs) >= _OPEN_DIRS:
                        _close(dirs)
                    fd = dirs[parent] = _open_dir(dir_fd, parent)
            if fd < 0:
                append(UNREADABLE)
                continue
            try:
                append(stat(base, dir_fd=fd, follow_symlinks=False).st_mtime_ns)
            except (OSError, ValueError):
                append(UNREADABLE)
    finally:
        _close(dirs)
    return got.tobytes()


def _open_dir(dir_fd: int, parent: bytes) -> int:
    """A descriptor of ``parent`` beneath ``dir_fd``, or -1 when it cannot be opened
    there."""
    try:
        return open_beneath(dir_fd, os.fsdecode(parent))
    except (OSError, ValueError):
        return -1


def _close(dirs: dict[bytes, int]) -> None:
    for fd in dirs.values():
        if fd >= 0:
            os.close(fd)
    dirs.clear()
