"""Faults injected for real: killed and stopped workers, missing workers, vanished rg, S3 outages."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.worker import Worker

from fs_search.activities._contract import ErrorCode
from tests.conftest import start_s3
from tests.helpers import sparse_file, write_tree
from tests.procs import WorkerProcess, alive, wait_until
from tests.workflows_under_test import Calls, CallsWorkflow, Options

MATCHES = 300


def slow_file(path: Path, gigabytes: int = 3) -> Path:
    """MATCHES matching lines, then a sparse tail rg needs seconds to scan (named explicitly)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write("".join(f"needle {i}\n" for i in range(MATCHES)).encode())
        f.truncate(gigabytes * 1024**3)
    return path


def _address(dev_env) -> str:
    return dev_env.client.service_client.config.target_host


async def _start_call(dev_env, queue: str, options: Options, call):
    return await dev_env.client.start_workflow(
        CallsWorkflow.run,
        Calls(options=options, calls=[call]),
        id=f"fault-{uuid.uuid4()}",
        task_queue=queue,
    )


def _wait_for_rg(worker: WorkerProcess, timeout: float = 20.0):
    wait_until(lambda: worker.rg_processes(), timeout)
    return worker.rg_processes()


@dataclass
class SlowCall:
    """A running slow grep: its workspace, worker process, workflow handle and rg processes."""

    ws: Path
    workspace_id: str
    env: dict[str, str]
    worker: WorkerProcess
    handle: Any
    rg: list


@contextlib.asynccontextmanager
async def _slow_call(
    dev_env,
    tmp_path: Path,
    *,
    heartbeat_ms: int,
    timeout_ms: int = 20_000,
    env: dict[str, str] | None = None,
) -> AsyncIterator[SlowCall]:
    """A worker process running a grep over `slow_file` (seconds long), started and in rg.

    ``timeout_ms``: the call's budget (the workers' cap is raised to it); ``env``: more of
    the workers' environment."""
    ws = tmp_path / "ws"
    slow_file(ws / "slow.bin")
    wsid, queue = f"slow-{uuid.uuid4()}", f"wf-{uuid.uuid4()}"
    env = {
        "FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill",
        "FS_SEARCH_TIMEOUT_MS": str(timeout_ms),
        **(env or {}),
    }
    first = WorkerProcess(ws, _address(dev_env), wsid, env=env, ready_timeout=90)
    try:
        async with Worker(dev_env.client, task_queue=queue, workflows=[CallsWorkflow]):
            handle = await _start_call(
                dev_env,
                queue,
                Options(workspace_id=wsid, heartbeat_ms=heartbeat_ms, timeout_ms=timeout_ms),
                ("grep", {"pattern": "needle", "path": "slow.bin"}),
            )
            rg = await asyncio.to_thread(_wait_for_rg, first, 60)
            yield SlowCall(ws, wsid, env, first, handle, rg)
    finally:
        if first.proc.poll() is None:  # a failed test must not leave its worker running
            first.kill()


async def test_killed_worker_search_is_retried_on_restarted_worker(dev_env, tmp_path):
    """SIGKILL mid-search: rg dies within its budget, the call is retried on a restarted worker
    on the same queue, and the caller gets the complete result with one spill artifact."""
    async with _slow_call(dev_env, tmp_path, heartbeat_ms=2000) as call:
        call.worker.kill()
        # The orphan cannot outlive its budget (20 s + the 2 s backstop grace).
        await asyncio.to_thread(wait_until, lambda: not alive(call.rg), 25)
        second = WorkerProcess(call.ws, _address(dev_env), call.workspace_id, env=call.env)
        try:
            [result] = await asyncio.wait_for(call.handle.result(), 90)
        finally:
            second.terminate()
    assert not result.is_error, result.text
    assert result.result.total == MATCHES and len(result.result.matches) == 250
    artifacts = list((tmp_path / "spill").rglob("*.grep.txt"))
    assert len(artifacts) == 1 and str(artifacts[0]) == result.result.spill.locator
    assert artifacts[0].read_text().count("needle ") == MATCHES
    history = await call.handle.fetch_history()
    started = [e for e in history.events if e.HasField("activity_task_started_event_attributes")]
    assert started[-1].activity_task_started_event_attributes.attempt == 2


async def test_backstop_kills_orphaned_rg_at_its_budget(dev_env, tmp_path, request):
    """An rg orphaned by a SIGKILLed worker is killed by the backstop shortly after its budget."""
    ws = tmp_path / "ws"
    sparse_file(ws / "huge.bin")
    wsid, queue = f"orphan-{uuid.uuid4()}", f"wf-{uuid.uuid4()}"
    worker = WorkerProcess(
        ws, _address(dev_env), wsid, env={"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/s"}
    )
    request.addfinalizer(lambda: worker.proc.poll() is None and worker.kill())
    async with Worker(dev_env.client, task_queue=queue, workflows=[CallsWorkflow]):
        handle = await _start_call(
            dev_env,
            queue,
            Options(workspace_id=wsid, heartbeat_ms=1000, timeout_ms=2000, max_attempts=1),
            ("grep", {"pattern": "x", "path": "huge.bin"}),
        )
        orphans = await asyncio.to_thread(_wait_for_rg, worker)
        started = min(p.create_time() for p in orphans)
        worker.kill()
        await asyncio.to_thread(
            wait_until,
            lambda: not alive(orphans),
            15,
        )
        lifetime = time.time() - started
        [result] = await asyncio.wait_for(handle.result(), 30)
    # budget 2 s + backstop grace 2 s (+ scheduling slack on a busy machine)
    assert lifetime < 6.5, lifetime
    assert result.error.code == ErrorCode.SEARCH_ABORTED


async def test_graceful_shutdown_kills_rg_and_the_retry_succeeds(dev_env, tmp_path):
    """SIGTERM mid-search with a drain shorter than the search: at the end of the drain rg
    is killed, a retryable worker shutdown is reported, and the next worker on the queue
    completes the call.

    The call's budget (120 s) is far beyond rg's ~8 s of CPU on the file, so the retry
    finishes on a busy machine too, and a worker that waited for the call instead of killing
    rg at the end of its 1 s drain would not stop within the bound below."""
    drain = {"FS_SEARCH_DRAIN_TIMEOUT": "1"}
    async with _slow_call(
        dev_env, tmp_path, heartbeat_ms=5000, timeout_ms=120_000, env=drain
    ) as call:
        stopped = time.monotonic()
        assert await asyncio.to_thread(call.worker.terminate, 30) == 0
        assert time.monotonic() - stopped < 20
        assert not alive(call.rg)

        async def last_failure_type() -> str | None:
            desc = await call.handle.describe()
            pending = desc.raw_description.pending_activities
            if pending and pending[0].HasField("last_failure"):
                return pending[0].last_failure.application_failure_info.type
            return None

        deadline = time.monotonic() + 60
        while not await last_failure_type() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert await last_failure_type() == "WorkerShutdown"
        second = WorkerProcess(
            call.ws, _address(dev_env), call.workspace_id, env=call.env, ready_timeout=90
        )
        try:
            [result] = await asyncio.wait_for(call.handle.result(), 180)
        finally:
            second.terminate()
    assert not result.is_error and result.result.total == MATCHES


async def test_no_worker_for_workspace_fails_within_schedule_to_start(dev_env):
    """No worker polls the workspace: SEARCH_FAILED naming it, after schedule_to_start."""
    wsid, queue = f"nobody-{uuid.uuid4()}", f"wf-{uuid.uuid4()}"
    async with Worker(dev_env.client, task_queue=queue, workflows=[CallsWorkflow]):
        started = time.monotonic()
        [result] = await dev_env.client.execute_workflow(
            CallsWorkflow.run,
            Calls(
                options=Options(workspace_id=wsid, schedule_to_start_ms=2000),
                calls=[("glob", {"pattern": "*"})],
            ),
            id=f"nobody-{uuid.uuid4()}",
            task_queue=queue,
        )
        elapsed = time.monotonic() - started
    assert result.error.code == ErrorCode.SEARCH_FAILED and wsid in result.text
    assert 1.5 < elapsed < 10, elapsed


async def test_rg_vanishing_after_start_fails_calls_but_not_the_worker(dev_env, tmp_path, rg_bin):
    """rg deleted after the worker started: SEARCH_FAILED, and the worker keeps serving."""
    ws = write_tree(tmp_path / "ws", {"a.txt": "x\n"})
    rg_copy = tmp_path / "bin" / "rg"
    rg_copy.parent.mkdir()
    shutil.copy(rg_bin, rg_copy)
    wsid, queue = f"norg-{uuid.uuid4()}", f"wf-{uuid.uuid4()}"
    worker = WorkerProcess(
        ws,
        _address(dev_env),
        wsid,
        env={"FS_SEARCH_RG_PATH": str(rg_copy), "FS_SEARCH_SPILL_URL": f"file://{tmp_path}/s"},
    )
    try:
        rg_copy.unlink()
        async with Worker(dev_env.client, task_queue=queue, workflows=[CallsWorkflow]):
            results = await dev_env.client.execute_workflow(
                CallsWorkflow.run,
                Calls(
                    options=Options(workspace_id=wsid),
                    calls=[("grep", {"pattern": "x"}), ("glob", {"pattern": "*"})],
                ),
                id=f"norg-{uuid.uuid4()}",
                task_queue=queue,
            )
        assert [r.error.code for r in results] == [ErrorCode.SEARCH_FAILED] * 2
        assert "ripgrep" in results[0].text
        assert worker.proc.poll() is None
    finally:
        assert worker.terminate() == 0


async def test_s3_outage_mid_run_never_fails_a_search(dev_env, tmp_path):
    """A worker process on S3: spills, then spill_error while S3 is down, then spills again."""
    own = await start_s3(tmp_path / "weed", bucket="fault-outage")
    ws = write_tree(tmp_path / "ws", {"a.txt": "".join(f"hit {i}\n" for i in range(400))})
    wsid, queue = f"s3-{uuid.uuid4()}", f"wf-{uuid.uuid4()}"
    worker = WorkerProcess(ws, _address(dev_env), wsid, env=own.env("spill"))
    grep = ("grep", {"pattern": "hit"})

    async def call():
        [r] = await dev_env.client.execute_workflow(
            CallsWorkflow.run,
            Calls(options=Options(workspace_id=wsid), calls=[grep]),
            id=f"s3-{uuid.uuid4()}",
            task_queue=queue,
        )
        return r

    try:
        async with Worker(dev_env.client, task_queue=queue, workflows=[CallsWorkflow]):
            before = await call()
            own.server.stop()
            during = [await call() for _ in range(3)]
            await own.server.start()
            after = await call()
    finally:
        worker.terminate()
        own.server.stop()
    assert before.result.spill is not None and not before.is_error
    for r in during:
        assert not r.is_error and r.result.spill is None and r.result.spill_error
        assert r.result.total == 400 and len(r.result.matches) == 250
    assert after.result.spill is not None and after.result.spill_error is None


async def test_helper_processes_die_with_a_killed_worker(dev_env, tmp_path):
    """The worker's digest helpers exit when the worker is SIGKILLed (their stdin closes)."""
    import psutil

    ws = write_tree(tmp_path / "ws", {"a.txt": "x\n"})
    worker = WorkerProcess(
        ws,
        _address(dev_env),
        f"helpers-{uuid.uuid4()}",
        env={"FS_SEARCH_PARSE_PROCESSES": "2", "FS_SEARCH_SPILL_URL": f"file://{tmp_path}/s"},
    )
    helpers = []
    for _ in range(100):
        helpers = [
            p
            for p in psutil.Process(worker.pid).children(recursive=True)
            if "fs_search.activities.results._helper" in " ".join(p.cmdline())
        ]
        if len(helpers) == 2:
            break
        await asyncio.sleep(0.05)
    assert len(helpers) == 2
    worker.kill()
    await asyncio.to_thread(wait_until, lambda: not alive(helpers), 10)
