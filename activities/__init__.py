"""The search activities: ripgrep-backed glob and grep for one workspace.

Internal to fs-search: callers import the contract from ``fs_search.workflows``, operators
the worker's parts from ``fs_search.worker`` (which re-exports what it needs from here).
A reader starts from :mod:`~fs_search.activities.search` (the four activities), then
``contract`` and ``budget`` (a call's time: both pure, shared with the workflow side),
``errors``, ``config``, ``catalogue``, ``progress``, ``telemetry`` and ``workspace``, and the
rooms by stage behind their fronts: ``rg`` (run rg), ``results``
(rg's output made into results) and ``storage`` (where complete results go).

Names load on first use: the activities and the stores bring subprocesses, S3 clients and
OpenTelemetry.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fs_search.activities.config import ConfigError, FsSearchConfig, StorageSettings
    from fs_search.activities.errors import SearchError
    from fs_search.activities.search import RgStatus, SearchActivities
    from fs_search.activities.storage import Storage, local_storage, open_storage, storage_for

_LAZY = {
    "ConfigError": "fs_search.activities.config",
    "FsSearchConfig": "fs_search.activities.config",
    "StorageSettings": "fs_search.activities.config",
    "SearchError": "fs_search.activities.errors",
    "RgStatus": "fs_search.activities.search",
    "SearchActivities": "fs_search.activities.search",
    "Storage": "fs_search.activities.storage",
    "local_storage": "fs_search.activities.storage",
    "open_storage": "fs_search.activities.storage",
    "storage_for": "fs_search.activities.storage",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ConfigError",
    "FsSearchConfig",
    "RgStatus",
    "SearchActivities",
    "SearchError",
    "Storage",
    "StorageSettings",
    "local_storage",
    "open_storage",
    "storage_for",
]
