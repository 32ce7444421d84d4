"""External payload storage so large results never hit Temporal's payload limit.

* ``s3://`` stores: Temporal's own ``S3StorageDriver`` on an aioboto3 client.
* ``file://`` stores: :class:`LocalDirectoryDriver`, payloads as files in a local directory.
  Single-host only: the caller and the worker must share that filesystem (as in the
  embedded CLI, or a test); a caller elsewhere cannot read them.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.contrib.aws.s3driver import S3StorageDriver, S3StorageDriverClient
from temporalio.converter import (
    ExternalStorage,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

# Payloads at or above this size leave the event history for the store. Well under
# Temporal's 512 KiB warning and 2 MiB limit.
DEFAULT_PAYLOAD_THRESHOLD = 256 * 1024
_DIGEST = re.compile(r"^[0-9a-f]{64}$")


class LocalDirectoryDriver(StorageDriver):
    """Payloads as ``<directory>/<sha256>.payload`` files (content-addressed, verified on read)."""

    def __init__(self, directory: str | os.PathLike[str], *, name: str = "fs_search.local") -> None:
        self.directory = Path(os.path.abspath(directory))
        self._name = name

    def name(self) -> str:
        """See StorageDriver."""
        return self._name

    def type(self) -> str:
        """See StorageDriver."""
        return "fs_search.local"

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        """See StorageDriver."""
        return await asyncio.to_thread(self._store_sync, payloads)

    def _store_sync(self, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        self.directory.mkdir(parents=True, exist_ok=True)
        claims = []
        for payload in payloads:
            data = payload.SerializeToString()
            digest = hashlib.sha256(data).hexdigest()
            target = self.directory / f"{digest}.payload"
            if not target.exists():
                fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, target)
            else:
                os.utime(target)  # keep it from being pruned while in use
            claims.append(StorageDriverClaim(claim_data={"sha256": digest}))
        return claims

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        """See StorageDriver."""
        return await asyncio.to_thread(self._retrieve_sync, claims)

    def _retrieve_sync(self, claims: Sequence[StorageDriverClaim]) -> list[Payload]:
        out = []
        for claim in claims:
            digest = claim.claim_data.get("sha256", "")
            if not _DIGEST.match(digest):
                raise ValueError(f"invalid local payload claim {dict(claim.claim_data)!r}")
            path = self.directory / f"{digest}.payload"
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                raise FileNotFoundError(
                    f"payload {digest} is not in {self.directory}: the file:// payload store is "
                    "single-host (caller and worker must share it), or it expired"
                ) from None
            if hashlib.sha256(data).hexdigest() != digest:
                raise ValueError(f"payload {path} failed its integrity check")
            payload = Payload()
            payload.ParseFromString(data)
            out.append(payload)
        return out


class LazyAioboto3Client(S3StorageDriverClient):
    """Temporal's aioboto3 adapter over a client that is opened on first use.

    A plugin is built before any event loop runs; the aioboto3 client must be opened inside
    one. After a failure the client is reopened, so an S3 outage heals by itself.
    """

    def __init__(self, endpoint_url: str | None = None) -> None:
        from fs_search.activities.spill_s3 import LazyS3Client

        self._lazy = LazyS3Client(endpoint_url)

    async def _adapter(self) -> S3StorageDriverClient:
        from temporalio.contrib.aws.s3driver.aioboto3 import new_aioboto3_client

        return new_aioboto3_client(await self._lazy.get())

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        """See S3StorageDriverClient."""
        await self._guard((await self._adapter()).put_object(bucket=bucket, key=key, data=data))

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        """See S3StorageDriverClient."""
        return bool(
            await self._guard((await self._adapter()).object_exists(bucket=bucket, key=key))
        )

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        """See S3StorageDriverClient."""
        return bytes(await self._guard((await self._adapter()).get_object(bucket=bucket, key=key)))

    async def _guard(self, work: Any) -> Any:
        try:
            return await work
        except Exception:
            await self._lazy.close()
            raise

    async def close(self) -> None:
        """Release the client."""
        await self._lazy.close()


def external_storage_for(
    spill_url: str | None,
    *,
    s3_endpoint_url: str | None = None,
    payload_threshold: int = DEFAULT_PAYLOAD_THRESHOLD,
    local_directory: str | os.PathLike[str] | None = None,
) -> ExternalStorage:
    """The external storage matching a spill URL.

    ``s3://bucket/prefix`` -> S3StorageDriver on that bucket (keys ``v0/...``, content
    addressed); ``file:///dir`` or None -> a LocalDirectoryDriver in ``<dir>/payloads``.
    """
    driver: StorageDriver
    if spill_url and spill_url.startswith("s3://"):
        from fs_search.activities.spill_s3 import parse_s3_url

        bucket, _ = parse_s3_url(spill_url)
        driver = S3StorageDriver(client=LazyAioboto3Client(s3_endpoint_url), bucket=bucket)
    else:
        driver = LocalDirectoryDriver(local_directory or _local_payload_dir(spill_url))
    return ExternalStorage(drivers=[driver], payload_size_threshold=payload_threshold)


def _local_payload_dir(spill_url: str | None) -> Path:
    from fs_search.activities.spill import FileSpillStore, default_spill_dir

    base = (
        FileSpillStore.from_url(spill_url, ttl_hours=1).directory
        if spill_url
        else default_spill_dir()
    )
    return base / "payloads"
