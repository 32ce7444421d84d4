"""Which ignore files a grep's rg may read where no kernel sandbox stands behind it.

rg reads the ignore files (``.ignore``, ``.rgignore``, ``.gitignore``, ``.git/info/exclude``)
of every directory it walks and of every directory above its search root, opening whatever
their names lead to. Under Landlock that is harmless: nothing outside the workspace can be
opened, so an ignore file linked outside, to a device or to ``/proc``, and every ignore file
above the workspace, is unreadable to rg and skipped (and rg's own output is a socket, which
cannot be opened again through ``/dev/stdout``). Without Landlock (``FS_SEARCH_SANDBOX=off``,
or a kernel without it) rg would read them, so :func:`vet` looks first — at names and file
types only, never opening an ignore file — at each one rg could read for this search:

- inside the workspace (the directories from its root down to the search root, and the whole
  tree below the search root): a regular file, or a link that resolves beneath the
  workspace to one, is fine; anything else (a link out of it, to ``/proc`` or ``/dev``, a
  FIFO, a socket, a device, a ``.git`` file whose pointers lead anywhere) is not, and that
  kind of ignore file is left out of the search (``--no-ignore-dot``, ``--no-ignore-vcs``
  or ``--no-ignore-exclude``), which the footer says;
- above the workspace: if any directory there holds an ignore file, rg applies none above
  the search root (``--no-ignore-parent``), so nothing outside decides what is shown — the
  ones between the workspace root and a search root below it are then not applied either,
  which the footer says.

A tree that changes while the search runs can only be held to this by the kernel: without
Landlock the check is made once, before rg starts.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass

from fs_search.activities._held_root import HeldRoot, Missing, Outside, Parts, Unresolvable
from fs_search.activities._workspace import VCS_DIRS
from fs_search.activities.rg import IgnoreFiles

# The ignore files rg reads in a directory, by the kind of ignore file they are.
_DOT = (".ignore", ".rgignore")
_VCS = (".gitignore",)
_GIT = ".git"
_EXCLUDE = (".git", "info", "exclude")
# How many directory entries the walk reads between looks at the clock.
_CLOCK_EVERY = 512

SOME_SKIPPED = (
    "(some ignore files were not applied: one in the workspace could not be read safely, so "
    "files they would hide may be included)"
)
PARENTS_SKIPPED = (
    "(ignore files in the directories above the search root were not applied on this worker, "
    "so files they would hide may be included)"
)


class OutOfTime(Exception):
    """The look at the tree ran past the call's deadline."""


@dataclass(frozen=True)
class Vetted:
    """What rg may read, and what the model is told was left out (None: nothing)."""

    ignore_files: IgnoreFiles
    note: str | None = None


def vet(tree: HeldRoot, search_root: Parts, *, deadline: float) -> Vetted:
    """The ignore files rg may read, searching ``search_root`` (components below the
    workspace root) of ``tree`` without a kernel sandbox.

    Raises:
        OutOfTime: the tree is too large to look at within ``deadline`` (monotonic).
    """
    kinds = _Kinds()
    for depth in range(len(search_root)):
        with _opened(tree, search_root[:depth]) as fd:
            if fd is not None:
                kinds.look(tree, fd, search_root[:depth])
    _walk(tree, search_root, kinds, deadline)
    parents = not _above_holds_ignore_files(tree)
    ignore_files = IgnoreFiles(parents=parents, dot=kinds.dot, vcs=kinds.vcs, exclude=kinds.exclude)
    note = None
    if not ignore_files.complete:
        note = SOME_SKIPPED
    elif not parents and search_root:
        note = PARENTS_SKIPPED
    return Vetted(ignore_files, note)


class _Kinds:
    """Which kinds of ignore file are still safe to read, as entries are looked at."""

    def __init__(self) -> None:
        self.dot = True
        self.vcs = True
        self.exclude = True

    def look(self, tree: HeldRoot, dir_fd: int, parts: Parts) -> None:
        """Look at the ignore files of the directory open as ``dir_fd`` (at ``parts``)."""
        for names, kind in ((_DOT, "dot"), (_VCS, "vcs")):
            if getattr(self, kind) and not all(_safe(tree, dir_fd, parts, n) for n in names):
                setattr(self, kind, False)
        if self.exclude and self.vcs:
            self.exclude = _safe_git(tree, dir_fd, parts)

    def look_entry(
        self, tree: HeldRoot, dir_fd: int, parts: Parts, entry: os.DirEntry[str]
    ) -> None:
        """Like :meth:`look`, for one entry met by the walk (named as an ignore file)."""
        name = entry.name
        if name in _DOT and self.dot:
            self.dot = _safe(tree, dir_fd, parts, name)
        elif name in _VCS and self.vcs:
            self.vcs = _safe(tree, dir_fd, parts, name)
        elif name == _GIT and self.exclude and self.vcs:
            self.exclude = _safe_git(tree, dir_fd, parts)


def _walk(tree: HeldRoot, root: Parts, kinds: _Kinds, deadline: float) -> None:
    """Every directory rg could walk below ``root`` (symlinks are not followed, VCS
    directories not entered, as rg does), their ignore files looked at."""
    pending = [root]
    seen = 0
    while pending:
        parts = pending.pop()
        with _opened(tree, parts, listing=True) as fd:
            if fd is None:
                continue
            with contextlib.suppress(OSError), os.scandir(fd) as entries:
                for entry in entries:
                    seen += 1
                    if seen % _CLOCK_EVERY == 0 and time.monotonic() > deadline:
                        raise OutOfTime()
                    if entry.name in _DOT or entry.name in _VCS or entry.name == _GIT:
                        kinds.look_entry(tree, fd, parts, entry)
                    if entry.name in VCS_DIRS:
                        continue
                    with contextlib.suppress(OSError):
                        if entry.is_dir(follow_symlinks=False):
                            pending.append((*parts, entry.name))


def _safe(tree: HeldRoot, dir_fd: int, parts: Parts, name: str) -> bool:
    """Whether rg may open the ignore file ``name`` of the directory open as ``dir_fd``:
    absent, a regular file or directory, or a link that resolves beneath the workspace to
    one. Nothing is opened but the link's own chain, beneath the workspace."""
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return True
    if not stat.S_ISLNK(mode):
        return False  # a FIFO, socket or device
    try:
        found = tree.resolve(name, start=parts)
    except Missing:
        return True  # a dangling link inside: rg sees no file there
    except (Outside, Unresolvable):
        return False
    found.close()
    return stat.S_ISREG(found.st.st_mode) or stat.S_ISDIR(found.st.st_mode)


def _safe_git(tree: HeldRoot, dir_fd: int, parts: Parts) -> bool:
    """Whether rg may read ``.git/info/exclude`` here: no ``.git``, or a real ``.git``
    directory whose exclude file is safe. A ``.git`` file (a worktree or submodule) points
    rg to another directory's exclude file, anywhere: never safe without the kernel."""
    try:
        mode = os.stat(_GIT, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not stat.S_ISDIR(mode):
        return False
    try:
        found = tree.resolve("/".join(_EXCLUDE), start=parts)
    except Missing:
        return True
    except (Outside, Unresolvable):
        return False
    found.close()
    return stat.S_ISREG(found.st.st_mode)


def _above_holds_ignore_files(tree: HeldRoot) -> bool:
    """Whether any directory above the workspace (by its name now) holds a file rg would
    read as an ignore file, or cannot be told (the workspace has no name any more)."""
    try:
        here = os.readlink(f"/proc/self/fd/{tree.fd}")
    except OSError:
        return True
    if not here.startswith("/") or here.endswith(" (deleted)"):
        return True
    above = os.path.dirname(here)
    while True:
        for name in (*_DOT, *_VCS):
            if os.path.lexists(os.path.join(above, name)):
                return True
        git = os.path.join(above, _GIT)
        if os.path.lexists(git) and (
            not os.path.isdir(git) or os.path.lexists(os.path.join(git, "info", "exclude"))
        ):
            return True
        if above == "/":
            return False
        above = os.path.dirname(above)


@contextlib.contextmanager
def _opened(tree: HeldRoot, parts: Parts, *, listing: bool = False) -> Iterator[int | None]:
    """The directory at ``parts``, opened beneath the tree (readable when ``listing``), or
    None when it cannot be (gone, replaced by a non-directory: rg will not walk it)."""
    try:
        found = tree.resolve_parts(parts)
    except (Outside, Unresolvable, Missing):
        yield None
        return
    fd = found.fd
    try:
        if not stat.S_ISDIR(found.st.st_mode):
            yield None
            return
        if listing:
            try:
                readable = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
            except OSError:
                yield None
                return
            try:
                yield readable
            finally:
                os.close(readable)
        else:
            yield fd
    finally:
        os.close(fd)
