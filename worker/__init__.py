"""The fs-search worker, the operator's front: assembly, the command line, and helpers for
users' tests.

Everything here runs outside workflow code. Names load on first use, so the ``fs-search``
command starts without importing what it does not need.

* :class:`FsSearchConfig` (every setting, ``FS_SEARCH_*``) and :class:`StorageSettings`
  (the stores' part of it); :class:`ConfigError` names a bad key.
* :func:`build_services` (the process's shared :class:`Services`: rg probe, executor,
  storage, digest helpers), :func:`build_activities`, :func:`new_worker`,
  :func:`maintenance`: run the activities for one workspace on your own client
  (``fs-search worker`` does exactly this).
* :class:`FsSearchServiceHandler`, :func:`serving_service`, :func:`create_endpoint`: serve
  the ``fs_search`` Nexus service for callers in other namespaces (``fs-search worker
  --nexus-queue`` does this beside its activities).
* :class:`SearchError`: a contract failure, e.g. a canned error in a test.
* :func:`workspace_identity`: which directory a path (or descriptor) names, as results'
  ``workspace.root`` says it: a co-located tool checks it before following a result's path.
* :func:`time_skipping_env`, :func:`search_worker`, :func:`canned_activities`: test agent
  workflows offline (``fs_search.worker.testing``; install the ``testing`` extra);
  :func:`service_env`: a dev server with two namespaces and an endpoint, for workflows that
  call fs-search through Nexus.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fs_search.activities import (
        ConfigError,
        FsSearchConfig,
        SearchActivities,
        SearchError,
        StorageSettings,
        workspace_identity,
    )
    from fs_search.worker._app import (
        Services,
        build_activities,
        build_services,
        default_workspace_id,
        maintenance,
        new_worker,
    )
    from fs_search.worker._service_handler import (
        FsSearchServiceHandler,
        create_endpoint,
        serving_service,
    )
    from fs_search.worker.testing import (
        canned_activities,
        search_worker,
        service_env,
        time_skipping_env,
    )

_LAZY = {
    "ConfigError": "fs_search.activities",
    "FsSearchConfig": "fs_search.activities",
    "SearchActivities": "fs_search.activities",
    "SearchError": "fs_search.activities",
    "StorageSettings": "fs_search.activities",
    "Services": "fs_search.worker._app",
    "build_activities": "fs_search.worker._app",
    "build_services": "fs_search.worker._app",
    "default_workspace_id": "fs_search.worker._app",
    "maintenance": "fs_search.worker._app",
    "new_worker": "fs_search.worker._app",
    "FsSearchServiceHandler": "fs_search.worker._service_handler",
    "create_endpoint": "fs_search.worker._service_handler",
    "serving_service": "fs_search.worker._service_handler",
    "canned_activities": "fs_search.worker.testing",
    "search_worker": "fs_search.worker.testing",
    "service_env": "fs_search.worker.testing",
    "time_skipping_env": "fs_search.worker.testing",
    "workspace_identity": "fs_search.activities",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ConfigError",
    "FsSearchConfig",
    "FsSearchServiceHandler",
    "SearchActivities",
    "SearchError",
    "Services",
    "StorageSettings",
    "build_activities",
    "build_services",
    "canned_activities",
    "create_endpoint",
    "default_workspace_id",
    "maintenance",
    "new_worker",
    "search_worker",
    "service_env",
    "serving_service",
    "time_skipping_env",
    "workspace_identity",
]
