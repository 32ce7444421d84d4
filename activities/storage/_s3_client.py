"""S3 clients for both halves of the ``s3://`` backend: one lazily opened aioboto3 client each."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlparse

import aioboto3
from aiobotocore.config import AioConfig
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
from temporalio.contrib.aws.s3driver import S3StorageDriverClient
from temporalio.contrib.aws.s3driver.aioboto3 import new_aioboto3_client

# Fail fast when the endpoint is down: a spill is best effort and must not hold a search.
CLIENT_CONFIG = AioConfig(
    connect_timeout=2,
    read_timeout=10,
    retries={"max_attempts": 2, "mode": "standard"},
)
# Every artifact carries this user metadata: read_spill reads no object the store did not
# write, even one whose key has the artifact shape.
MARKER = {"fs-search": "spill"}
S3_FAILURES = (BotoCoreError, ClientError, OSError)


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

    async def head_bucket(self, bucket: str) -> None:
        """Raise unless ``bucket`` answers now (the client reopens after a failure)."""
        try:
            await (await self.get()).head_bucket(Bucket=bucket)
        except Exception:
            await self.close()
            raise

    async def close(self) -> None:
        """Close the client (it reopens on next use)."""
        context, self._context, self._client = self._context, None, None
        if context is not None:
            try:
                await context.__aexit__(None, None, None)
            except Exception:  # noqa: BLE001 - closing a broken client is best effort
                pass


class LazyAioboto3Client(S3StorageDriverClient):
    """Temporal's aioboto3 adapter over a client that is opened on first use.

    A plugin is built before any event loop runs; the aioboto3 client must be opened inside
    one. After a failure the client is reopened, so an S3 outage heals by itself.
    """

    def __init__(self, endpoint_url: str | None = None) -> None:
        self.endpoint_url = endpoint_url
        self._lazy = LazyS3Client(endpoint_url)

    async def _adapter(self) -> S3StorageDriverClient:
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

    async def head_bucket(self, bucket: str) -> None:
        """See LazyS3Client.head_bucket."""
        await self._lazy.head_bucket(bucket)

    async def _guard(self, work: Any) -> Any:
        try:
            return await work
        except Exception:
            await self._lazy.close()
            raise

    async def close(self) -> None:
        """Release the client."""
        await self._lazy.close()


def in_our_words(error: BaseException, action: str) -> str:
    """What failed, for the model: never the endpoint, bucket, key or exception text."""
    if isinstance(error, ClientError):
        if error.response.get("Error", {}).get("Code") == "NoSuchBucket":
            return "the spill store's bucket does not exist"
        return f"the spill store refused the {action}"
    if isinstance(error, NoCredentialsError):
        return "the worker has no credentials for the spill store"
    return "the spill store is unreachable"
