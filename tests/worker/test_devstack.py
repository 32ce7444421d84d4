"""Searches through a real Temporal dev server: cancel, budget, overflow, errors."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import CancelledError
from temporalio.worker import Worker

from fs_search.activities._contract import ErrorCode
from fs_search.worker import new_worker
from tests.helpers import sparse_file, write_tree
from tests.procs import alive, group, wait_for_rg
from tests.workflows_under_test import Calls, CallsWorkflow, CancelOneCallWorkflow, Options

WORKFLOWS = [CallsWorkflow, CancelOneCallWorkflow]


@contextlib.asynccontextmanager
async def _long_grep(dev_env, make_activities, tmp_path: Path, workflow) -> AsyncIterator[tuple]:
    """A workflow running one grep that takes minutes; yields its handle and rg's group."""
    ws = tmp_path / "ws"
    sparse_file(ws / "huge.bin")
    acts = await make_activities(ws)
    wsid, queue = f"ws-{uuid.uuid4()}", f"wf-{uuid.uuid4()}"
    async with (
        new_worker(dev_env.client, acts, workspace_id=wsid),
        Worker(dev_env.client, task_queue=queue, workflows=WORKFLOWS),
    ):
        spec = Calls(
            options=Options(workspace_id=wsid),
            calls=[("grep", {"pattern": "needle", "path": "huge.bin"})],
        )
        handle = await dev_env.client.start_workflow(
            workflow.run, spec, id=f"wf-{uuid.uuid4()}", task_queue=queue
        )
        pgid = await wait_for_rg(acts)
        assert alive(group(pgid))
        yield handle, pgid


async def test_cancel_one_call_kills_rg_group(dev_env, make_activities, tmp_path: Path):
    """Cancelling the call mid-search kills rg's process group and yields SEARCH_ABORTED."""
    async with _long_grep(dev_env, make_activities, tmp_path, CancelOneCallWorkflow) as (
        handle,
        pgid,
    ):
        requested = time.monotonic()
        await handle.signal(CancelOneCallWorkflow.cancel_call)
        result = await handle.result()
        latency = time.monotonic() - requested
    assert result.is_error and result.error is not None
    assert result.error.code == ErrorCode.SEARCH_ABORTED
    assert not alive(group(pgid))
    assert latency < 5, latency


async def test_whole_workflow_cancel_propagates(dev_env, make_activities, tmp_path: Path):
    """Cancelling the whole workflow cancels the workflow (not a tool result) and kills rg."""
    async with _long_grep(dev_env, make_activities, tmp_path, CallsWorkflow) as (handle, pgid):
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()
        assert isinstance(info.value.cause, CancelledError)
        assert not alive(group(pgid))


async def test_budget_and_overflow(dev_env, make_activities, tmp_path: Path):
    """timeout_ms ends in SEARCH_ABORTED; over-cap raw output in SEARCH_RAW_OUTPUT_OVERFLOW."""
    ws = tmp_path / "ws"
    sparse_file(ws / "huge.bin")
    write_tree(ws, {"many.txt": "match me\n" * 200_000})
    acts = await make_activities(ws, raw_output_max_bytes=1_000_000)
    wsid = f"ws-{uuid.uuid4()}"
    queue = f"wf-{uuid.uuid4()}"
    async with (
        new_worker(dev_env.client, acts, workspace_id=wsid),
        Worker(dev_env.client, task_queue=queue, workflows=WORKFLOWS),
    ):
        spec = Calls(
            options=Options(workspace_id=wsid, timeout_ms=700),
            calls=[
                ("grep", {"pattern": "needle", "path": "huge.bin"}),
                ("grep", {"pattern": "match", "path": "many.txt"}),
            ],
        )
        results = await dev_env.client.execute_workflow(
            CallsWorkflow.run, spec, id=f"wf-{uuid.uuid4()}", task_queue=queue
        )
    print([r.text for r in results])
    assert results[0].error.code == ErrorCode.SEARCH_ABORTED
    assert results[1].error.code == ErrorCode.SEARCH_RAW_OUTPUT_OVERFLOW
