"""Helpers for testing agent workflows that use FsSearchTools (time-skipping friendly).

Two ways to stand in for a workspace's worker on the test environment:

* :func:`search_worker` runs the real activities in-process over a local directory
  (e.g. pytest's ``tmp_path``), on the workspace's queue.
* :func:`canned_activities` registers fixed results (or errors) under the same activity
  names, for tests that must not depend on a filesystem.

The client must use the pydantic converter: install :class:`FsSearchPlugin` on it, e.g.
``WorkflowEnvironment.start_time_skipping(plugins=[FsSearchPlugin()])``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from fs_search.activities.config import FsSearchConfig
from fs_search.activities.errors import SearchError
from fs_search.activities.models import (
    GLOB_ACTIVITY,
    GREP_ACTIVITY,
    READ_SPILL_ACTIVITY,
    TOOLS_ACTIVITY,
    ErrorCode,
    GlobRequest,
    GlobResult,
    GrepRequest,
    GrepResult,
    ReadSpillRequest,
    ReadSpillResult,
    ToolsResult,
    task_queue_for,
)
from fs_search.activities.spill import FileSpillStore

Canned = Any  # a result model, a callable(request) -> result, or an exception to raise


@contextlib.asynccontextmanager
async def search_worker(
    client: Client,
    workspace: str | os.PathLike[str],
    *,
    workspace_id: str = "test",
    spill_dir: str | os.PathLike[str] | None = None,
    **settings: Any,
) -> AsyncIterator[Worker]:
    """Run the real search activities over ``workspace`` on ``fs-search/<workspace_id>``.

    Args:
        client: the test environment's client (with FsSearchPlugin installed).
        workspace: the directory searched, e.g. ``tmp_path``.
        workspace_id: the id your workflow passes to FsSearchTools.
        spill_dir: where over-cap results are saved (default: ``<workspace>/../spill``
            next to the workspace, so it is cleaned up with ``tmp_path``).
        settings: FsSearchConfig overrides; ``sample_over_cap_glob_results`` defaults to
            True here (a test has no deployment to choose for it).
    """
    from fs_search.worker.app import build_activities, maintenance, new_worker

    settings.setdefault("sample_over_cap_glob_results", True)
    config = FsSearchConfig.load(getenv=lambda _: None, overrides=settings)
    spill = Path(spill_dir) if spill_dir else Path(workspace).resolve().parent / "spill"
    store = FileSpillStore(spill, ttl_hours=config.spill_ttl_hours)
    activities = await build_activities(config, workspace, workspace_id=workspace_id, store=store)
    worker = new_worker(client, activities, workspace_id=workspace_id)
    async with maintenance(activities), worker:
        yield worker


def canned_activities(
    *,
    glob: Canned = None,
    grep: Canned = None,
    tools: Canned = None,
    read_spill: Canned = None,
) -> list[Callable[..., Any]]:
    """Activities that answer with fixed results under fs-search's activity names.

    Each argument is a result model, a callable taking the request and returning one, or
    an exception to raise (a :class:`SearchError` crosses as its contract error). All four
    names are registered; one left unset fails with SEARCH_FAILED rather than leaving the
    call to retry forever.

    Register them on a Worker polling ``task_queue_for(workspace_id)``.
    """

    @activity.defn(name=GLOB_ACTIVITY)
    async def canned_glob(req: GlobRequest) -> GlobResult:
        return _answer(GLOB_ACTIVITY, glob, req)

    @activity.defn(name=GREP_ACTIVITY)
    async def canned_grep(req: GrepRequest) -> GrepResult:
        return _answer(GREP_ACTIVITY, grep, req)

    @activity.defn(name=TOOLS_ACTIVITY)
    async def canned_tools() -> ToolsResult:
        return _answer(TOOLS_ACTIVITY, tools, None)

    @activity.defn(name=READ_SPILL_ACTIVITY)
    async def canned_read_spill(req: ReadSpillRequest) -> ReadSpillResult:
        return _answer(READ_SPILL_ACTIVITY, read_spill, req)

    return [canned_glob, canned_grep, canned_tools, canned_read_spill]


def _answer(name: str, canned: Canned, req: Any) -> Any:
    if canned is None:
        raise SearchError(
            ErrorCode.SEARCH_FAILED, f"no canned result was registered for {name}"
        ).to_application_error()
    if isinstance(canned, SearchError):
        raise canned.to_application_error()
    if isinstance(canned, BaseException):
        raise canned
    if callable(canned) and not hasattr(canned, "model_dump"):
        try:
            return canned(req) if req is not None else canned()
        except SearchError as e:
            raise e.to_application_error() from None
    return canned


__all__ = ["canned_activities", "search_worker", "task_queue_for"]
