"""A slow or full store, for real: a paused SeaweedFS and a small tmpfs under a worker process.

A store that stops answering may cost a search its spill, never the search itself: the page
comes back on the first attempt. A payload store that is full fails the call once, in plain
words, and leaves no temporary file behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.worker import Worker

from fs_search.activities._contract import ErrorCode, ToolResult
from tests.conftest import S3Server, start_s3
from tests.helpers import small_filesystem, write_tree
from tests.procs import WorkerProcess
from tests.workflows_under_test import Calls, CallsWorkflow, Options

HITS = 400  # over the grep cap (250): the result is spilled


def _address(dev_env) -> str:
    return dev_env.client.service_client.config.target_host


@contextlib.contextmanager
def paused(pid: int) -> Iterator[None]:
    """The process stopped (SIGSTOP) for the block, continued (SIGCONT) whatever happens."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


async def _attempts(handle: Any) -> list[int]:
    """The attempt number of every activity that started in the workflow's history."""
    history = await handle.fetch_history()
    return [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.HasField("activity_task_started_event_attributes")
    ]


async def _one_call(dev_env, queue: str, options: Options, call) -> tuple[ToolResult, list[int]]:
    handle = await dev_env.client.start_workflow(
        CallsWorkflow.run,
        Calls(options=options, calls=[call]),
        id=f"store-{uuid.uuid4()}",
        task_queue=queue,
    )
    [result] = await asyncio.wait_for(handle.result(), 120)
    return result, await _attempts(handle)


@contextlib.asynccontextmanager
async def _worker_on(
    dev_env, ws: Path, env: dict[str, str]
) -> AsyncIterator[tuple[str, str, WorkerProcess]]:
    """A `fs-search worker` process for ``ws`` and a workflow worker: (workspace id, queue,
    the worker process)."""
    wsid, queue = f"store-{uuid.uuid4()}", f"wf-{uuid.uuid4()}"
    worker = WorkerProcess(ws, _address(dev_env), wsid, env=env)
    try:
        async with Worker(dev_env.client, task_queue=queue, workflows=[CallsWorkflow]):
            yield wsid, queue, worker
    finally:
        worker.terminate()
        print(worker.log())  # shown when the test fails


@pytest.fixture
async def own_s3(tmp_path: Path) -> AsyncIterator[S3Server]:
    """A SeaweedFS of this test's own (it gets paused)."""
    started = await start_s3(tmp_path / "weed", bucket="paused-store")
    try:
        yield started
    finally:
        started.server.stop()


@pytest.mark.parametrize("timeout_ms", [1000, 2500])
async def test_a_paused_s3_store_never_aborts_a_finished_search(
    dev_env, tmp_path, own_s3, timeout_ms
):
    """S3 stops answering mid-run (SIGSTOP): a grep that rg finished in milliseconds returns
    its page on attempt 1 with "Could not save" in the footer, not SEARCH_ABORTED, however
    small its budget (the spill gives up before the attempt's start-to-close deadline)."""
    ws = write_tree(tmp_path / "ws", {"a.txt": "".join(f"hit {i}\n" for i in range(HITS))})
    grep = ("grep", {"pattern": "hit"})
    async with _worker_on(dev_env, ws, own_s3.env("spill")) as (wsid, queue, _):
        # The attempt's deadline as tight as FsSearchTools ever made it: budget + 5 s.
        options = Options(
            workspace_id=wsid, timeout_ms=timeout_ms, start_to_close_ms=timeout_ms + 5000
        )
        # The store works before the pause (asked with room to spare: the first save into a
        # fresh store can take seconds on a busy machine, which is not what this is about).
        roomy = Options(workspace_id=wsid, timeout_ms=30_000)
        before, _ = await _one_call(dev_env, queue, roomy, grep)
        assert before.result is not None and before.result.spill is not None, before.text
        assert own_s3.server.process.pid is not None
        with paused(own_s3.server.process.pid):
            during, attempts = await _one_call(dev_env, queue, options, grep)
    assert not during.is_error, during.text
    assert attempts == [1]
    assert during.result is not None
    assert during.result.total == HITS and len(during.result.matches) == 250
    assert during.result.spill is None and during.result.spill_error
    assert f"Could not save all {HITS} matching lines" in during.text
    assert during.result.spill_error in during.text


async def test_a_paused_s3_payload_store_fails_once_and_in_time(dev_env, tmp_path, own_s3):
    """S3 stops answering and a `spill: false` result needs it for its payload: SEARCH_FAILED
    on attempt 1, within the attempt, rather than a check that outlives it (SEARCH_ABORTED)."""
    lines = "".join(f"hit {i} {'x' * 200}\n" for i in range(2000))  # ~0.5 MB of matches
    ws = write_tree(tmp_path / "ws", {"a.txt": lines})
    grep = ("grep", {"pattern": "hit"})
    async with _worker_on(dev_env, ws, own_s3.env("spill")) as (wsid, queue, _):
        options = Options(workspace_id=wsid, timeout_ms=2000, start_to_close_ms=7000, spill=False)
        assert own_s3.server.process.pid is not None
        with paused(own_s3.server.process.pid):
            result, attempts = await _one_call(dev_env, queue, options, grep)
    assert result.error is not None and result.error.code == ErrorCode.SEARCH_FAILED, result.text
    assert attempts == [1]
    assert "payload store" in result.text
    _assert_plain_words(result.text, own_s3.endpoint_url, str(tmp_path))


def _assert_plain_words(text: str, *details: str) -> None:
    """No errno, exception name, path or endpoint in model-facing text (past "Error: ")."""
    text = text.removeprefix("Error: ")
    assert not re.search(r"Errno|OSError|Error\b|Exception|Traceback|/|https?:", text), text
    for detail in details:
        assert detail not in text, (detail, text)


# (file content, payload store size, the worker's log line naming who refused): a grep whose
# payload is plainly larger than the store, so the readiness check refuses it; and one whose
# encoded size the estimate misses (each \x01 is 1 byte of text but 6 of JSON, "\u0001"),
# so the check lets it through and only the write itself finds the store full, after the
# activity returned.
FULL_CASES = {
    "too-large": (
        "".join(f"hit {i} {'x' * 150}\n" for i in range(20_000)),
        "2m",
        "cannot take a result",
    ),
    "underestimated": (
        "".join(f"hit {i} {chr(1) * 200}\n" for i in range(4_000)),
        "4m",
        "storing a result",
    ),
}


@pytest.mark.parametrize("case", sorted(FULL_CASES))
async def test_a_full_payload_store_fails_once_in_plain_words(dev_env, tmp_path, case):
    """A `spill: false` result over the payload threshold, a payload store without room
    for it: exactly one attempt, SEARCH_FAILED in plain words, and no temporary file left."""
    content, size, logged = FULL_CASES[case]
    ws = write_tree(tmp_path / "ws", {"a.txt": content})
    with small_filesystem(tmp_path / "store", size) as store:
        env = {"FS_SEARCH_SPILL_URL": f"file://{store}"}
        async with _worker_on(dev_env, ws, env) as (wsid, queue, worker):
            options = Options(workspace_id=wsid, timeout_ms=5000, spill=False)
            grep = ("grep", {"pattern": "hit"})
            result, attempts = await _one_call(dev_env, queue, options, grep)
        left = [p.name for p in store.rglob("*") if p.name.startswith(".tmp-")]
    assert result.error is not None and result.error.code == ErrorCode.SEARCH_FAILED, result.text
    assert attempts == [1]
    assert "payload store is full" in result.text
    _assert_plain_words(result.text, str(tmp_path))
    assert left == []
    assert logged in worker.log()


async def _activity_seconds(handle: Any) -> float:
    """From the call's ActivityTaskStarted to its close (completed or failed), server clock."""
    events = (await handle.fetch_history()).events
    started = next(e for e in events if e.HasField("activity_task_started_event_attributes"))
    closed = next(
        e
        for e in events
        if e.HasField("activity_task_completed_event_attributes")
        or e.HasField("activity_task_failed_event_attributes")
    )
    return (closed.event_time.ToDatetime() - started.event_time.ToDatetime()).total_seconds()


async def _timed_call(dev_env, queue: str, options: Options, call) -> tuple[ToolResult, float]:
    """One call: its result and its activity's duration."""
    handle = await dev_env.client.start_workflow(
        CallsWorkflow.run,
        Calls(options=options, calls=[call]),
        id=f"store-{uuid.uuid4()}",
        task_queue=queue,
    )
    [result] = await asyncio.wait_for(handle.result(), 120)
    assert await _attempts(handle) == [1]
    return result, await _activity_seconds(handle)


# A 3 s call against a store that hangs: its page (or its failure) comes back about when its
# budget ends, whatever the attempt's start-to-close (minutes with FsSearchTools' defaults,
# which add the queueing budget), at worst SAVE_FLOOR_S (1.5 s) after it, plus slack.
BUDGET_MS = 3000
WITHIN_S = 3.0 + 1.5 + 1.0


async def test_a_paused_s3_spill_gives_up_when_the_calls_budget_ends(dev_env, tmp_path, own_s3):
    """A 3-second call with default options, S3 stopped: its page comes back within about
    5 s saying the complete result could not be saved (the spill waited 15 s before)."""
    ws = write_tree(tmp_path / "ws", {"a.txt": "".join(f"hit {i}\n" for i in range(HITS))})
    grep = ("grep", {"pattern": "hit"})
    async with _worker_on(dev_env, ws, own_s3.env("spill")) as (wsid, queue, _):
        options = Options(workspace_id=wsid, timeout_ms=BUDGET_MS)
        await _timed_call(dev_env, queue, options, grep)  # warm: the store answers
        assert own_s3.server.process.pid is not None
        with paused(own_s3.server.process.pid):
            result, seconds = await _timed_call(dev_env, queue, options, grep)
    assert not result.is_error and result.result is not None, result.text
    assert result.result.spill is None and result.result.total == HITS
    assert f"Could not save all {HITS} matching lines" in result.text
    assert seconds < WITHIN_S, seconds


@pytest.mark.parametrize("case", ["checked", "underestimated"])
async def test_a_paused_s3_payload_store_fails_when_the_calls_budget_ends(
    dev_env, tmp_path, own_s3, case
):
    """A 3-second `spill: false` call with default options, S3 stopped: SEARCH_FAILED within
    about 5 s, whether the payload check hangs ("checked") or the upload Temporal makes
    after the activity returned does (a result whose size the estimate misses, so it is
    not checked: each \\x01 is 1 byte of text but 6 of JSON)."""
    if case == "checked":
        lines = "".join(f"hit {i} {'x' * 200}\n" for i in range(2000))  # ~0.5 MB
    else:
        lines = "".join(f"hit {i} {chr(1) * 60}\n" for i in range(1500))  # ~0.2 MB estimated
    ws = write_tree(tmp_path / "ws", {"a.txt": lines})
    grep = ("grep", {"pattern": "hit"})
    async with _worker_on(dev_env, ws, own_s3.env("spill")) as (wsid, queue, worker):
        options = Options(workspace_id=wsid, timeout_ms=BUDGET_MS, spill=False)
        assert own_s3.server.process.pid is not None
        with paused(own_s3.server.process.pid):
            result, seconds = await _timed_call(dev_env, queue, options, grep)
    assert result.error is not None and result.error.code == ErrorCode.SEARCH_FAILED, result.text
    assert "payload store did not answer in time" in result.text
    assert seconds < WITHIN_S, seconds
    logged = "cannot take a result" if case == "checked" else "storing a result"
    assert logged in worker.log()
