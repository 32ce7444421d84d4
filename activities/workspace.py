"""Resolve a request's cwd and path beneath the held workspace root: confinement, existence,
display."""

from __future__ import annotations

import contextlib
import os
import posixpath
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from fs_search.activities.beneath import Found, Missing, Outside, Parts, Tree, Unresolvable
from fs_search.activities.contract import ErrorCode
from fs_search.activities.errors import SearchError, invalid_argument

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
    """The directory tree a worker owns, held by descriptor; nothing outside it is searched.

    The root is opened once, here (``O_PATH``), and every ``cwd``/``path`` is resolved
    beneath that descriptor (:mod:`fs_search.activities.beneath`): renaming or replacing
    the root's name later never changes which directory this workspace is.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        try:
            self.tree = Tree(root, names=[os.fspath(root)])
        except NotADirectoryError:
            raise ValueError(f"workspace {str(root)!r} is not a directory") from None
        except OSError:
            raise ValueError(
                f"workspace {str(root)!r} does not exist or cannot be resolved"
            ) from None
        self.root = self.tree.path

    @property
    def identity(self) -> tuple[int, int]:
        """``(st_dev, st_ino)`` of the held root directory: which directory it is,
        whatever name leads to it now."""
        return self.tree.identity

    def close(self) -> None:
        """Release the root's descriptor."""
        self.tree.close()

    def target(self, *, cwd: str | None, path: str | None, tool: str) -> SearchTarget:
        """Resolve ``path`` against ``cwd`` for ``tool`` ("glob" or "grep"), without keeping
        a descriptor (see :meth:`opened`)."""
        with self.opened(cwd=cwd, path=path, tool=tool) as (target, _fd):
            return target

    def readable(self) -> bool:
        """Whether the held root is still a directory this worker can search: not removed
        (a removed directory has no links left, whatever now has its name) and readable."""
        try:
            removed = os.fstat(self.tree.fd).st_nlink == 0
        except OSError:
            return False
        return not removed and _may(self.tree.fd, os.R_OK | os.X_OK)

    @contextlib.contextmanager
    def opened(
        self, *, cwd: str | None, path: str | None, tool: str
    ) -> Iterator[tuple[SearchTarget, int]]:
        """Resolve ``path`` against ``cwd`` for ``tool`` ("glob" or "grep"): the target, and
        an ``O_PATH`` descriptor of the directory rg runs in (closed on exit).

        Precedence follows the contract: the workspace itself gone or unreadable first,
        then argument errors (outside the workspace, VCS metadata, glob on a file), then
        existence errors (SEARCH_FAILED). A workspace gone by the end of the block (rg ran
        while it was removed) fails the call the same way, as does any SEARCH_FAILED raised
        in the block while it is gone.
        """
        if not self.readable():
            raise workspace_unreadable()
        try:
            with self._opened(cwd=cwd, path=path, tool=tool) as opened:
                yield opened
        except SearchError as e:
            if e.code is ErrorCode.SEARCH_FAILED and not self.readable():
                raise workspace_unreadable() from e
            raise
        if not self.readable():
            raise workspace_unreadable()

    @contextlib.contextmanager
    def _opened(
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
    """The workspace's own root was removed, replaced or made unreadable on the worker."""
    return SearchError(
        ErrorCode.SEARCH_FAILED,
        "the workspace cannot be read: its directory was removed, replaced or made "
        "unreadable on the worker",
    )


def _may(fd: int, mode: int) -> bool:
    """``access(2)`` on what a descriptor names (through the kernel's own link to it)."""
    return os.access(f"/proc/self/fd/{fd}", mode)
