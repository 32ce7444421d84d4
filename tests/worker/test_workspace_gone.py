"""The workspace itself gone or unreadable while a real `fs-search worker` runs (a single
workspace, and a --workspaces-root fleet): SEARCH_FAILED "the workspace cannot be read", never a
broken-rg message, never a path of the worker's installation; the worker keeps serving."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.worker import Worker

from fs_search.activities._contract import ErrorCode
from tests.helpers import sparse_file, write_tree
from tests.procs import WorkerProcess, wait_until, without_dac_override
from tests.workflows_under_test import (
    Calls,
    CallsWorkflow,
    MixedCalls,
    MixedCallsWorkflow,
    Options,
)

GONE = "the workspace cannot be read"
CALLS = [
    ("grep", {"pattern": "needle"}),
    ("grep", {"pattern": "needle", "path": "a.txt"}),
    ("glob", {"pattern": "*"}),
    ("glob", {"pattern": "*", "path": "sub"}),
]
UNPRIVILEGED = without_dac_override()
needs_unprivileged = pytest.mark.skipif(
    UNPRIVILEGED is None, reason="running as root without setpriv: mode 000 cannot hold"
)


def _address(dev_env) -> str:
    return dev_env.client.service_client.config.target_host


def _install_paths() -> list[str]:
    return [sys.prefix, os.path.realpath(sys.executable), os.path.dirname(shutil.__file__)]


def assert_gone(results) -> None:
    for r in results:
        assert r.is_error and r.error.code == ErrorCode.SEARCH_FAILED, r.text
        assert GONE in r.text, r.text
        assert "ripgrep" not in r.text, r.text
        assert not [p for p in _install_paths() if p in r.text], r.text


async def _single(dev_env, worker: WorkerProcess, wsid: str, calls=CALLS):
    queue = f"wf-{uuid.uuid4()}"
    async with Worker(dev_env.client, task_queue=queue, workflows=[CallsWorkflow]):
        return await dev_env.client.execute_workflow(
            CallsWorkflow.run,
            Calls(options=Options(workspace_id=wsid), calls=calls),
            id=f"gone-{uuid.uuid4()}",
            task_queue=queue,
        )


def _tree(ws: Path) -> Path:
    return write_tree(ws, {"a.txt": "needle\n", "sub/b.txt": "needle\n"})


async def test_a_single_workers_workspace_removed_then_replaced_by_a_file(dev_env, tmp_path):
    ws = _tree(tmp_path / "ws")
    wsid = f"gone-{uuid.uuid4()}"
    env = {"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill"}
    worker = WorkerProcess(ws, _address(dev_env), wsid, env=env)
    try:
        before = await _single(dev_env, worker, wsid)
        assert not any(r.is_error for r in before), [r.text for r in before]
        shutil.rmtree(ws)
        assert_gone(await _single(dev_env, worker, wsid))
        ws.write_text("a file where the workspace was\n")
        assert_gone(await _single(dev_env, worker, wsid))
        assert worker.proc.poll() is None
    finally:
        assert worker.terminate() == 0
    assert "ripgrep could not be started" not in worker.log()


@needs_unprivileged
async def test_a_single_workers_workspace_made_unsearchable_and_back(dev_env, tmp_path):
    """Mode 000 on the root (for a worker without root's DAC override): the workspace cannot
    be read; mode 755 again: it is searched again."""
    assert UNPRIVILEGED is not None
    ws = _tree(tmp_path / "ws")
    wsid = f"gone-{uuid.uuid4()}"
    env = {"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill"}
    worker = WorkerProcess(ws, _address(dev_env), wsid, env=env, prefix=UNPRIVILEGED)
    try:
        ws.chmod(0)
        try:
            assert_gone(await _single(dev_env, worker, wsid))
        finally:
            ws.chmod(0o755)
        again = await _single(dev_env, worker, wsid)
        assert not any(r.is_error for r in again), [r.text for r in again]
    finally:
        assert worker.terminate() == 0


async def _mixed(dev_env, queue: str, calls, **options):
    return await dev_env.client.execute_workflow(
        MixedCallsWorkflow.run,
        MixedCalls(calls=calls, **options),
        id=f"gone-{uuid.uuid4()}",
        task_queue=queue,
    )


async def test_a_fleet_workspace_removed_while_rg_runs(dev_env, tmp_path):
    """--workspaces-root: a workspace removed while its grep runs answers that it cannot be
    read (the scan then detaches it); the other workspace is untouched."""
    root = tmp_path / "root"
    tag = uuid.uuid4().hex[:8]
    doomed, other = f"doomed-{tag}", f"other-{tag}"
    _tree(root / other)
    _tree(root / doomed)
    sparse_file(root / doomed / "huge.bin", gigabytes=20)
    env = {"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill"}
    worker = WorkerProcess(root, _address(dev_env), None, env=env)
    queue = f"wf-{uuid.uuid4()}"
    try:
        await asyncio.to_thread(
            wait_until,
            lambda: all(f"attached workspace {w}" in worker.log() for w in (doomed, other)),
            60,
        )
        async with Worker(dev_env.client, task_queue=queue, workflows=[MixedCallsWorkflow]):
            call = asyncio.ensure_future(
                _mixed(dev_env, queue, [(doomed, "grep", {"pattern": "x", "path": "huge.bin"})])
            )
            await asyncio.to_thread(wait_until, lambda: worker.rg_processes(), 60)
            # The workspace goes first, while rg still reads the file (held open); only then
            # is the file emptied, so rg ends (at EOF, or SIGBUS) once it is surely gone.
            held = os.open(root / doomed / "huge.bin", os.O_WRONLY)
            try:
                shutil.rmtree(root / doomed)
                os.ftruncate(held, 0)
            finally:
                os.close(held)
            assert_gone(await asyncio.wait_for(call, 120))
            (fine,) = await _mixed(dev_env, queue, [(other, "grep", {"pattern": "needle"})])
        assert not fine.is_error and fine.result.total == 2, fine.text
        assert worker.proc.poll() is None
    finally:
        assert worker.terminate(60) == 0


@needs_unprivileged
async def test_a_fleet_workspace_made_unsearchable(dev_env, tmp_path):
    """--workspaces-root, a worker without root's DAC override: a workspace of mode 000 stays
    attached and cannot be read; its neighbour is searched as before."""
    assert UNPRIVILEGED is not None
    root = tmp_path / "root"
    tag = uuid.uuid4().hex[:8]
    closed, other = f"closed-{tag}", f"other-{tag}"
    _tree(root / closed)
    _tree(root / other)
    env = {"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill"}
    worker = WorkerProcess(root, _address(dev_env), None, env=env, prefix=UNPRIVILEGED)
    queue = f"wf-{uuid.uuid4()}"
    try:
        await asyncio.to_thread(
            wait_until,
            lambda: all(f"attached workspace {w}" in worker.log() for w in (closed, other)),
            60,
        )
        (root / closed).chmod(0)
        try:
            async with Worker(dev_env.client, task_queue=queue, workflows=[MixedCallsWorkflow]):
                results = await _mixed(dev_env, queue, [(closed, n, a) for n, a in CALLS])
                (fine,) = await _mixed(dev_env, queue, [(other, "grep", {"pattern": "needle"})])
        finally:
            (root / closed).chmod(0o755)
        assert_gone(results)
        assert not fine.is_error and fine.result.total == 2, fine.text
    finally:
        assert worker.terminate(60) == 0
