"""Open the spill store FS_SEARCH_SPILL_URL names (file:// by default)."""

from __future__ import annotations

from fs_search.activities.config import FsSearchConfig
from fs_search.activities.spill import FileSpillStore, SpillStore, default_spill_dir
from fs_search.workflows.plugin import FsSearchPlugin


def open_store(config: FsSearchConfig) -> SpillStore:
    """The configured store: ``file://<dir>`` (default: a per-user cache directory)."""
    url = config.spill_url
    if not url:
        return FileSpillStore(default_spill_dir(), ttl_hours=config.spill_ttl_hours)
    if url.startswith("file://"):
        return FileSpillStore.from_url(url, ttl_hours=config.spill_ttl_hours)
    raise ValueError(
        f"FS_SEARCH_SPILL_URL {url!r}: expected file:///absolute/dir or s3://bucket/prefix"
    )


def plugin_for(config: FsSearchConfig) -> FsSearchPlugin:
    """The FsSearchPlugin matching this worker's store (same converter as its callers)."""
    return FsSearchPlugin()
