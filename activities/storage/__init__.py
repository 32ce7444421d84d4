"""Where complete results go: spill artifacts and Temporal payloads, ``file://`` or ``s3://``.

``open_storage(url)`` / ``storage_for(settings)`` give a :class:`Storage` with both halves,
the backend chosen from the URL in one place (``_storage``); the S3 backend's modules load
only when a URL needs them (aioboto3 takes half a second to import). Private behind this
front: the backends (``_files``, ``_s3``, ``_s3_client``), artifact keys and locators
(``_keys``), a workspace's spills (``_spills``: saved, never failing a search) and a large
result's payload within the call's time (``_payloads``: the upload; the room check is the
seam's, ``_storage``). The seam points one way: ``_storage`` → the backends → ``_payloads``,
``_keys``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from fs_search.activities.storage._files import FileSpillStore, LocalDirectoryDriver
from fs_search.activities.storage._keys import SpillFailed, SpillKey, directory_owner
from fs_search.activities.storage._spills import Spills, spill_workspace
from fs_search.activities.storage._storage import (
    DEFAULT_PAYLOAD_THRESHOLD,
    PayloadDriver,
    SpillStore,
    Storage,
    check_payload_room,
    local_storage,
    open_storage,
    storage_for,
)

if TYPE_CHECKING:
    from fs_search.activities.storage._s3 import S3PayloadDriver, S3SpillStore
    from fs_search.activities.storage._s3_client import client_kwargs

_LAZY = {
    "S3PayloadDriver": "fs_search.activities.storage._s3",
    "S3SpillStore": "fs_search.activities.storage._s3",
    "client_kwargs": "fs_search.activities.storage._s3_client",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_PAYLOAD_THRESHOLD",
    "FileSpillStore",
    "LocalDirectoryDriver",
    "PayloadDriver",
    "S3PayloadDriver",
    "S3SpillStore",
    "Spills",
    "SpillFailed",
    "SpillKey",
    "SpillStore",
    "Storage",
    "check_payload_room",
    "client_kwargs",
    "directory_owner",
    "local_storage",
    "open_storage",
    "spill_workspace",
    "storage_for",
]
