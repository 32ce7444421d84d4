"""The ``s3://`` backend: artifacts paged with read_spill, payloads through Temporal's S3 driver.

Both live in one bucket: artifacts under ``<prefix>/<key>`` (the spill URL's prefix),
Temporal payloads under ``v0/...`` where Temporal's ``S3StorageDriver`` puts them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from botocore.exceptions import ClientError
from temporalio.api.common.v1 import Payload
from temporalio.contrib.aws.s3driver import S3StorageDriver
from temporalio.converter import StorageDriverClaim, StorageDriverStoreContext

from fs_search.activities._contract import ErrorCode, ReadSpillResult, SpillRef
from fs_search.activities._errors import SearchError
from fs_search.activities.results import Pager, line_count
from fs_search.activities.storage._files import READ_BLOCK_BYTES
from fs_search.activities.storage._keys import (
    SpillFailed,
    SpillKey,
    artifact_key,
    expired,
    not_an_artifact,
)
from fs_search.activities.storage._payloads import storing_payload
from fs_search.activities.storage._s3_client import (
    MARKER,
    S3_FAILURES,
    LazyAioboto3Client,
    LazyS3Client,
    in_our_words,
    parse_s3_url,
)

log = logging.getLogger(__name__)


class S3SpillStore:
    """Artifacts in S3 under ``s3://<bucket>/<prefix>/``; read back with read_spill.

    Keys are ``<prefix>/<workspace>/<workflow id>/<run id>/<activity id>.<tool>.txt``
    (percent-encoded segments, no model input), so a retried activity overwrites its
    artifact and read_spill tells a workspace's artifacts from another's before reading.
    Expiry is a bucket lifecycle rule (see infra/), not the worker. Without a prefix the
    store shares its bucket's root with Temporal's ``v0/`` payloads: read_spill accepts only
    keys of the artifact shape that carry the store's marker.
    """

    backend = "s3"
    model_readable = False

    def __init__(self, bucket: str, prefix: str, *, endpoint_url: str | None = None) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.client = LazyS3Client(endpoint_url)

    @classmethod
    def from_url(cls, url: str, *, endpoint_url: str | None = None) -> S3SpillStore:
        """``s3://bucket/prefix`` -> a store."""
        bucket, prefix = parse_s3_url(url)
        return cls(bucket, prefix, endpoint_url=endpoint_url)

    def describe(self) -> str:
        """See SpillStore."""
        where = f" at {self.client.endpoint_url}" if self.client.endpoint_url else ""
        return f"s3://{self.bucket}/{self.prefix}{where}"

    async def save(self, key: SpillKey, text: str | bytes | bytearray) -> SpillRef:
        """See SpillStore."""
        object_key = self._key_of(key.relpath())
        body = text.encode("utf-8", "replace") if isinstance(text, str) else text
        try:
            s3 = await self.client.get()
            await s3.put_object(
                Bucket=self.bucket,
                Key=object_key,
                Body=body,
                ContentType="text/plain; charset=utf-8",
                Metadata=MARKER,
            )
        except S3_FAILURES as e:
            await self.client.close()
            raise SpillFailed(in_our_words(e, "write")) from e
        lines = line_count(text)
        locator = f"s3://{self.bucket}/{object_key}"
        return SpillRef(
            locator=locator,
            hint=(
                f"Page through it with the read_spill tool (locator {locator}, {lines} lines; "
                "offset and limit are in lines)."
            ),
        )

    def _confine(self, locator: str, workspace: str | None) -> str:
        root = f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"
        return self._key_of(artifact_key(locator, root=root, workspace=workspace).relpath())

    def _key_of(self, relpath: str) -> str:
        return f"{self.prefix}/{relpath}" if self.prefix else relpath

    async def read(
        self, locator: str, *, offset: int, limit: int, workspace: str | None = None
    ) -> ReadSpillResult:
        """See SpillStore."""
        key = self._confine(locator, workspace)
        try:
            s3 = await self.client.get()
            response = await s3.get_object(Bucket=self.bucket, Key=key)
            # aiobotocore's StreamingBody.__aenter__ returns the bare aiohttp response, whose
            # read() takes no size: read through the StreamingBody, use the context to close.
            body = response["Body"]
            async with body:
                if not MARKER.items() <= (response.get("Metadata") or {}).items():
                    raise not_an_artifact(locator)
                # Streamed: memory is the page, not the object.
                pager = Pager(offset=offset, limit=limit)
                while block := await body.read(READ_BLOCK_BYTES):
                    pager.feed(block)
        except S3_FAILURES as e:
            if not isinstance(e, ClientError):
                await self.client.close()
            elif e.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise expired(locator) from None
            log.warning("reading spill artifact %s failed: %s", key, e)
            raise SearchError(
                ErrorCode.SEARCH_FAILED,
                f"the spill artifact {locator!r} cannot be read: {in_our_words(e, 'read')}",
            ) from None
        return pager.result(locator)

    async def check(self) -> None:
        """See SpillStore."""
        await self.client.head_bucket(self.bucket)

    async def prune(self) -> int:
        """See SpillStore: S3 artifacts expire by the bucket's lifecycle rule."""
        return 0

    async def close(self) -> None:
        """Release the S3 client."""
        await self.client.close()


class S3PayloadDriver(S3StorageDriver):
    """Temporal's ``S3StorageDriver`` on a lazily opened client, with a readiness check."""

    def __init__(self, bucket: str, *, endpoint_url: str | None = None) -> None:
        self.bucket = bucket
        self.client = LazyAioboto3Client(endpoint_url)
        super().__init__(client=self.client, bucket=bucket)

    def describe(self) -> str:
        """A one-line description for logs."""
        where = f" at {self.client.endpoint_url}" if self.client.endpoint_url else ""
        return f"s3://{self.bucket}/v0{where}"

    async def check(self, payload_bytes: int = 0) -> None:
        """Raise when the payload bucket cannot be reached now (S3 has room for any size)."""
        await self.client.head_bucket(self.bucket)

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        """See StorageDriver. In an activity: bounded by the attempt, failing as the
        contract's SEARCH_FAILED in plain words (``_payloads.storing_payload``)."""
        return await storing_payload(
            lambda: super(S3PayloadDriver, self).store(context, payloads),
            size=sum(p.ByteSize() for p in payloads),
            where=self.describe(),
        )

    async def close(self) -> None:
        """Release the S3 client."""
        await self.client.close()
