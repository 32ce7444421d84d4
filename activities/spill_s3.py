"""The ``s3://`` spill store (aioboto3): artifacts the model pages through with read_spill."""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from urllib.parse import urlparse

import aioboto3
from aiobotocore.config import AioConfig
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from fs_search.activities.errors import SearchError
from fs_search.activities.models import ErrorCode, ReadSpillResult, SpillRef
from fs_search.activities.paging import Pager, check_page_args, line_count
from fs_search.activities.spill import (
    READ_BLOCK_BYTES,
    SpillFailed,
    SpillKey,
    artifact_relpath,
    expired,
    not_an_artifact,
)

log = logging.getLogger(__name__)

# Fail fast when the endpoint is down: a spill is best effort and must not hold a search.
CLIENT_CONFIG = AioConfig(
    connect_timeout=2,
    read_timeout=10,
    retries={"max_attempts": 2, "mode": "standard"},
)
# Every artifact carries this user metadata: read_spill reads no object the store did not
# write, even one whose key has the artifact shape.
MARKER = {"fs-search": "spill"}
_S3_FAILURES = (BotoCoreError, ClientError, OSError)


def parse_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/prefix`` -> (bucket, prefix without slashes at either end)."""
    parsed = urlparse(url)
    if parsed.scheme != "s3" or not parsed.netloc:
        raise ValueError(f"{url!r}: expected s3://bucket/prefix")
    return parsed.netloc, parsed.path.strip("/")


def s3_session() -> Any:
    """An aioboto3 session from the standard AWS configuration (env, profile, role)."""
    return aioboto3.Session()


def client_kwargs(endpoint_url: str | None) -> dict[str, Any]:
    """Arguments for ``session.client("s3", ...)``: custom endpoints use path-style addressing."""
    config = CLIENT_CONFIG
    if endpoint_url:
        config = config.merge(AioConfig(s3={"addressing_style": "path"}))
    return {"endpoint_url": endpoint_url, "config": config}


class LazyS3Client:
    """One long-lived aioboto3 S3 client, opened on first use and reopened after a failure."""

    def __init__(self, endpoint_url: str | None = None) -> None:
        self.endpoint_url = endpoint_url
        self._session = s3_session()
        self._context: Any = None
        self._client: Any = None
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def get(self) -> Any:
        """The open client (opened in the running event loop)."""
        loop = asyncio.get_running_loop()
        if self._client is not None and self._loop is loop:
            return self._client
        if self._lock is None or self._loop is not loop:
            self._lock, self._loop, self._client = asyncio.Lock(), loop, None
        async with self._lock:
            if self._client is None:
                self._context = self._session.client("s3", **client_kwargs(self.endpoint_url))
                self._client = await self._context.__aenter__()
        return self._client

    async def close(self) -> None:
        """Close the client (it reopens on next use)."""
        context, self._context, self._client = self._context, None, None
        if context is not None:
            try:
                await context.__aexit__(None, None, None)
            except Exception:  # noqa: BLE001 - closing a broken client is best effort
                pass


class S3SpillStore:
    """Artifacts in S3 under ``s3://<bucket>/<prefix>/``; read back with read_spill.

    Keys are ``<prefix>/<workflow id>/<run id>/<activity id>.<tool>.txt`` (percent-encoded
    segments, no model input), so a retried activity overwrites its artifact. Expiry is a
    bucket lifecycle rule (see infra/), not the worker. Without a prefix the store shares
    its bucket's root with Temporal's ``v0/`` payloads: read_spill accepts only keys of the
    artifact shape that carry the store's marker.
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

    async def save(self, key: SpillKey, text: str) -> SpillRef:
        """See SpillStore."""
        object_key = self._key_of(key.relpath())
        body = text.encode("utf-8", "replace")
        try:
            s3 = await self.client.get()
            await s3.put_object(
                Bucket=self.bucket,
                Key=object_key,
                Body=body,
                ContentType="text/plain; charset=utf-8",
                Metadata=MARKER,
            )
        except _S3_FAILURES as e:
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

    def _confine(self, locator: str) -> str:
        root = f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"
        relpath = artifact_relpath(locator, root=root)
        if relpath is None:
            raise not_an_artifact(locator)
        return self._key_of(relpath)

    def _key_of(self, relpath: str) -> str:
        return f"{self.prefix}/{relpath}" if self.prefix else relpath

    async def read(self, locator: str, *, offset: int, limit: int) -> ReadSpillResult:
        """See SpillStore."""
        limit = check_page_args(offset, limit)
        key = self._confine(locator)
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
        except _S3_FAILURES as e:
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
        try:
            s3 = await self.client.get()
            await s3.head_bucket(Bucket=self.bucket)
        except Exception:
            await self.client.close()
            raise

    async def prune(self) -> int:
        """See SpillStore: S3 artifacts expire by the bucket's lifecycle rule."""
        return 0

    async def close(self) -> None:
        """Release the S3 client."""
        await self.client.close()


def in_our_words(error: BaseException, action: str) -> str:
    """What failed, for the model: never the endpoint, bucket, key or exception text."""
    if isinstance(error, ClientError):
        if error.response.get("Error", {}).get("Code") == "NoSuchBucket":
            return "the spill store's bucket does not exist"
        return f"the spill store refused the {action}"
    if isinstance(error, NoCredentialsError):
        return "the worker has no credentials for the spill store"
    return "the spill store is unreachable"
