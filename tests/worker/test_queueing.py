"""Queued is not missing (docs/workflows.md): a busy worker's calls wait and run; a workspace nothing
serves is reported as such, naming it, within ~10 s by default."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

from temporalio.worker import Worker

from fs_search.activities._contract import ErrorCode, task_queue_for
from fs_search.workflows._task_queues import poll_ages
from tests.helpers import pollers_of
from tests.procs import WorkerProcess
from tests.workflows_under_test import Calls, CallsWorkflow, ConcurrentCallsWorkflow, Options

SCAN_MB = 256  # sparse: no disk, ~0.5-1 s for rg to scan


def _address(dev_env) -> str:
    return dev_env.client.service_client.config.target_host


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    with open(ws / "big.bin", "wb") as f:
        f.truncate(SCAN_MB * 1024**2)
    (ws / "a.txt").write_text("needle\n")
    return ws


async def _listed(dev_env, wsid: str) -> None:
    """One quick call through the workspace's queue, then wait until Temporal lists its worker
    as a live poller (it lists a poller once a poll delivered a task): on a machine loaded
    enough to delay the worker's first poll past a 1 s budget, the calls under test would
    otherwise be checked against an empty poller list."""
    [warm] = await _gather(
        dev_env,
        Options(workspace_id=wsid, timeout_ms=60_000),
        [("grep", {"pattern": "needle", "path": "a.txt"})],
    )
    assert not warm.is_error, warm.text
    deadline = time.monotonic() + 30
    while not [a for a in await _ages(dev_env, wsid) if a < 60]:
        assert time.monotonic() < deadline, "the worker was never listed"
        await asyncio.sleep(0.5)


async def _gather(dev_env, options: Options, calls) -> list:
    queue = f"wf-{uuid.uuid4()}"
    async with Worker(dev_env.client, task_queue=queue, workflows=[ConcurrentCallsWorkflow]):
        return await dev_env.client.execute_workflow(
            ConcurrentCallsWorkflow.run,
            Calls(options=options, calls=calls),
            id=f"queued-{uuid.uuid4()}",
            task_queue=queue,
        )


async def test_calls_behind_a_busy_worker_wait_and_run_none_reported_missing(dev_env, tmp_path):
    """12 slow greps at once against a worker that runs one search at a time, with a 2 s
    schedule-to-start: the worker takes them all at once and runs them in turn (~10 s), and
    every one succeeds. (Before: the calls past the first 2 s failed as 'no worker'.)"""
    ws, wsid = _workspace(tmp_path), f"busy-{uuid.uuid4().hex[:8]}"
    worker = WorkerProcess(
        ws, _address(dev_env), wsid, env={"FS_SEARCH_MAX_CONCURRENT_SEARCHES": "1"}
    )
    try:
        await _listed(dev_env, wsid)
        results = await _gather(
            dev_env,
            Options(workspace_id=wsid, schedule_to_start_ms=2000, timeout_ms=60_000),
            [("grep", {"pattern": "needle", "path": "big.bin"}) for _ in range(12)],
        )
    finally:
        worker.terminate()
    assert [r.text for r in results if r.is_error] == []
    assert all(r.result.total == 0 for r in results)


async def test_a_worker_full_to_its_last_slot_is_busy_not_missing(dev_env, tmp_path):
    """A worker that holds only 2 calls (FS_SEARCH_MAX_QUEUED_SEARCHES=2), 8 slow greps, a 1 s
    schedule-to-start: calls Temporal could not deliver in time are checked, the queue has a
    live poller, and they are scheduled again; every call succeeds."""
    ws, wsid = _workspace(tmp_path), f"full-{uuid.uuid4().hex[:8]}"
    worker = WorkerProcess(
        ws,
        _address(dev_env),
        wsid,
        env={"FS_SEARCH_MAX_CONCURRENT_SEARCHES": "1", "FS_SEARCH_MAX_QUEUED_SEARCHES": "2"},
    )
    try:
        await _listed(dev_env, wsid)
        results = await _gather(
            dev_env,
            Options(workspace_id=wsid, schedule_to_start_ms=1000, timeout_ms=60_000),
            [("grep", {"pattern": "needle", "path": "big.bin"}) for _ in range(8)],
        )
    finally:
        worker.terminate()
    assert [r.text for r in results if r.is_error] == []


async def test_a_worker_busy_past_the_queueing_budget_is_reported_busy(dev_env, tmp_path):
    """A worker that holds one call, busy with a 100 GB scan: a second call with a 1 s
    queueing budget is SEARCH_ABORTED as busy, naming the workspace (never 'no worker')."""
    ws, wsid = _workspace(tmp_path), f"late-{uuid.uuid4().hex[:8]}"
    with open(ws / "huge.bin", "wb") as f:
        f.truncate(100 * 1024**3)
    worker = WorkerProcess(
        ws,
        _address(dev_env),
        wsid,
        env={"FS_SEARCH_MAX_CONCURRENT_SEARCHES": "1", "FS_SEARCH_MAX_QUEUED_SEARCHES": "1"},
    )
    queue = f"wf-{uuid.uuid4()}"
    try:
        async with Worker(dev_env.client, task_queue=queue, workflows=[CallsWorkflow]):
            hog = await dev_env.client.start_workflow(
                CallsWorkflow.run,
                Calls(
                    options=Options(workspace_id=wsid, timeout_ms=60_000),
                    calls=[("grep", {"pattern": "needle", "path": "huge.bin"})],
                ),
                id=f"hog-{uuid.uuid4()}",
                task_queue=queue,
            )
            # Temporal lists a poller once its poll delivered a task (and caches the
            # list ~5 s): wait until the hog's worker is listed as live.
            deadline = time.monotonic() + 30
            while not [a for a in await _ages(dev_env, wsid) if a < 60]:
                assert time.monotonic() < deadline, "the worker was never listed"
                await asyncio.sleep(0.5)
            [late] = await dev_env.client.execute_workflow(
                CallsWorkflow.run,
                Calls(
                    options=Options(
                        workspace_id=wsid, schedule_to_start_ms=1000, queue_ms=1000, timeout_ms=5000
                    ),
                    calls=[("grep", {"pattern": "needle", "path": "a.txt"})],
                ),
                id=f"late-{uuid.uuid4()}",
                task_queue=queue,
            )
            await hog.cancel()
    finally:
        worker.terminate()
    assert late.error.code == ErrorCode.SEARCH_ABORTED, late.text
    assert (
        "stayed busy" in late.text and wsid in late.text and "no fs-search worker" not in late.text
    )


async def _ages(dev_env, wsid: str) -> list[float]:
    pollers = await pollers_of(dev_env.client, task_queue_for(wsid))
    return poll_ages(pollers, time.time())


async def test_an_unknown_workspace_is_reported_within_ten_seconds_by_default(dev_env):
    """Default options, a workspace nothing serves: SEARCH_FAILED naming the workspace and
    saying nothing polls its queue, in about 8 s (before: 30 s and a question)."""
    wsid, queue = f"nobody-{uuid.uuid4()}", f"wf-{uuid.uuid4()}"
    async with Worker(dev_env.client, task_queue=queue, workflows=[CallsWorkflow]):
        started = time.monotonic()
        [result] = await dev_env.client.execute_workflow(
            CallsWorkflow.run,
            Calls(options=Options(workspace_id=wsid), calls=[("grep", {"pattern": "x"})]),
            id=f"nobody-{uuid.uuid4()}",
            task_queue=queue,
        )
        elapsed = time.monotonic() - started
    assert result.error.code == ErrorCode.SEARCH_FAILED, result.text
    assert f"no fs-search worker is serving workspace {wsid!r}" in result.text
    assert "nothing polls" in result.text
    assert 7 < elapsed < 20, elapsed  # 8 s + one check; a margin for a busy machine
