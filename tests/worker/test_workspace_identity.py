"""The shared workspace proof (docs/workspace-identity.md; issue 33), through the dev
server, real workers and rg: results say which directory they ran in, a call runs in the
directory the workspace's path names when it starts, and spills belong to that directory —
on a single worker, a fleet's workspace queues and its host queue, file:// and s3://."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.worker import Worker

from fs_search.activities._config import FsSearchConfig
from fs_search.activities._contract import ErrorCode
from fs_search.activities.storage import Storage, local_storage
from fs_search.activities.storage._s3 import S3SpillStore
from fs_search.worker import build_services, new_worker, workspace_identity
from fs_search.worker._fleet import Fleet
from fs_search.worker._queue_owner import default_host_id
from tests.helpers import sparse_file, write_tree
from tests.procs import wait_for_rg
from tests.workflows_under_test import (
    Calls,
    CallsWorkflow,
    CatalogueWorkflow,
    MixedCalls,
    MixedCallsWorkflow,
    Options,
)

GONE = "the workspace cannot be read"


@contextlib.asynccontextmanager
async def _single(dev_env, make_activities, ws: Path, **settings) -> AsyncIterator[tuple]:
    """A single-workspace worker over ``ws`` and a workflow worker; yields (id, queue, acts)."""
    wid = f"ident-{uuid.uuid4().hex[:8]}"
    acts = await make_activities(ws, workspace_id=wid, **settings)
    queue = f"wf-{uuid.uuid4()}"
    async with (
        new_worker(dev_env.client, acts, workspace_id=wid),
        Worker(
            dev_env.client,
            task_queue=queue,
            workflows=[CallsWorkflow, CatalogueWorkflow, MixedCallsWorkflow],
        ),
    ):
        yield wid, queue, acts


async def _calls(dev_env, queue: str, options: Options, *calls):
    return await dev_env.client.execute_workflow(
        CallsWorkflow.run,
        Calls(options=options, calls=list(calls)),
        id=f"ident-{uuid.uuid4()}",
        task_queue=queue,
    )


async def test_every_result_names_the_workspace_its_host_and_its_directory(
    dev_env, make_activities, tmp_path
):
    """glob, grep and the catalogue carry workspace {id, host, root}; root is what
    workspace_identity gives for the directory (by path or descriptor), so a co-located tool
    can check it before following a path."""
    ws = write_tree(tmp_path / "ws", {"a.txt": "needle\n"})
    async with _single(dev_env, make_activities, ws) as (wid, queue, _):
        options = Options(workspace_id=wid)
        globbed, grepped = await _calls(
            dev_env, queue, options, ("glob", {"pattern": "*"}), ("grep", {"pattern": "needle"})
        )
        catalogue = await dev_env.client.execute_workflow(
            CatalogueWorkflow.run, options, id=f"cat-{uuid.uuid4()}", task_queue=queue
        )
    fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    try:
        by_fd = workspace_identity(fd)
    finally:
        os.close(fd)
    expected = {"id": wid, "host": default_host_id(), "root": workspace_identity(ws)}
    for where in (globbed.result.workspace, grepped.result.workspace, catalogue.workspace):
        assert where is not None and where.model_dump() == expected
    assert by_fd == expected["root"] == workspace_identity(str(tmp_path / "ws" / "."))


async def test_a_swap_of_the_workspace_during_a_call(dev_env, make_activities, tmp_path):
    """rg is reading a big file when the workspace is moved away and another directory put
    at its path: the call finishes in the directory it started in and says so (its identity,
    not the new one's); the next call runs in the new directory under its new identity; the
    old one moved back is the old identity again."""
    ws = write_tree(tmp_path / "ws", {"old.txt": "old words\n"})
    sparse_file(ws / "big.bin", gigabytes=4)
    old = workspace_identity(ws)
    async with _single(dev_env, make_activities, ws) as (wid, queue, acts):
        options = Options(workspace_id=wid, timeout_ms=120_000)
        running = asyncio.create_task(
            _calls(dev_env, queue, options, ("grep", {"pattern": "needle", "path": "big.bin"}))
        )
        await wait_for_rg(acts, timeout=30)
        ws.rename(tmp_path / "moved")
        write_tree(ws, {"new.txt": "new words\n"})
        [during] = await running
        [after] = await _calls(dev_env, queue, options, ("grep", {"pattern": "words"}))
        new = workspace_identity(ws)
        ws.rename(tmp_path / "newer")
        (tmp_path / "moved").rename(ws)
        [back] = await _calls(dev_env, queue, options, ("grep", {"pattern": "words"}))
    assert not during.is_error and during.result.total == 0, during.text
    assert during.result.workspace.root == old != new
    assert [m.line for m in after.result.matches] == ["new words"], after.text
    assert after.result.workspace.root == new
    assert [m.line for m in back.result.matches] == ["old words"], back.text
    assert back.result.workspace.root == old


async def test_a_workspace_moved_away_fails_and_back_again_is_served(
    dev_env, make_activities, tmp_path
):
    """Through the worker: moved away, SEARCH_FAILED "the workspace cannot be read" (the
    directory is not searched under its new name); back, served."""
    ws = write_tree(tmp_path / "ws", {"a.txt": "needle\n"})
    async with _single(dev_env, make_activities, ws) as (wid, queue, _):
        options = Options(workspace_id=wid)
        ws.rename(tmp_path / "away")
        away = await _calls(
            dev_env, queue, options, ("grep", {"pattern": "needle"}), ("glob", {"pattern": "*"})
        )
        (tmp_path / "away").rename(ws)
        [back] = await _calls(dev_env, queue, options, ("grep", {"pattern": "needle"}))
    for result in away:
        assert result.is_error and result.error.code == ErrorCode.SEARCH_FAILED, result.text
        assert GONE in result.text and "a.txt" not in result.text
    assert back.result.total == 1


# --- spills belong to the directory ----------------------------------------------------------


@pytest.fixture(params=["file", "s3"])
def s3_or_none(request) -> Any:
    """The S3 server for the s3 run (its fixture set up outside the test's event loop)."""
    return request.getfixturevalue("s3") if request.param == "s3" else None


@pytest.fixture
async def storage(s3_or_none, tmp_path) -> AsyncIterator[Storage]:
    """The store of the test's workers: file:// under tmp_path, or a prefix of the session S3."""
    if s3_or_none is None:
        yield local_storage(tmp_path / "spill")
        return
    s3 = s3_or_none
    store = S3SpillStore.from_url(s3.url(), endpoint_url=s3.endpoint_url)
    yield Storage.beside(store)
    await store.close()


@contextlib.asynccontextmanager
async def _fleet(dev_env, root: Path, storage: Storage, queues: str) -> AsyncIterator[Fleet]:
    config = FsSearchConfig.load(
        getenv=lambda _: None,
        overrides={"sample_over_cap_glob_results": False, "grep_max_matches": 1},
    )
    services = await build_services(config, storage=storage, workspaces_root=True)
    fleet = Fleet(
        dev_env.client,
        services,
        root,
        scan_interval=3600,  # scanned by the test
        host_id=f"host-{uuid.uuid4().hex[:8]}",
        queues=queues,  # type: ignore[arg-type]
        events="off",  # the scan alone tells of a change (events tell at once)
    )
    stop = asyncio.Event()
    running = asyncio.create_task(fleet.run(stop))
    try:
        deadline = time.monotonic() + 60
        while not fleet.attached:
            assert time.monotonic() < deadline, "nothing attached"
            await asyncio.sleep(0.05)
        yield fleet
    finally:
        stop.set()
        await asyncio.wait_for(running, 60)
        await services.executor.kill_all()
        services.offload.shutdown()


async def _mixed(dev_env, queue: str, spec: MixedCalls):
    return await dev_env.client.execute_workflow(
        MixedCallsWorkflow.run, spec, id=f"mixed-{uuid.uuid4()}", task_queue=queue
    )


@pytest.mark.parametrize("queues", ["workspace", "host"])
async def test_a_workspace_re_created_between_a_spill_and_its_read(
    dev_env, tmp_path, storage, queues
):
    """A fleet's workspace spills, is removed and re-created at its path, and the old locator
    is read: before the next scan every call says the workspace cannot be read (the new
    directory is not vetted yet); after it, the new directory is served under a new identity
    and the old locator is refused INVALID_ARGUMENT without a word of the old artifact."""
    root = tmp_path / "root"
    wid = f"re-{uuid.uuid4().hex[:6]}"
    write_tree(root / wid, {f"f{i}.txt": f"old canary {i}\n" for i in range(3)})
    async with _fleet(dev_env, root, storage, queues) as fleet:
        host = fleet.host_id if queues == "host" else None
        queue = f"wf-{uuid.uuid4()}"
        async with Worker(dev_env.client, task_queue=queue, workflows=[MixedCallsWorkflow]):
            [spilled] = await _mixed(
                dev_env, queue, MixedCalls(calls=[(wid, "grep", {"pattern": "canary"})], host=host)
            )
            locator = spilled.result.spill.locator
            first = spilled.result.workspace
            [read] = await _mixed(
                dev_env,
                queue,
                MixedCalls(calls=[(wid, "read_spill", {"locator": locator})], host=host),
            )
            shutil.rmtree(root / wid)
            write_tree(root / wid, {"new.txt": "new canary\n"})
            unvetted = await _mixed(
                dev_env,
                queue,
                MixedCalls(
                    calls=[
                        (wid, "grep", {"pattern": "canary"}),
                        (wid, "read_spill", {"locator": locator}),
                    ],
                    host=host,
                ),
            )
            st = os.stat(root / wid)
            await fleet.scan()
            deadline = time.monotonic() + 30
            while (held := fleet.attached.get(wid)) is None or held.holds() != (
                st.st_dev,
                st.st_ino,
            ):
                assert time.monotonic() < deadline, "the new directory was never attached"
                await asyncio.sleep(0.05)
            vetted = await _mixed(
                dev_env,
                queue,
                MixedCalls(
                    calls=[
                        (wid, "grep", {"pattern": "canary"}),
                        (wid, "read_spill", {"locator": locator}),
                    ],
                    host=host,
                    schedule_to_start_ms=20_000,
                ),
            )
    assert not read.is_error and "old canary" in read.text, read.text
    for result in unvetted:
        assert result.is_error and result.error.code == ErrorCode.SEARCH_FAILED, result.text
        assert GONE in result.text and "old canary" not in result.text
    grepped, refused = vetted
    assert [m.line for m in grepped.result.matches] == ["new canary"], grepped.text
    assert grepped.result.workspace.root == workspace_identity(root / wid) != first.root
    assert refused.is_error and refused.error.code == ErrorCode.INVALID_ARGUMENT, refused.text
    assert "made in another directory" in refused.text and "old canary" not in refused.text
