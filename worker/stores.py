"""Open the spill store FS_SEARCH_SPILL_URL names, and the plugin that matches it."""

from __future__ import annotations

from fs_search.activities.config import FsSearchConfig
from fs_search.activities.spill import FileSpillStore, SpillStore, default_spill_dir
from fs_search.workflows.plugin import FsSearchPlugin


def open_store(config: FsSearchConfig) -> SpillStore:
    """``file://<dir>`` (default: a per-user cache directory) or ``s3://bucket/prefix``."""
    url = config.spill_url
    if not url:
        return FileSpillStore(default_spill_dir(), ttl_hours=config.spill_ttl_hours)
    if url.startswith("file://"):
        return FileSpillStore.from_url(url, ttl_hours=config.spill_ttl_hours)
    if url.startswith("s3://"):
        # Imported only for S3 stores: aioboto3 takes half a second to import.
        from fs_search.activities.spill_s3 import S3SpillStore

        return S3SpillStore.from_url(url, endpoint_url=config.s3_endpoint_url)
    raise ValueError(
        f"FS_SEARCH_SPILL_URL {url!r}: expected file:///absolute/dir or s3://bucket/prefix"
    )


def plugin_for(config: FsSearchConfig) -> FsSearchPlugin:
    """The FsSearchPlugin for this worker's store: the same converter and storage as callers."""
    return FsSearchPlugin(
        spill_url=config.spill_url,
        s3_endpoint_url=config.s3_endpoint_url,
        payload_threshold=config.payload_threshold_bytes,
        getenv=lambda _: None,
    )
