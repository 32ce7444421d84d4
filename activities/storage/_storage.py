"""The storage seam: where complete results go, spill artifacts and Temporal payloads alike.

One URL names both halves, and they always live together:

* ``file:///dir`` (or no URL: a per-user cache directory): artifacts are files under
  ``dir`` the model opens with its read tool; payloads are ``dir/payloads/<sha256>.payload``
  (single-host: caller and worker must share the filesystem).
* ``s3://bucket/prefix``: artifacts under ``prefix/`` paged with read_spill; payloads under
  ``v0/`` of the same bucket, through Temporal's own ``S3StorageDriver``.

Workers open a :class:`Storage` (both halves); callers need only its payload half, as the
``ExternalStorage`` ``FsSearchPlugin`` installs.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    ExternalStorage,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

from fs_search.activities._budget import SAVE_MARGIN_S, SAVE_TIMEOUT_S, window_s
from fs_search.activities._config import (
    DEFAULT_PAYLOAD_THRESHOLD,
    DEFAULT_SPILL_TTL_HOURS,
    S3_ENDPOINT_URL_ENV,
    SPILL_URL_ENV,
    ConfigError,
    StorageSettings,
    endpoint_url_problem,
    spill_url_problem,
)
from fs_search.activities._contract import ReadSpillResult, SpillRef
from fs_search.activities._progress import Progress, time_left
from fs_search.activities.storage._files import (
    FileSpillStore,
    LocalDirectoryDriver,
    default_spill_dir,
)
from fs_search.activities.storage._keys import SpillKey
from fs_search.activities.storage._payloads import (
    budget_left,
    keep_budget,
    payload_failure,
    reason_of,
)

log = logging.getLogger(__name__)

# An artifact as the digests make it: text, or (built in place, large) its UTF-8 bytes.
Artifact = str | bytes | bytearray


class SpillStore(Protocol):
    """Where over-cap results are saved in full."""

    backend: str
    """``file`` or ``s3``."""
    model_readable: bool
    """Whether the model's own ``read`` tool can open a locator (co-located files)."""

    def describe(self) -> str:
        """A one-line description for logs."""
        ...

    async def save(self, key: SpillKey, text: Artifact) -> SpillRef:
        """Store ``text`` (or its UTF-8 bytes) under ``key``; return its locator and
        retrieval hint.

        Raises:
            SpillFailed: the store could not take it (said in our words).
        """
        ...

    async def read(
        self, locator: str, *, offset: int, limit: int, workspace: str | None = None
    ) -> ReadSpillResult:
        """A page of an artifact; refuses locators outside this store (INVALID_ARGUMENT).

        ``workspace``: refuse an artifact of any other workspace too (INVALID_ARGUMENT, the
        artifact never opened); None reads any of the store's (the operator's ``spill read``).
        The page was checked by the caller (``ReadSpillRequest.checked``/``check_request``).
        """
        ...

    async def check(self) -> None:
        """Raise when the store cannot be used right now (start-up diagnostics)."""
        ...

    async def prune(self) -> int:
        """Delete artifacts older than the retention period; return how many."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


class PayloadDriver(Protocol):
    """A Temporal ``StorageDriver`` that can also say whether it is usable now."""

    def name(self) -> str:
        """See temporalio's StorageDriver."""
        ...

    def type(self) -> str:
        """See temporalio's StorageDriver."""
        ...

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        """See temporalio's StorageDriver."""
        ...

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        """See temporalio's StorageDriver."""
        ...

    def describe(self) -> str:
        """A one-line description for logs."""
        ...

    async def check(self, payload_bytes: int = 0) -> None:
        """Raise when payloads cannot be stored right now, or (``payload_bytes`` > 0) when
        there is no room for a payload of about that size (an ``OSError`` ENOSPC)."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


@dataclass
class Storage:
    """The two stores one URL names: the spill store (complete results, read with the
    model's read tool or read_spill) and the payload store Temporal offloads large payloads
    to."""

    spill_store: SpillStore
    payload_store: PayloadDriver
    payload_threshold: int = DEFAULT_PAYLOAD_THRESHOLD

    @classmethod
    def beside(
        cls, spill_store: SpillStore, *, payload_threshold: int = DEFAULT_PAYLOAD_THRESHOLD
    ) -> Storage:
        """The storage whose payload store lives beside ``spill_store`` (see the module
        docstring)."""
        if isinstance(spill_store, FileSpillStore):
            payloads: PayloadDriver = LocalDirectoryDriver(spill_store.directory / "payloads")
        else:
            from fs_search.activities.storage._s3 import S3PayloadDriver, S3SpillStore

            if not isinstance(spill_store, S3SpillStore):
                raise TypeError(f"no payload store goes with {type(spill_store).__name__}")
            payloads = S3PayloadDriver(
                spill_store.bucket, endpoint_url=spill_store.client.endpoint_url
            )
        return cls(spill_store, payloads, payload_threshold)

    def external_storage(self) -> ExternalStorage:
        """Temporal's ExternalStorage over the payload half (for FsSearchPlugin)."""
        return ExternalStorage(
            drivers=[self.payload_store],  # type: ignore[list-item]
            payload_size_threshold=self.payload_threshold,
        )

    def describe(self) -> str:
        """A one-line description for logs."""
        return f"{self.spill_store.describe()} (payloads {self.payload_store.describe()})"

    async def close(self) -> None:
        """Release both halves' connections."""
        try:
            await self.spill_store.close()
        finally:
            await self.payload_store.close()


def open_storage(
    url: str | None,
    *,
    s3_endpoint_url: str | None = None,
    ttl_hours: float = DEFAULT_SPILL_TTL_HOURS,
    payload_threshold: int = DEFAULT_PAYLOAD_THRESHOLD,
    setting: str = SPILL_URL_ENV,
    endpoint_setting: str = S3_ENDPOINT_URL_ENV,
) -> Storage:
    """The storage ``url`` names (see the module docstring).

    Args:
        setting, endpoint_setting: the names errors give ``url`` and ``s3_endpoint_url``
            (where the user set them).

    Raises:
        ConfigError: ``url`` names no store (``FS_SEARCH_SPILL_URL='s3:/x': an S3 store is
            written s3://bucket/prefix, ...``), or the endpoint is not an http(s) URL.
    """
    problem = spill_url_problem(url, endpoint_setting=endpoint_setting) if url else None
    if problem:
        raise ConfigError(f"{setting}={url!r}: {problem}")
    problem = endpoint_url_problem(s3_endpoint_url) if s3_endpoint_url else None
    if problem:
        raise ConfigError(f"{endpoint_setting}={s3_endpoint_url!r}: {problem}")
    spill_store: SpillStore
    if not url:
        spill_store = FileSpillStore(default_spill_dir(), ttl_hours=ttl_hours)
    elif url.lower().startswith("file:"):
        spill_store = FileSpillStore.from_url(url, ttl_hours=ttl_hours)
    else:
        # Imported only for S3: aioboto3 takes half a second to import.
        from fs_search.activities.storage._s3 import S3SpillStore

        spill_store = S3SpillStore.from_url(url, endpoint_url=s3_endpoint_url)
    return Storage.beside(spill_store, payload_threshold=payload_threshold)


def storage_for(settings: StorageSettings) -> Storage:
    """The storage the settings name (``spill_url``, ``s3_endpoint_url``, ...)."""
    return open_storage(
        settings.spill_url,
        s3_endpoint_url=settings.s3_endpoint_url,
        ttl_hours=settings.spill_ttl_hours,
        payload_threshold=settings.payload_threshold_bytes,
    )


def local_storage(
    directory: str | os.PathLike[str],
    *,
    ttl_hours: float = DEFAULT_SPILL_TTL_HOURS,
    payload_threshold: int = DEFAULT_PAYLOAD_THRESHOLD,
) -> Storage:
    """``file://`` storage in ``directory``: artifacts there, payloads in ``payloads/``."""
    files = FileSpillStore(directory, ttl_hours=ttl_hours)
    return Storage.beside(files, payload_threshold=payload_threshold)


async def check_payload_room(storage: Storage, estimate: int, progress: Progress) -> None:
    """Fail once, clearly, when a large result would need a store that is down or full.

    A result over the payload threshold crosses Temporal through external storage; if
    that store is unreachable or has no room for it, the SDK's upload would fail after
    the activity returned. The check is bounded like a spill; with no time left for it,
    the upload itself is bounded by the attempt and fails as clearly
    (:func:`storing_payload`). The call's budget end is kept for that
    upload, which runs after the activity returned.
    """
    ends = progress.budget_ends()
    keep_budget(ends)
    if estimate < storage.payload_threshold:
        return
    payloads = storage.payload_store
    limit = window_s(
        time_left(),
        cap_s=SAVE_TIMEOUT_S,
        margin_s=SAVE_MARGIN_S,
        budget_left_s=budget_left(ends),
    )
    if limit <= 0:
        return
    try:
        async with asyncio.timeout(limit):
            await payloads.check(estimate)
    except asyncio.CancelledError:
        raise
    except Exception as e:  # noqa: BLE001
        log.warning(
            "payload store %s cannot take a result of about %d bytes: %s: %s",
            payloads.describe(),
            estimate,
            type(e).__name__,
            e,
        )
        raise payload_failure(estimate, reason_of(e)) from e
