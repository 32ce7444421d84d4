"""Host-routed queues (docs/workers.md): one queue ``fs-search-host/<host-id>`` serves every workspace
of a host; requests name their workspace and get what the workspace queue would give them."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment
from temporalio.worker import Worker

from fs_search.activities._config import FsSearchConfig
from fs_search.activities._contract import (
    ErrorCode,
    GlobRequest,
    GrepRequest,
    ReadSpillRequest,
    ToolResult,
    ToolsRequest,
)
from fs_search.activities.storage import local_storage
from fs_search.worker import build_services
from fs_search.worker._fleet import Fleet
from tests.helpers import write_tree
from tests.workflows_under_test import (
    Calls,
    ConcurrentCallsWorkflow,
    MixedCalls,
    MixedCallsWorkflow,
    Options,
)

TREE = {
    "README.md": "# demo\nneedle in the readme\n",
    "src/app.py": "def needle():\n    return 1\n",
    "src/lib/util.py": "NEEDLE = 2\nneedle = 3\n",
    "docs/guide.txt": "a needle\nanother needle\n",
    "notes/todo.md": "- find the needle\n",
    ".hidden/x.txt": "needle hidden\n",
    **{f"many/f{i:03d}.txt": "needle\n" * 3 for i in range(120)},
}

# Each call both ways: glob and grep over paths, include, cwd-less forms, over-cap pages
# (spilled), and contract errors.
CALLS: list[tuple[str, dict]] = [
    ("glob", {"pattern": "**/*.py"}),
    ("glob", {"pattern": "*.md", "path": "notes"}),
    ("glob", {"pattern": "**/*.txt"}),  # over the glob cap: a page and a spill
    ("grep", {"pattern": "needle"}),  # over the grep cap
    ("grep", {"pattern": "needle", "include": "*.py"}),
    ("grep", {"pattern": "NEEDLE|needle", "path": "src/lib"}),
    ("grep", {"pattern": "("}),  # SEARCH_INVALID_PATTERN
    ("glob", {"pattern": "*", "path": "../elsewhere"}),  # INVALID_ARGUMENT
    ("grep", {"pattern": "x", "path": "missing-dir"}),
]


def _config(**overrides) -> FsSearchConfig:
    return FsSearchConfig.load(
        getenv=lambda _: None, overrides={"sample_over_cap_glob_results": False, **overrides}
    )


@contextlib.asynccontextmanager
async def _fleet(dev_env, root: Path, tmp_path: Path, queues: str, **config) -> AsyncIterator:
    services = await build_services(
        _config(**config), storage=local_storage(tmp_path / "spill"), workspaces_root=True
    )
    host = f"host-{uuid.uuid4().hex[:8]}"
    fleet = Fleet(
        dev_env.client,
        services,
        root,
        scan_interval=0.2,
        host_id=host,
        queues=queues,  # type: ignore[arg-type]
    )
    stop = asyncio.Event()
    running = asyncio.create_task(fleet.run(stop))
    try:
        wanted = {p.name for p in root.iterdir()}
        deadline = time.monotonic() + 60
        while set(fleet.attached) != wanted:
            assert time.monotonic() < deadline, "the fleet never attached every workspace"
            await asyncio.sleep(0.05)
        yield fleet, services
    finally:
        stop.set()
        await asyncio.wait_for(running, 60)
        await services.executor.kill_all()
        services.offload.shutdown()


async def _run(dev_env, spec: MixedCalls) -> list[ToolResult]:
    queue = f"wf-{uuid.uuid4()}"
    async with Worker(dev_env.client, task_queue=queue, workflows=[MixedCallsWorkflow]):
        return await dev_env.client.execute_workflow(
            MixedCallsWorkflow.run, spec, id=f"host-{uuid.uuid4()}", task_queue=queue
        )


def _comparable(text: str) -> str:
    """A result's text without what names the call itself (the spill artifact's key)."""
    return re.sub(r"(file://|/)\S*\.(glob|grep)\.txt", "<spill>", text)


def _tree(root: Path, ids: list[str]) -> None:
    for wid in ids:
        write_tree(root / wid, {**TREE, f"only-{wid}.txt": f"needle of {wid}\n"})


async def test_a_host_queue_gives_every_workspace_what_its_own_queue_gives(dev_env, tmp_path):
    """Two workspaces, one process serving both queue kinds: every call of CALLS, for each
    workspace, has the same text and error on the host queue as on the workspace queue."""
    root = tmp_path / "root"
    ids = [f"hq-{uuid.uuid4().hex[:6]}-{n}" for n in range(2)]
    _tree(root, ids)
    async with _fleet(dev_env, root, tmp_path, "both") as (fleet, _):
        for wid in ids:
            calls = [(wid, name, args) for name, args in CALLS]
            own = await _run(dev_env, MixedCalls(calls=calls))
            routed = await _run(dev_env, MixedCalls(calls=calls, host=fleet.host_id))
            assert [_comparable(r.text) for r in routed] == [_comparable(r.text) for r in own]
            assert [r.error.code if r.error else None for r in routed] == [
                r.error.code if r.error else None for r in own
            ]
            # Each workspace sees its own tree, never the sibling's.
            [mine] = await _run(
                dev_env,
                MixedCalls(calls=[(wid, "glob", {"pattern": "only-*"})], host=fleet.host_id),
            )
            assert mine.text.splitlines()[0] == f"only-{wid}.txt", mine.text
    errors = {r.error.code for r in routed if r.error}
    assert errors == {
        ErrorCode.SEARCH_INVALID_PATTERN,
        ErrorCode.INVALID_ARGUMENT,
        ErrorCode.SEARCH_FAILED,
    }


async def test_a_workspace_not_on_a_live_host_fails_at_once_naming_both(dev_env, tmp_path):
    """A live host queue, a workspace it does not hold: SEARCH_FAILED naming the workspace
    and the host in well under 2 s (no schedule-to-start wait), and no retry."""
    root = tmp_path / "root"
    _tree(root, ["present"])
    async with _fleet(dev_env, root, tmp_path, "host") as (fleet, _):
        await _run(
            dev_env, MixedCalls(calls=[("present", "glob", {"pattern": "*"})], host=fleet.host_id)
        )
        started = time.monotonic()
        [result] = await _run(
            dev_env, MixedCalls(calls=[("absent", "grep", {"pattern": "x"})], host=fleet.host_id)
        )
        elapsed = time.monotonic() - started
    assert result.error is not None and result.error.code == ErrorCode.SEARCH_FAILED
    assert "'absent'" in result.text and repr(fleet.host_id) in result.text, result.text
    assert elapsed < 2, elapsed


async def test_a_host_nothing_serves_is_reported_like_a_missing_workspace(dev_env):
    """No worker polls the host queue: SEARCH_FAILED naming the workspace and the host,
    after the liveness check (about 8 s by default; 1 s here)."""
    host = f"gone-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    [result] = await _run(
        dev_env,
        MixedCalls(calls=[("ws1", "glob", {"pattern": "*"})], host=host, schedule_to_start_ms=1000),
    )
    assert result.error is not None and result.error.code == ErrorCode.SEARCH_FAILED
    assert "no fs-search worker is serving workspace 'ws1' on host" in result.text
    assert f"fs-search-host/{host}" in result.text
    assert time.monotonic() - started < 15


async def test_a_flooding_workspace_cannot_starve_another_on_the_host_queue(dev_env, tmp_path):
    """One search at a time on the host; workspace A fires 12 slow greps, then B one: B runs
    in the next free slot (round-robin), not after A's backlog."""
    root = tmp_path / "root"
    for wid in ("flood", "quiet"):
        (root / wid).mkdir(parents=True)
        with open(root / wid / "big.bin", "wb") as f:
            f.truncate(256 * 1024**2)  # sparse: ~0.5-1 s for rg to scan
    async with _fleet(
        dev_env, root, tmp_path, "host", max_concurrent_searches=1, max_concurrent_per_workspace=1
    ) as (fleet, services):
        queue = f"wf-{uuid.uuid4()}"
        grep = ("grep", {"pattern": "needle", "path": "big.bin"})
        async with Worker(dev_env.client, task_queue=queue, workflows=[ConcurrentCallsWorkflow]):

            def start(wid: str, n: int):
                return dev_env.client.execute_workflow(
                    ConcurrentCallsWorkflow.run,
                    Calls(options=Options(workspace_id=wid, host=fleet.host_id), calls=[grep] * n),
                    id=f"{wid}-{uuid.uuid4()}",
                    task_queue=queue,
                )

            flood = asyncio.create_task(start("flood", 12))
            slots = services.executor.running_slots
            deadline = time.monotonic() + 60
            while slots.waiting("flood") < 6:  # A's backlog is queued in the worker
                assert time.monotonic() < deadline, "the flood never queued"
                await asyncio.sleep(0.05)
            started = time.monotonic()
            [quiet] = await start("quiet", 1)
            quiet_s = time.monotonic() - started
            left = slots.waiting("flood")
            flooded = await flood
    assert not quiet.is_error and all(not r.is_error for r in flooded)
    assert left >= 3, f"the quiet call waited for the flood's backlog ({left} left)"
    assert quiet_s < 20, quiet_s


@pytest.mark.parametrize("queues", ["host", "both"])
async def test_a_request_naming_a_sibling_reads_nothing_outside_its_own(dev_env, tmp_path, queues):
    """On the host queue, workspace a's call cannot reach b's files by path (relative or
    absolute); on a's own queue, a request naming b is refused."""
    root = tmp_path / "root"
    write_tree(root / "a", {"mine.txt": "secret-a\n"})
    write_tree(root / "b", {"theirs.txt": "secret-b\n"})
    async with _fleet(dev_env, root, tmp_path, queues) as (fleet, _):
        host = fleet.host_id
        attempts = [
            ("a", "grep", {"pattern": "secret", "path": "../b"}),
            ("a", "grep", {"pattern": "secret", "path": str(root / "b")}),
            ("a", "glob", {"pattern": "*", "path": str(root / "b")}),
        ]
        results = await _run(dev_env, MixedCalls(calls=attempts, host=host))
        assert all(r.error and r.error.code == ErrorCode.INVALID_ARGUMENT for r in results)
        assert not any("secret-b" in r.text or "theirs" in r.text for r in results)
        [own] = await _run(
            dev_env, MixedCalls(calls=[("a", "grep", {"pattern": "secret"})], host=host)
        )
        assert "secret-a" in own.text and "secret-b" not in own.text


async def test_a_workspace_queue_refuses_a_request_naming_another_workspace(
    make_activities, tmp_path
):
    """A request that names workspace b but reaches a's worker is INVALID_ARGUMENT, for every
    activity; naming a itself (or nothing) is served."""
    ws = write_tree(tmp_path / "a", {"x.txt": "hello\n"})
    acts = await make_activities(ws)
    mine = acts.telemetry.workspace_id
    assert mine
    env = ActivityEnvironment()
    for call in (
        acts.glob(GlobRequest(pattern="*", workspace_id="b")),
        acts.grep(GrepRequest(pattern="hello", workspace_id="b")),
        acts.tools(ToolsRequest(workspace_id="b")),
        acts.read_spill(ReadSpillRequest(locator="file:///x", workspace_id="b")),
    ):
        with pytest.raises(ApplicationError) as info:
            await env.run(lambda c=call: c)
        assert info.value.type == ErrorCode.INVALID_ARGUMENT and "'b'" in info.value.message
    ok = await env.run(acts.grep, GrepRequest(pattern="hello", workspace_id=mine))
    assert ok.total == 1
    assert (await env.run(acts.tools, ToolsRequest(workspace_id=mine))).available
