"""The storage seam: spill artifacts and Temporal payloads, ``file://`` or ``s3://``.

``open_storage(url)`` / ``storage_for(config)`` give a :class:`Storage` with both halves;
the backends' modules (``files``, ``s3``) are imported only when a URL needs them.
"""

from __future__ import annotations

from fs_search.activities.storage.files import FileSpillStore, LocalDirectoryDriver
from fs_search.activities.storage.keys import SpillFailed, SpillKey
from fs_search.activities.storage.seam import (
    DEFAULT_PAYLOAD_THRESHOLD,
    PayloadDriver,
    SpillStore,
    Storage,
    local_storage,
    open_storage,
    storage_for,
)

__all__ = [
    "DEFAULT_PAYLOAD_THRESHOLD",
    "FileSpillStore",
    "LocalDirectoryDriver",
    "PayloadDriver",
    "SpillFailed",
    "SpillKey",
    "SpillStore",
    "Storage",
    "local_storage",
    "open_storage",
    "storage_for",
]
