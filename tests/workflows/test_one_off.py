"""FsSearchClient: one-off calls from a client, each one standalone activity (no workflow).

Real dev server, real search activities and rg; the fallback to the one-call workflow on
Temporal's time-skipping server, which has no standalone activities.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from temporalio.client import ActivityExecutionStatus
from temporalio.worker import Worker

from fs_search.activities._contract import ErrorCode, GrepResult, ToolsResult
from fs_search.worker import new_worker
from fs_search.worker.testing import search_worker
from fs_search.workflows import FsSearchClient
from fs_search.workflows import _one_off as one_off_module
from tests.helpers import sparse_file, write_tree
from tests.procs import alive, group, wait_for_rg
from tests.workflows.test_service import CALLS, CODES, TREE, _codes
from tests.workflows_under_test import (
    Calls,
    CallsWorkflow,
    CatalogueWorkflow,
    Options,
)


async def _through_workflows(client, wsid: str) -> tuple[list, ToolsResult]:
    queue = f"wf-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[CallsWorkflow, CatalogueWorkflow]):
        results = await client.execute_workflow(
            CallsWorkflow.run,
            Calls(options=Options(workspace_id=wsid), calls=CALLS),
            id=f"wf-{uuid.uuid4()}",
            task_queue=queue,
        )
        catalogue = await client.execute_workflow(
            CatalogueWorkflow.run,
            Options(workspace_id=wsid),
            id=f"wf-{uuid.uuid4()}",
            task_queue=queue,
        )
    return results, catalogue


async def _count_workflows_since(client, since: datetime) -> int:
    query = f"StartTime >= '{since.isoformat().replace('+00:00', 'Z')}'"
    return (await client.count_workflows(query)).count


async def test_results_equal_the_activity_route_and_no_workflow_starts(
    dev_env, make_activities, tmp_path: Path
):
    """glob/grep/call/tools as standalone activities: the same ToolResults, codes and
    catalogue as FsSearchTools in a workflow, and not one workflow started for them."""
    ws = write_tree(tmp_path / "ws", TREE)
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws, workspace_id=wsid)
    client = dev_env.client
    async with new_worker(client, acts, workspace_id=wsid):
        direct, catalogue = await _through_workflows(client, wsid)
        since = datetime.now(UTC)
        searches = FsSearchClient(client, wsid)
        one_off = [await searches.call(name, args, catalogue=catalogue) for name, args in CALLS]
        glob = await searches.glob("**/*.py")
        grep = await searches.grep("TODO", path="src", include="a.py")
        own_catalogue = await searches.tools()
        activity = await client.get_activity_handle(searches.last_id or "").describe()
        await asyncio.sleep(0.5)  # visibility catches up
        started = await _count_workflows_since(client, since)
    assert _codes(direct) == CODES
    assert [r.model_dump() for r in one_off] == [r.model_dump() for r in direct]
    assert glob == direct[2] and grep == direct[1]
    assert own_catalogue == catalogue and own_catalogue.available
    assert activity.activity_type == "fs_search.tools"
    assert json.loads(activity.raw_info.user_metadata.summary.data) == "fs_search tools"
    assert activity.status == ActivityExecutionStatus.COMPLETED
    assert started == 0


async def test_cancelling_the_call_cancels_the_activity_and_kills_rg(
    dev_env, make_activities, tmp_path: Path
):
    """Cancelling the task of a one-off call cancels its activity and returns once rg's
    process group is gone; the activity reads Canceled."""
    ws = tmp_path / "ws"
    sparse_file(ws / "huge.bin", gigabytes=200)
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws, workspace_id=wsid)
    async with new_worker(dev_env.client, acts, workspace_id=wsid):
        searches = FsSearchClient(dev_env.client, wsid)
        task = asyncio.create_task(searches.grep("zzz", path="huge.bin"))
        pgid = await wait_for_rg(acts)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not alive(group(pgid))  # gone when the cancelled call returned
        description = await dev_env.client.get_activity_handle(searches.last_id or "").describe()
    assert description.status == ActivityExecutionStatus.CANCELED


async def test_an_unknown_workspace_is_named_within_10_s(dev_env):
    """No worker serves the workspace: SEARCH_FAILED naming it after one queue check."""
    wsid = f"nobody-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    result = await FsSearchClient(dev_env.client, wsid).grep("x")
    took = time.monotonic() - started
    assert result.error is not None and result.error.code == ErrorCode.SEARCH_FAILED
    assert f"no fs-search worker is serving workspace {wsid!r}" in result.text
    assert took < 10 + 5, took
    catalogue = await FsSearchClient(dev_env.client, wsid).tools()
    assert catalogue.available is False and catalogue.error is not None


async def test_a_busy_worker_is_not_missing(dev_env, make_activities, tmp_path: Path):
    """Calls waiting past schedule-to-start behind a full worker are checked, found served,
    and started again: they run (here to their budget), never "no fs-search worker"."""
    from datetime import timedelta

    ws = tmp_path / "ws"
    for name in ("a", "b", "c"):
        sparse_file(ws / f"{name}.bin", gigabytes=50)
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(
        ws, workspace_id=wsid, max_concurrent_searches=1, max_queued_searches=1
    )
    async with new_worker(dev_env.client, acts, workspace_id=wsid):
        searches = FsSearchClient(
            dev_env.client, wsid, timeout_ms=2000, schedule_to_start_timeout=timedelta(seconds=1)
        )
        results = await asyncio.gather(
            *(searches.grep("zzz", path=f"{name}.bin") for name in ("a", "b", "c"))
        )
    assert _codes(results) == ["SEARCH_ABORTED"] * 3, [r.text for r in results]


async def test_without_standalone_activities_it_falls_back_and_says_so_once(
    ts_env, tmp_path: Path, caplog
):
    """On a server without standalone activities (the time-skipping test server), calls run
    through the one-call workflow with the same results, and a warning says so once."""
    one_off_module._WARNED.clear()
    ws = write_tree(tmp_path / "ws", {**TREE, "many.txt": "".join(f"hit {i}\n" for i in range(9))})
    wsid = f"ws-{uuid.uuid4()}"
    caplog.set_level(logging.WARNING, logger=one_off_module.__name__)
    async with search_worker(ts_env.client, ws, workspace_id=wsid, grep_max_matches=3):
        searches = FsSearchClient(ts_env.client, wsid)
        grep = await searches.grep("TODO")
        again = await FsSearchClient(ts_env.client, wsid).grep("(")
        catalogue = await searches.tools()
        spilled = await searches.grep("hit")
        assert isinstance(spilled.result, GrepResult) and spilled.result.spill is not None
        page = await searches.read_spill(spilled.result.spill.locator, offset=9, limit=1)
    assert searches.standalone is False
    assert grep.text == "src/a.py:\n  Line 2: # TODO one\n\nsrc/b.py:\n  Line 1: # TODO two"
    assert again.error is not None and again.error.code == ErrorCode.SEARCH_INVALID_PATTERN
    assert catalogue.available and catalogue.workspace_id == wsid
    assert not page.is_error and "hit 8" in page.text, page.text
    warnings = [r for r in caplog.records if "does not run standalone activities" in r.message]
    assert len(warnings) == 1
    assert "fs_search.Call" in warnings[0].message
