"""Resolve a request's cwd and path inside the workspace: confinement, existence, display."""

from __future__ import annotations

import os
import posixpath
import stat
from dataclasses import dataclass

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


class Workspace:
    """The directory tree a worker owns; nothing outside it is ever searched."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        real = os.path.realpath(root)
        if not os.path.isdir(real):
            raise ValueError(f"workspace {str(root)!r} is not a directory")
        self.root = real

    def contains(self, real_path: str) -> bool:
        """Whether an already-resolved path lies inside the workspace."""
        if self.root == "/":
            return real_path.startswith("/")
        return real_path == self.root or real_path.startswith(self.root + os.sep)

    def resolve_cwd(self, cwd: str | None) -> str:
        """The real directory a request's ``cwd`` names (default: the workspace root)."""
        if cwd is None or cwd == "":
            return self.root
        real = self._real(os.path.join(self.root, cwd), "cwd", cwd)
        if not os.path.isdir(real):
            raise invalid_argument(f"cwd {cwd!r} does not exist or is not a directory")
        return real

    def target(self, *, cwd: str | None, path: str | None, tool: str) -> SearchTarget:
        """Resolve ``path`` against ``cwd`` for ``tool`` ("glob" or "grep").

        Precedence follows the contract: argument errors (outside the workspace, glob on a
        file) before existence errors (SEARCH_FAILED).
        """
        run_cwd = self.resolve_cwd(cwd)
        if not path:
            return SearchTarget(run_dir=run_cwd, file_arg=None, prefix="", root=".")
        real = self._real(os.path.join(run_cwd, path), "path", path)
        prefix = normalise_display(path)
        if os.path.realpath(os.path.join(run_cwd, prefix or ".")) != real:
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

    def _real(self, joined: str, field: str, given: str) -> str:
        try:
            real = os.path.realpath(joined)
        except (OSError, ValueError) as e:
            raise invalid_argument(f"{field} {given!r} cannot be resolved: {e}") from None
        if not self.contains(real):
            raise invalid_argument(
                f"{field} {given!r} is outside the workspace (symlinks are followed)"
            )
        return real
