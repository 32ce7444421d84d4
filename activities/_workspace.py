"""Resolve a request's cwd and path beneath the held workspace root: confinement, existence,
display."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import posixpath
import re
import socket
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from fs_search.activities._contract import ErrorCode
from fs_search.activities._errors import SearchError, invalid_argument
from fs_search.activities._held_root import (
    Found,
    HeldRoot,
    Missing,
    Outside,
    Parts,
    Unresolvable,
    open_no_symlinks,
)
from fs_search.activities._identity import Identity
from fs_search.activities._shown import escaped

log = logging.getLogger(__name__)

# VCS metadata directories: never searched, never named by a cwd or path.
VCS_DIRS = (".git", ".svn", ".hg", ".bzr", ".jj", ".sl")


@dataclass(frozen=True)
class SearchTarget:
    """Where rg runs and how its paths are shown.

    Attributes:
        run_dir: rg's working directory as a path inside the workspace (for logs: rg is
            started in it by descriptor): the search root, or the directory of a file target.
        file_arg: the file name passed to rg for a file target, else None (rg searches
            its working directory).
        prefix: the normalised ``path`` the model gave ('' when omitted), joined in front
            of every path rg prints.
        root: the result's ``root`` field: ``prefix`` or ``"."``.
        parts: ``run_dir``'s components below the workspace root (physical, as resolved).
    """

    run_dir: str
    file_arg: str | None
    prefix: str
    root: str
    parts: Parts = ()

    def display(self, rel: str) -> str:
        """The path shown to the model for a path rg printed."""
        if self.file_arg is not None:
            return self.prefix or rel
        return join_display(self.prefix, rel)


def normalise_display(path: str | None) -> str:
    """``./src/`` -> ``src``; ``.`` or nothing -> ``''``; absolute paths stay absolute."""
    if path is None or path == "":
        return ""
    norm = posixpath.normpath(path)
    return "" if norm == "." else norm


def join_display(prefix: str, rel: str) -> str:
    """Join a display prefix and a path under the search root, never with a leading ``./``."""
    rel = rel.removeprefix("./")
    if not prefix:
        return rel
    return prefix + rel if prefix.endswith("/") else f"{prefix}/{rel}"


def _vcs(parts: Sequence[str]) -> bool:
    return any(part in VCS_DIRS for part in parts)


class Workspace:
    """The directory tree a worker serves; nothing outside it is searched.

    Each call runs in the directory the workspace's path names when the call starts, held by
    descriptor for the whole call (:meth:`held`): every ``cwd``/``path`` is resolved beneath
    that descriptor (:mod:`fs_search.activities._held_root`), so renaming or replacing names
    during the call never changes which directory it searches. A path that names nothing
    readable fails the call ("the workspace cannot be read"); a path that names another
    directory than before serves that one, under its own identity (results' ``workspace.root``,
    :mod:`~fs_search.activities._identity`).

    ``Workspace(path)``: the directory an operator named (``--workspace``). Its real path is
    taken once, at start-up (a symlink the operator named is followed then), and each call
    opens that real path again from ``/`` following no symlink at all
    (:func:`~fs_search.activities._held_root.open_no_symlinks`): a directory re-created there
    is served under its new identity, but a symlink put at the path, or in place of any
    directory above it, is refused (SEARCH_FAILED "the workspace cannot be read", and a
    warning in the log) — whoever can write the workspace's parent cannot point later calls,
    and Landlock's grant, at another tree. :meth:`entry`: a directory under a workspaces
    root, named there by ``name`` and vetted by the fleet's scan: each call opens ``name``
    beneath the root's held descriptor and is served only while it is still the vetted
    directory.

    The directory last served stays held between calls (``identity``), so its inode number
    cannot be reused by a directory created in its place.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        # Absolute now (not normalised: ".." after a symlink is the kernel's to resolve): each
        # call opens it again, whatever the process's working directory by then.
        given = os.fspath(root)
        self._given = given if os.path.isabs(given) else os.path.join(os.getcwd(), given)
        self._parent: HeldRoot | None = None
        self._name = ""
        self._vetted: Identity | None = None
        self._refused: str | None = None  # why the path was last refused (logged once)
        try:
            # Symlinks in the configured path are followed now, once, and never again.
            self._real = os.path.realpath(self._given, strict=True)
            self._last = self._open_given()
        except NotADirectoryError:
            raise ValueError(f"workspace {str(root)!r} is not a directory") from None
        except (OSError, Symlinked):
            raise ValueError(
                f"workspace {str(root)!r} does not exist or cannot be resolved"
            ) from None
        self.root = self._last.path

    @classmethod
    def entry(cls, parent: HeldRoot, name: str, *, expected: Identity) -> Workspace:
        """The directory ``name`` leads to beneath ``parent`` (symlinks followed inside it),
        if it is still the directory ``expected`` names (``(st_dev, st_ino)``, as a scan
        recorded it).

        Raises:
            Changed: ``name`` leads elsewhere now, or nowhere.
        """
        found = _entry(parent, name)
        if found is None:
            raise Changed(f"{name!r} no longer leads to a directory under the root")
        if (found.st.st_dev, found.st.st_ino) != expected:
            found.close()
            raise Changed(f"{name!r} now leads to another directory than the scan found")
        workspace = cls.__new__(cls)
        workspace._parent = parent
        workspace._name = name
        workspace._vetted = expected
        workspace.root = os.path.join(parent.path, *found.parts)
        workspace._given = workspace.root
        workspace._last = HeldRoot.adopt(found.fd, workspace.root)
        return workspace

    @property
    def identity(self) -> Identity:
        """``(st_dev, st_ino)`` of the directory last served (for an entry: the vetted one)."""
        return self._last.identity

    @property
    def tree(self) -> HeldRoot:
        """The directory last served, held (for an entry: the vetted one)."""
        return self._last

    def close(self) -> None:
        """Release the held directory."""
        self._last.close()

    @contextlib.contextmanager
    def held(self) -> Iterator[HeldRoot]:
        """The directory the workspace's path names now, held for the block.

        Raises:
            SearchError: SEARCH_FAILED "the workspace cannot be read" when the path names no
                directory this worker can search (removed, renamed away, replaced by a file,
                unreadable; for an entry, also: not the vetted directory).
        """
        tree = self._open_now()
        try:
            if not readable(tree):
                raise workspace_unreadable()
            yield tree
        finally:
            tree.close()

    def _open_now(self) -> HeldRoot:
        if self._parent is not None:
            found = _entry(self._parent, self._name)
            if found is None:
                raise workspace_unreadable()
            if (found.st.st_dev, found.st.st_ino) != self._vetted:
                # Re-created or re-pointed: served once the next scan has vetted it.
                found.close()
                raise workspace_unreadable()
            return HeldRoot.adopt(found.fd, self.root)
        try:
            tree = self._open_given()
        except Symlinked as e:
            if self._refused != str(e):
                self._refused = str(e)
                log.warning(
                    "workspace %s: %s; calls fail (SEARCH_FAILED) until a directory is there "
                    "again: a workspace's path is never followed through a symlink after "
                    "start-up",
                    escaped(self._real),
                    e,
                )
            raise workspace_unreadable() from None
        except OSError:
            raise workspace_unreadable() from None
        if self._refused is not None:
            log.info("workspace %s: a directory is there again; serving it", escaped(self._real))
            self._refused = None
        if tree.identity != self._last.identity:
            # Another directory at the path: the call serves it, and it is remembered (held)
            # so that the one before cannot come back under its inode number unnoticed.
            self._last.close()
            self._last = HeldRoot.adopt(os.dup(tree.fd), tree.path, names=[self._given])
            self.root = tree.path
        return tree

    def _open_given(self) -> HeldRoot:
        """The directory at the real path taken at start-up, opened following no symlink.

        Raises:
            Symlinked: the path, or a directory above it, is a symlink now.
            NotADirectoryError: something else than a directory is there.
            OSError: nothing is there, or it cannot be opened.
        """
        try:
            fd = open_no_symlinks(self._real)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):
                # ENOTDIR: the fallback walk (no openat2) met a symlink before the last
                # component; so does a file put there, which is refused all the same.
                raise Symlinked("a directory on its path is now a symlink or a file") from None
            raise
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISLNK(mode):
                raise Symlinked("its path is now a symlink")
            if not stat.S_ISDIR(mode):
                raise NotADirectoryError(errno.ENOTDIR, "not a directory", self._real)
        except BaseException:
            os.close(fd)
            raise
        return HeldRoot.adopt(fd, self._real, names=[self._given])

    def target(self, *, cwd: str | None, path: str | None, tool: str) -> SearchTarget:
        """Resolve ``path`` against ``cwd`` for ``tool`` ("glob" or "grep"), without keeping
        a descriptor (see :meth:`opened`)."""
        with self.opened(cwd=cwd, path=path, tool=tool) as (target, _fd):
            return target

    def readable(self) -> bool:
        """Whether the workspace's path names a directory this worker can search now."""
        try:
            with self.held():
                return True
        except SearchError:
            return False

    @contextlib.contextmanager
    def opened(
        self, *, cwd: str | None, path: str | None, tool: str, root: HeldRoot | None = None
    ) -> Iterator[tuple[SearchTarget, int]]:
        """Resolve ``path`` against ``cwd`` for ``tool`` ("glob" or "grep") beneath ``root``
        (the call's directory from :meth:`held`; default: opened for the block): the target,
        and an ``O_PATH`` descriptor of the directory rg runs in (closed on exit).

        Precedence follows the contract: the workspace itself gone or unreadable first,
        then argument errors (outside the workspace, VCS metadata, glob on a file), then
        existence errors (SEARCH_FAILED). A workspace gone by the end of the block (rg ran
        while it was removed) fails the call the same way, as does any SEARCH_FAILED raised
        in the block while it is gone.
        """
        with contextlib.ExitStack() as stack:
            tree = root if root is not None else stack.enter_context(self.held())
            if not readable(tree):
                raise workspace_unreadable()
            try:
                with _Resolver(tree).opened(cwd=cwd, path=path, tool=tool) as opened:
                    yield opened
            except SearchError as e:
                if e.code is ErrorCode.SEARCH_FAILED and not readable(tree):
                    raise workspace_unreadable() from e
                raise
            if not readable(tree):
                raise workspace_unreadable()


class Changed(Exception):
    """A workspaces root's entry no longer leads to the directory a scan vetted."""


class Symlinked(Exception):
    """A single workspace's path (or a directory above it) is a symlink now: refused."""


def _entry(parent: HeldRoot, name: str) -> Found | None:
    """The directory ``name`` leads to beneath ``parent``, or None (gone, outside the root,
    the root itself, not a directory)."""
    try:
        found = parent.resolve(name)
    except (Outside, Unresolvable, Missing):
        return None
    if found.parts and stat.S_ISDIR(found.st.st_mode):
        return found
    found.close()
    return None


def readable(tree: HeldRoot) -> bool:
    """Whether a held directory is still one this worker can search: not removed (a removed
    directory has no links left, whatever now has its name) and readable."""
    try:
        removed = os.fstat(tree.fd).st_nlink == 0
    except OSError:
        return False
    return not removed and _may(tree.fd, os.R_OK | os.X_OK)


class _Resolver:
    """``cwd`` and ``path`` resolved beneath one call's directory."""

    def __init__(self, tree: HeldRoot) -> None:
        self.tree = tree
        self.root = tree.path

    @contextlib.contextmanager
    def opened(
        self, *, cwd: str | None, path: str | None, tool: str
    ) -> Iterator[tuple[SearchTarget, int]]:
        run_cwd = self._cwd(cwd)
        with contextlib.ExitStack() as held:
            held.callback(run_cwd.close)
            if not path:
                yield self._in(run_cwd.parts, None, "", "."), run_cwd.fd
                return
            found = self._find(run_cwd.parts, path, "path")
            if found is None:
                raise SearchError(ErrorCode.SEARCH_FAILED, f"path {path!r} does not exist")
            held.callback(found.close)
            prefix = normalise_display(path)
            if self._quiet(run_cwd.parts, prefix or ".") != found.parts:
                # A symlink before a "..": the lexical form names another place, so paths are
                # shown under the path exactly as given, which the filesystem resolves right.
                prefix = path.rstrip("/") or path
            if not prefix:
                yield self._in(found.parts, None, "", "."), found.fd
                return
            mode = found.st.st_mode
            if stat.S_ISDIR(mode):
                if not _may(found.fd, os.R_OK | os.X_OK):
                    raise SearchError(ErrorCode.SEARCH_FAILED, f"path {path!r} cannot be read")
                yield self._in(found.parts, None, prefix, prefix), found.fd
                return
            if tool == "glob":
                raise invalid_argument(
                    f"path {path!r} is not a directory; glob searches directories"
                )
            if not stat.S_ISREG(mode):
                # A FIFO or device named explicitly would block rg or read forever.
                raise SearchError(
                    ErrorCode.SEARCH_FAILED, f"path {path!r} is not a regular file or directory"
                )
            if not _may(found.fd, os.R_OK):
                raise SearchError(ErrorCode.SEARCH_FAILED, f"path {path!r} cannot be read")
            # rg runs in the file's directory, by descriptor, and is given its name.
            parent = self._reopen(found.parts[:-1], path)
            held.callback(parent.close)
            yield self._in(parent.parts, found.parts[-1], prefix, prefix), parent.fd

    def _in(self, parts: Parts, file_arg: str | None, prefix: str, root: str) -> SearchTarget:
        run_dir = os.path.join(self.root, *parts) if parts else self.root
        return SearchTarget(
            run_dir=run_dir, file_arg=file_arg, prefix=prefix, root=root, parts=parts
        )

    def _cwd(self, cwd: str | None) -> Found:
        """The directory a request's ``cwd`` names (default: the workspace root)."""
        if cwd is None or cwd == "":
            return self.tree.resolve(".")
        found = self._find((), cwd, "cwd")
        if found is not None and stat.S_ISDIR(found.st.st_mode):
            return found
        if found is not None:
            found.close()
        raise invalid_argument(f"cwd {cwd!r} does not exist or is not a directory")

    def _find(self, start: Parts, given: str, field: str) -> Found | None:
        """``given`` resolved beneath the root from ``start``; None when it does not exist.

        Raises:
            SearchError: INVALID_ARGUMENT when it cannot be resolved, leads outside the
                workspace or names VCS metadata. Whatever lies outside, the answer for a
                path that leaves is the same, and nothing outside is looked up.
        """
        if _vcs(given.split("/")):
            raise invalid_argument(f"{field} {given!r} names VCS metadata, which is never searched")
        try:
            found: Found | None = self.tree.resolve(given, start=start)
            parts = found.parts if found else ()
        except Outside:
            raise invalid_argument(
                f"{field} {given!r} is outside the workspace (symlinks are followed)"
            ) from None
        except Unresolvable as e:
            raise invalid_argument(f"{field} {given!r} cannot be resolved: {e}") from None
        except Missing as e:
            found, parts = None, e.parts
        if _vcs(parts):
            if found is not None:
                found.close()
            raise invalid_argument(f"{field} {given!r} names VCS metadata, which is never searched")
        return found

    def _reopen(self, parts: Parts, given: str) -> Found:
        """The directory ``parts`` opened again (the parent of a file target)."""
        try:
            found = self.tree.resolve_parts(parts)
        except (Outside, Unresolvable, Missing):
            found = None
        if found is not None and stat.S_ISDIR(found.st.st_mode):
            return found
        if found is not None:
            found.close()
        raise invalid_argument(
            f"path {given!r} cannot be resolved: it changed while it was being resolved"
        )

    def _quiet(self, start: Parts, path: str) -> Parts | None:
        try:
            found = self.tree.resolve(path, start=start)
        except (Outside, Unresolvable, Missing):
            return None
        found.close()
        return found.parts


def workspace_unreadable() -> SearchError:
    """The workspace's path names no directory the worker can search: removed, moved away,
    replaced (a fleet's entry: not yet vetted) or made unreadable."""
    return SearchError(
        ErrorCode.SEARCH_FAILED,
        "the workspace cannot be read: its directory was removed, moved, replaced or made "
        "unreadable on the worker",
    )


def host_id_of(name: str) -> str:
    """A host name in host-id syntax (``[A-Za-z0-9][A-Za-z0-9._-]{0,127}``)."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "-", name).lstrip("._-")[:128]
    return cleaned or "host"


def this_host() -> str:
    """This host's name, in host-id syntax (the default ``FS_SEARCH_HOST_ID``)."""
    return host_id_of(socket.gethostname())


def _may(fd: int, mode: int) -> bool:
    """``access(2)`` on what a descriptor names (through the kernel's own link to it)."""
    return os.access(f"/proc/self/fd/{fd}", mode)
