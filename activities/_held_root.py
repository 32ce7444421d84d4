"""A held root: a directory held open by descriptor, and paths looked up beneath it, never
by name from ``/``, never outside it.

A :class:`HeldRoot` holds an ``O_PATH`` descriptor of a directory (a workspace root, a
workspaces root) from the moment it is opened. Every lookup walks beneath that descriptor
one component at a time with ``openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)``: the kernel
follows no symlink on its own and refuses any result that is not below the held directory,
so a concurrent rename or symlink swap can change *which* file inside the tree a path names,
never make it name one outside. Symlinks are followed here, by reading them: a relative
target continues the walk, an absolute one is accepted only when it names the tree by one of
its own absolute names (checked as text, no lookup), and a ``..`` that would climb above the
tree ends the walk. Nothing outside the tree is ever looked up, so what exists out there
cannot change an answer.

Kernels without ``openat2`` (Linux < 5.6) walk with ``openat(O_NOFOLLOW)`` from the held
descriptor instead: no symlink is followed by the kernel either, but a directory moved out
of the tree during the walk is not noticed.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import shutil
import stat
import struct
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

_SYS_OPENAT2 = 437  # the same number on every architecture
_RESOLVE_NO_SYMLINKS = 0x04  # implies RESOLVE_NO_MAGICLINKS
_RESOLVE_BENEATH = 0x08
# The kernel's own limit on symlinks followed in one lookup (Linux MAXSYMLINKS).
MAX_SYMLINKS = 40
_O_PATH = os.O_PATH | os.O_CLOEXEC

Parts = tuple[str, ...]


class Outside(Exception):
    """The path leads outside the tree (by ``..``, an absolute name or a symlink)."""


class Unresolvable(Exception):
    """The path cannot be resolved inside the tree (a loop, a non-directory before the last
    component, a component that cannot be examined, a NUL, a name too long)."""


class Missing(Exception):
    """A component does not exist; ``parts`` is where the rest of the path points, as text
    (already known to stay inside the tree)."""

    def __init__(self, parts: Parts) -> None:
        super().__init__("/".join(parts))
        self.parts = parts


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def openat2(dirfd: int, path: str, flags: int, resolve: int) -> int:
    """``openat2(2)`` (Python 3.11 has no binding); raises OSError like ``os.open``."""
    how = struct.pack("=QQQ", flags, 0, resolve)
    fd = _libc().syscall(
        ctypes.c_long(_SYS_OPENAT2),
        ctypes.c_int(dirfd),
        ctypes.c_char_p(os.fsencode(path)),
        ctypes.c_char_p(how),
        ctypes.c_size_t(len(how)),
    )
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), path)
    return int(fd)


@functools.cache
def has_openat2() -> bool:
    """Whether this kernel has ``openat2`` (Linux >= 5.6)."""
    try:
        os.close(openat2(-100, "/", _O_PATH, _RESOLVE_BENEATH))  # AT_FDCWD
    except OSError as e:
        return e.errno != errno.ENOSYS
    return True


def _open_beneath(root: int, parts: Parts) -> int:
    """An ``O_PATH`` descriptor of ``parts`` below ``root``, following no symlink on the way
    (the last component itself may be one: the descriptor is then the link's own)."""
    flags = _O_PATH | os.O_NOFOLLOW
    if not parts:
        return os.dup(root)
    if has_openat2():
        return openat2(root, "/".join(parts), flags, _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS)
    fd = os.dup(root)
    try:
        for i, part in enumerate(parts):
            nxt = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = nxt
            if i < len(parts) - 1 and not stat.S_ISDIR(os.fstat(fd).st_mode):
                raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), part)
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_beneath(root: int, path: str) -> int:
    """An ``O_PATH`` descriptor of the relative ``path`` (``/``-separated) beneath ``root``,
    following no symlink on the way (the caller closes it).

    Raises:
        OSError: it cannot be opened there (a ``..`` component: ``EXDEV``).
    """
    parts = tuple(_components(path))
    if ".." in parts:
        raise OSError(errno.EXDEV, "a path beneath a held root has no '..'", path)
    return _open_beneath(root, parts)


def open_no_symlinks(path: str) -> int:
    """An ``O_PATH`` descriptor of the absolute, already resolved ``path``, looked up from
    ``/`` following no symlink at all (the caller closes it): a symlink as the last
    component gives the link's own descriptor (``S_ISLNK``), one before it fails.

    Raises:
        OSError: it cannot be opened (a symlink before the last component: ``ELOOP`` or
            ``ENOTDIR``).
    """
    top = os.open("/", _O_PATH)
    try:
        return _open_beneath(top, tuple(_components(path)))
    finally:
        os.close(top)


def _components(path: str) -> list[str]:
    return [c for c in path.split("/") if c and c != "."]


@dataclass
class Found:
    """A path resolved beneath a tree: its descriptor (``O_PATH``; the caller closes it),
    its physical components below the root, and its status."""

    fd: int
    parts: Parts
    st: os.stat_result

    def close(self) -> None:
        os.close(self.fd)


class HeldRoot:
    """A directory held open by descriptor; every lookup stays beneath it.

    Args:
        path: the directory (its real path is taken once, now).
        names: further absolute names by which callers may refer to it (say, the path an
            operator configured, before symlinks were resolved).

    Raises:
        OSError: the directory cannot be opened.
        NotADirectoryError: it is not a directory.
    """

    def __init__(self, path: str | os.PathLike[str], *, names: Iterable[str] = ()) -> None:
        real = os.path.realpath(path, strict=True)
        # O_NOFOLLOW: the name was resolved a moment ago; if it is a symlink now, refuse.
        fd = os.open(real, _O_PATH | os.O_NOFOLLOW)
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            os.close(fd)
            raise NotADirectoryError(errno.ENOTDIR, "not a directory", real)
        self._hold(fd, real, names)

    @classmethod
    def adopt(cls, fd: int, path: str, *, names: Iterable[str] = ()) -> HeldRoot:
        """A held root over ``fd``, a directory descriptor opened elsewhere (closed with it);
        ``path`` is its real path as the caller found it."""
        tree = cls.__new__(cls)
        tree._hold(fd, path, names)
        return tree

    def _hold(self, fd: int, real: str, names: Iterable[str]) -> None:
        self.fd = fd
        self.path = real
        self._names = [
            _components(n) for n in dict.fromkeys([real, *(os.path.abspath(n) for n in names)])
        ]

    def close(self) -> None:
        """Release the descriptor (the tree cannot be used afterwards)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        try:
            self.close()
        except (OSError, AttributeError):
            pass

    @property
    def identity(self) -> tuple[int, int]:
        """``(st_dev, st_ino)`` of the held directory."""
        st = os.fstat(self.fd)
        return st.st_dev, st.st_ino

    def below(self, absolute: str) -> Parts:
        """The components below the tree of an absolute path that names it by one of its
        absolute names (text only: ``..`` is not interpreted here).

        Raises:
            Outside: it does not start with any of the tree's names.
        """
        given = _components(absolute)
        for name in self._names:
            if given[: len(name)] == name:
                return tuple(given[len(name) :])
        raise Outside(absolute)

    def resolve(self, path: str, *, start: Parts = ()) -> Found:
        """``path`` (relative to ``start`` below the root, or absolute) resolved beneath
        the tree, every symlink followed as the kernel would, none of them out of it.

        Raises:
            Outside: the path (or a symlink on the way) leads out of the tree.
            Unresolvable: a loop, a non-directory before the last component, a component
                that cannot be examined, a NUL, a name too long; or the tree changed under
                the walk in a way that cannot be resolved.
            Missing: a component does not exist.
        """
        if "\x00" in path:
            raise Unresolvable("it contains a NUL character")
        if path.startswith("/"):
            current: list[str] = []
            pending = list(reversed(self.below(path)))
        else:
            current = list(start)
            pending = [c for c in reversed(path.split("/")) if c]
        hops = 0
        fd = -1  # the descriptor of `current`, when one is open
        try:
            while pending:
                part = pending.pop()
                if part == ".":
                    continue
                fd = _closed(fd)
                if part == "..":
                    if not current:
                        raise Outside(path)
                    current.pop()
                    continue
                current.append(part)
                fd = self._open(tuple(current), pending)
                mode = os.fstat(fd).st_mode
                if stat.S_ISLNK(mode):
                    hops += 1
                    if hops > MAX_SYMLINKS:
                        raise Unresolvable("it has a symlink loop or too many symlinks")
                    target = self._readlink(fd)
                    fd = _closed(fd)
                    current.pop()
                    if target.startswith("/"):
                        current.clear()
                        pending.extend(reversed(self.below(target)))
                    else:
                        pending.extend(c for c in reversed(target.split("/")) if c)
                elif pending and not stat.S_ISDIR(mode):
                    raise Unresolvable("a component before the last is not a directory")
            if fd < 0:
                fd = self._open(tuple(current), pending)
            found = Found(fd=fd, parts=tuple(current), st=os.fstat(fd))
            fd = -1
            return found
        finally:
            _closed(fd)

    def resolve_parts(self, parts: Parts) -> Found:
        """The physical components ``parts`` (as :meth:`resolve` found them) opened again,
        following no symlink: the tree may have changed since, the result stays in it.

        Raises:
            Outside, Unresolvable, Missing: as :meth:`resolve`.
        """
        fd = self._open(parts, [])
        try:
            st = os.fstat(fd)
        except BaseException:
            os.close(fd)
            raise
        return Found(fd=fd, parts=parts, st=st)

    def _open(self, parts: Parts, pending: list[str]) -> int:
        try:
            return _open_beneath(self.fd, parts)
        except FileNotFoundError:
            raise Missing(_lexical(parts, pending)) from None
        except NotADirectoryError:
            raise Unresolvable("a component before the last is not a directory") from None
        except OSError as e:
            if e.errno == errno.EXDEV:
                raise Outside("/".join(parts)) from None
            if e.errno in (errno.ELOOP, errno.EAGAIN):
                # RESOLVE_NO_SYMLINKS met a symlink where a directory was a moment ago.
                raise Unresolvable("it changed while it was being resolved") from None
            raise Unresolvable(e.strerror or type(e).__name__) from None

    @staticmethod
    def _readlink(link_fd: int) -> str:
        try:
            return os.readlink("", dir_fd=link_fd)
        except OSError as e:
            raise Unresolvable(e.strerror or type(e).__name__) from None


@contextlib.contextmanager
def empty_root(prefix: str) -> Iterator[HeldRoot]:
    """A new, empty directory (in the temp directory, named ``prefix``...), held for the
    block and removed after it, however the block ends."""
    made = tempfile.mkdtemp(prefix=prefix)
    try:
        tree = HeldRoot(made)
        try:
            yield tree
        finally:
            tree.close()
    finally:
        shutil.rmtree(made, ignore_errors=True)


def _closed(fd: int) -> int:
    """Close ``fd`` if open; -1."""
    if fd >= 0:
        os.close(fd)
    return -1


def _lexical(parts: Parts, pending: Sequence[str]) -> Parts:
    """Where ``parts`` then the rest of ``pending`` (a stack: next component last) point,
    as text (``..`` pops).

    Raises:
        Outside: the text climbs above the tree.
    """
    out = list(parts)
    for part in reversed(pending):
        if part == ".":
            continue
        if part == "..":
            if not out:
                raise Outside("..")
            out.pop()
        else:
            out.append(part)
    return tuple(out)
