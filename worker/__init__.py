"""The fs-search worker: assembly, the command line, and helpers for users' tests.

Everything here runs outside workflow code. Names load on first use, so the ``fs-search``
command starts without importing what it does not need.

* :func:`build_activities`, :func:`new_worker`, :func:`maintenance`: run the activities for
  one workspace on your own client (``fs-search worker`` does exactly this).
* :func:`time_skipping_env`, :func:`search_worker`, :func:`canned_activities`: test agent
  workflows offline (``fs_search.worker.testing``; install the ``testing`` extra).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fs_search.worker.app import (
        build_activities,
        default_workspace_id,
        maintenance,
        new_worker,
    )
    from fs_search.worker.testing import canned_activities, search_worker, time_skipping_env

_LAZY = {
    "build_activities": "fs_search.worker.app",
    "default_workspace_id": "fs_search.worker.app",
    "maintenance": "fs_search.worker.app",
    "new_worker": "fs_search.worker.app",
    "canned_activities": "fs_search.worker.testing",
    "search_worker": "fs_search.worker.testing",
    "time_skipping_env": "fs_search.worker.testing",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "build_activities",
    "canned_activities",
    "default_workspace_id",
    "maintenance",
    "new_worker",
    "search_worker",
    "time_skipping_env",
]
