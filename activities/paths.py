"""Resolve a request's cwd and path inside the workspace: confinement, existence, display."""

from __future__ import annotations

import os
import posixpath
import stat
from dataclasses import dataclass

from fs_search.activities.command import VCS_DIRS
from fs_search.activities.errors import SearchError, invalid_argument
from fs_search.activities.models import ErrorCode


@dataclass(frozen=True)
class SearchTarget:
    """Where rg runs and how its paths are shown.

    Attributes:
        run_dir: rg's working directory (a real path inside the workspace): the search
            root, or the directory of a file target.
        file_arg: the file name passed to rg for a file target, else None (rg searches
            its working directory).
        prefix: the normalised ``path`` the model gave ('' when omitted), joined in front
            of every path rg prints.
        root: the result's ``root`` field: ``prefix`` or ``"."``.
    """

    run_dir: str
    file_arg: str | None
    prefix: str
    root: str

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


# The kernel's own limit on symlinks followed in one lookup (Linux MAXSYMLINKS).
_MAX_SYMLINKS = 40


class Unresolvable(Exception):
    """A path that cannot be resolved strictly (a loop, a non-directory in the middle, ...)."""


class Missing(Exception):
    """A component does not exist; ``lexical`` is where the rest of the path points as text."""

    def __init__(self, lexical: str) -> None:
        super().__init__(lexical)
        self.lexical = lexical


def resolve_strict(base: str, path: str) -> str:
    """The physical path ``path`` names from the physical directory ``base``.

    Every symlink is followed one component at a time, as the kernel would, so a ``..``
    after a symlink climbs from where the link led. Unlike Python 3.11's non-strict
    ``os.path.realpath``, nothing is ever normalised as text after a failed lookup.

    Raises:
        Unresolvable: a loop, too many links, a non-directory before the last component,
            a component that cannot be examined (permission), a NUL or an over-long name.
        Missing: a component does not exist.
    """
    if "\x00" in path:
        raise Unresolvable("it contains a NUL character")
    current = "/" if path.startswith("/") else base
    pending = [c for c in reversed(path.split("/")) if c]
    hops = 0
    while pending:
        part = pending.pop()
        if part == ".":
            continue
        if part == "..":
            current = os.path.dirname(current)
            continue
        candidate = os.path.join(current, part)
        try:
            st = os.lstat(candidate)
        except FileNotFoundError:
            rest = [candidate, *reversed(pending)]
            raise Missing(posixpath.normpath(posixpath.join(*rest))) from None
        except NotADirectoryError:
            raise Unresolvable("a component before the last is not a directory") from None
        except OSError as e:
            raise Unresolvable(e.strerror or type(e).__name__) from None
        if stat.S_ISLNK(st.st_mode):
            hops += 1
            if hops > _MAX_SYMLINKS:
                raise Unresolvable("it has a symlink loop or too many symlinks")
            try:
                link = os.readlink(candidate)
            except OSError as e:
                raise Unresolvable(e.strerror or type(e).__name__) from None
            if link.startswith("/"):
                current = "/"
            pending.extend(c for c in reversed(link.split("/")) if c)
            continue
        if pending and not stat.S_ISDIR(st.st_mode):
            raise Unresolvable("a component before the last is not a directory")
        current = candidate
    return current


class Workspace:
    """The directory tree a worker owns; nothing outside it is ever searched."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        try:
            real = os.path.realpath(root, strict=True)
        except OSError:
            raise ValueError(
                f"workspace {str(root)!r} does not exist or cannot be resolved"
            ) from None
        if not os.path.isdir(real):
            raise ValueError(f"workspace {str(root)!r} is not a directory")
        self.root = real

    @property
    def identity(self) -> tuple[int, int]:
        """``(st_dev, st_ino)`` of the workspace's root directory: which directory it is,
        whatever name leads to it now."""
        st = os.stat(self.root)
        return st.st_dev, st.st_ino

    def contains(self, real_path: str) -> bool:
        """Whether an already-resolved path lies inside the workspace."""
        if self.root == "/":
            return real_path.startswith("/")
        return real_path == self.root or real_path.startswith(self.root + os.sep)

    def relative(self, real_path: str) -> str:
        """A resolved path inside the workspace, relative to its root ('.' for the root)."""
        return os.path.relpath(real_path, self.root)

    def resolve_cwd(self, cwd: str | None) -> str:
        """The real directory a request's ``cwd`` names (default: the workspace root)."""
        if cwd is None or cwd == "":
            return self.root
        real = self._real(self.root, cwd, "cwd")
        if real is None or not os.path.isdir(real):
            raise invalid_argument(f"cwd {cwd!r} does not exist or is not a directory")
        return real

    def target(self, *, cwd: str | None, path: str | None, tool: str) -> SearchTarget:
        """Resolve ``path`` against ``cwd`` for ``tool`` ("glob" or "grep").

        Precedence follows the contract: argument errors (outside the workspace, VCS
        metadata, glob on a file) before existence errors (SEARCH_FAILED).
        """
        run_cwd = self.resolve_cwd(cwd)
        if not path:
            return SearchTarget(run_dir=run_cwd, file_arg=None, prefix="", root=".")
        real = self._real(run_cwd, path, "path")
        if real is None:
            raise SearchError(ErrorCode.SEARCH_FAILED, f"path {path!r} does not exist")
        prefix = normalise_display(path)
        if self._quiet(run_cwd, prefix or ".") != real:
            # A symlink before a "..": the lexical form names another place, so paths are
            # shown under the path exactly as given, which the filesystem resolves right.
            prefix = path.rstrip("/") or path
        if not prefix:
            return SearchTarget(run_dir=real, file_arg=None, prefix="", root=".")
        try:
            st = os.stat(real)
        except FileNotFoundError:
            raise SearchError(ErrorCode.SEARCH_FAILED, f"path {path!r} does not exist") from None
        except OSError as e:
            raise SearchError(
                ErrorCode.SEARCH_FAILED, f"path {path!r} cannot be read: {e.strerror}"
            ) from None
        if stat.S_ISDIR(st.st_mode):
            if not os.access(real, os.R_OK | os.X_OK):
                raise SearchError(ErrorCode.SEARCH_FAILED, f"path {path!r} cannot be read")
            return SearchTarget(run_dir=real, file_arg=None, prefix=prefix, root=prefix)
        if tool == "glob":
            raise invalid_argument(f"path {path!r} is not a directory; glob searches directories")
        if not stat.S_ISREG(st.st_mode):
            # A FIFO or device named explicitly would block rg or read forever.
            raise SearchError(
                ErrorCode.SEARCH_FAILED, f"path {path!r} is not a regular file or directory"
            )
        if not os.access(real, os.R_OK):
            raise SearchError(ErrorCode.SEARCH_FAILED, f"path {path!r} cannot be read")
        run_dir, name = os.path.split(real)
        return SearchTarget(run_dir=run_dir, file_arg=name, prefix=prefix, root=prefix)

    def _real(self, base: str, given: str, field: str) -> str | None:
        """``given`` resolved strictly from ``base``; None when it does not exist.

        Raises:
            SearchError: INVALID_ARGUMENT when it cannot be resolved, lies outside the
                workspace or names VCS metadata.
        """
        if any(part in VCS_DIRS for part in given.split("/")):
            raise invalid_argument(f"{field} {given!r} names VCS metadata, which is never searched")
        try:
            real: str | None = resolve_strict(base, given)
            lexical = real
        except Unresolvable as e:
            raise invalid_argument(f"{field} {given!r} cannot be resolved: {e}") from None
        except Missing as e:
            real, lexical = None, e.lexical
        assert lexical is not None
        if not self.contains(lexical):
            raise invalid_argument(
                f"{field} {given!r} is outside the workspace (symlinks are followed)"
            )
        if any(part in VCS_DIRS for part in self.relative(lexical).split(os.sep)):
            raise invalid_argument(f"{field} {given!r} names VCS metadata, which is never searched")
        return real

    @staticmethod
    def _quiet(base: str, path: str) -> str | None:
        try:
            return resolve_strict(base, path)
        except (Unresolvable, Missing):
            return None
