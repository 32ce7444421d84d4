"""A single workspace's path cannot be pointed at another tree (issue 47, finding 1), through
a real `fs-search worker --workspace PATH`, sandbox on and off.

Whoever can write the workspace's parent (an agent's home) could replace PATH, or the parent
itself, by a symlink to another directory; each call re-opened PATH by name, so later calls
searched there (and Landlock granted it: its ruleset is built from the descriptor). Now each
call opens the real path taken at start-up following no symlink: a symlink there is refused
(SEARCH_FAILED, a warning in the log) and nothing outside comes back; a directory re-created
at the path is served, under a new identity.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from temporalio.worker import Worker

from fs_search.activities._contract import ErrorCode
from tests.helpers import write_tree
from tests.procs import WorkerProcess
from tests.workflows_under_test import Calls, CallsWorkflow, Options

GONE = "the workspace cannot be read"
CANARY = "canary-outside-7f3a"
CALLS = [
    ("grep", {"pattern": "needle|canary"}),
    ("grep", {"pattern": "needle|canary", "path": "a.txt"}),
    ("glob", {"pattern": "**/*"}),
]


def _address(dev_env) -> str:
    return dev_env.client.service_client.config.target_host


async def _calls(dev_env, wsid: str):
    queue = f"wf-{uuid.uuid4()}"
    async with Worker(dev_env.client, task_queue=queue, workflows=[CallsWorkflow]):
        return await dev_env.client.execute_workflow(
            CallsWorkflow.run,
            Calls(options=Options(workspace_id=wsid), calls=CALLS),
            id=f"swap-{uuid.uuid4()}",
            task_queue=queue,
        )


def _outside(tmp_path: Path) -> Path:
    """A tree outside the workspace, laid out like it, each file holding the canary."""
    return write_tree(
        tmp_path / "outside",
        {"a.txt": f"{CANARY}\n", "ws/a.txt": f"{CANARY}\n", "secret.txt": f"{CANARY}\n"},
    )


def _refused(results) -> None:
    for r in results:
        assert CANARY not in r.text, r.text
        assert "outside" not in r.text and "secret" not in r.text, r.text
        assert r.is_error and r.error.code == ErrorCode.SEARCH_FAILED, r.text
        assert GONE in r.text, r.text


@pytest.mark.parametrize("sandbox", ["required", "off"])
async def test_a_symlink_put_at_the_workspace_path_is_refused(dev_env, tmp_path, sandbox):
    """PATH replaced by a symlink to an outside tree: every call fails "cannot be read",
    nothing outside is listed or grepped, and the worker logs a warning naming the path;
    a real directory put back at PATH is served again, under a new identity."""
    home = tmp_path / "home"
    ws = write_tree(home / "ws", {"a.txt": "needle\n"})
    outside = _outside(tmp_path)
    wsid = f"swap-{uuid.uuid4().hex[:8]}"
    env = {"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill", "FS_SEARCH_SANDBOX": sandbox}
    worker = WorkerProcess(ws, _address(dev_env), wsid, env=env)
    try:
        before = await _calls(dev_env, wsid)
        assert [r.is_error for r in before] == [False] * 3, [r.text for r in before]
        ws.rename(home / "ws-old")
        ws.symlink_to(outside)
        _refused(await _calls(dev_env, wsid))
        assert "is now a symlink" in worker.log(), worker.log()[-3000:]
        ws.unlink()
        write_tree(ws, {"a.txt": "needle again\n"})
        again = await _calls(dev_env, wsid)
        assert not again[0].is_error and again[0].result.total == 1, again[0].text
        assert again[0].result.matches[0].line == "needle again"
        assert again[0].result.workspace.root != before[0].result.workspace.root
    finally:
        assert worker.terminate() == 0


@pytest.mark.parametrize("sandbox", ["required", "off"])
async def test_a_symlink_put_in_place_of_the_workspace_parent_is_refused(
    dev_env, tmp_path, sandbox
):
    """The workspace's parent replaced by a symlink to an outside tree holding a directory
    of the workspace's name: refused the same way, nothing outside comes back."""
    home = tmp_path / "home"
    ws = write_tree(home / "ws", {"a.txt": "needle\n"})
    outside = _outside(tmp_path)
    wsid = f"swap-{uuid.uuid4().hex[:8]}"
    env = {"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill", "FS_SEARCH_SANDBOX": sandbox}
    worker = WorkerProcess(ws, _address(dev_env), wsid, env=env)
    try:
        before = await _calls(dev_env, wsid)
        assert [r.is_error for r in before] == [False] * 3, [r.text for r in before]
        home.rename(tmp_path / "home-old")
        home.symlink_to(outside)
        _refused(await _calls(dev_env, wsid))
        assert "a directory on its path is now a symlink" in worker.log(), worker.log()[-3000:]
    finally:
        assert worker.terminate() == 0


async def test_a_workspace_named_through_a_symlink_stays_where_it_led(dev_env, tmp_path):
    """`--workspace LINK` (a symlink the operator gave): followed once, at start-up; the
    link re-pointed later changes nothing, the worker keeps serving the directory it named."""
    real = write_tree(tmp_path / "real", {"a.txt": "needle\n"})
    outside = _outside(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(real)
    wsid = f"swap-{uuid.uuid4().hex[:8]}"
    env = {"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill"}
    worker = WorkerProcess(link, _address(dev_env), wsid, env=env)
    try:
        link.unlink()
        link.symlink_to(outside)
        results = await _calls(dev_env, wsid)
        assert [r.is_error for r in results] == [False] * 3, [r.text for r in results]
        assert all(CANARY not in r.text for r in results), [r.text for r in results]
        assert results[0].result.matches[0].line == "needle"
    finally:
        assert worker.terminate() == 0
