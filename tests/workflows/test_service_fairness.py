"""One caller namespace cannot starve the others through the fs_search endpoint (issue 47,
finding 3), through a real `fs-search worker --workspaces-root ... --nexus-queue` and a dev
server with three namespaces: the search namespace, a hostile caller's (``agents``: 600
operations at once, each on a made-up workspace and asking the handler to check its queue
first) and a quiet caller's (``others``: one grep at a time on a real workspace).

Before, every check slept in the process-wide DescribeTaskQueue limiter holding a Nexus slot
(and a waiter cancelled at its request's deadline never gave its reservation back), so the
quiet caller's grep waited behind the flood (45-94 s in the audit) and so did the fleet's
attach check of a new workspace (10.5 s); a call on a workspace no worker serves, which the
handler checks, waited for the flood's checks. The bounds here are loose (a busy 2-core
machine, and the dev server's own queues, which the flood's operations fill whatever the
handler does, delay every caller's results now and then): the quiet grep's median within
``max(5 s, 10 x alone)``, the unserved call answered within ``max(10 s, 3 x alone)``, a new
workspace attached within 6 s.
"""

from __future__ import annotations

import asyncio
import signal
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

from fs_search.activities._contract import ErrorCode
from fs_search.worker import create_endpoint
from fs_search.worker._devstack import DevServer
from fs_search.worker._service_handler import CALLBACKS_DYNAMIC_CONFIG
from fs_search.workflows import FsSearchPlugin
from tests.helpers import write_tree
from tests.procs import WorkerProcess, wait_until
from tests.workflows_under_test import Calls, CallsWorkflow, Options

FLOOD_OPERATIONS = 600
QUIET_CALLS = 3
NEXUS_FLOOD = Path(__file__).parents[2] / "bench" / "nexus_flood.py"


class NexusFlood:
    """The hostile caller: ``bench/nexus_flood.py`` in a process of its own (its own client
    and workflow worker, as another tenant's agents run), stopped by its pid."""

    def __init__(self, address: str, endpoint: str, log: Path) -> None:
        self.log = log
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(NEXUS_FLOOD),
                "--address",
                address,
                "--namespace",
                "agents",
                "--endpoint",
                endpoint,
                "--operations",
                str(FLOOD_OPERATIONS),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def started(self) -> None:
        wait_until(lambda: "nexus flood started" in self.log.read_text(), 60)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


async def _quiet_grep(client: Client, queue: str, endpoint: str) -> float:
    started = time.monotonic()
    handle = await client.start_workflow(
        CallsWorkflow.run,
        Calls(
            options=Options(workspace_id="quiet", endpoint=endpoint),
            calls=[("grep", {"pattern": "needle"})],
        ),
        id=f"quiet-{uuid.uuid4()}",
        task_queue=queue,
    )
    (result,) = await handle.result()
    took = time.monotonic() - started
    assert not result.is_error and result.result.total == 1, result.text
    times = {}
    async for e in handle.fetch_history_events():
        times.setdefault(
            EventType.Name(e.event_type).removeprefix("EVENT_TYPE_"), e.event_time.ToMilliseconds()
        )
    first = times["WORKFLOW_EXECUTION_STARTED"]
    _say(f"{took:.2f} s: " + ", ".join(f"{k.lower()} +{v - first} ms" for k, v in times.items()))
    return took


async def _unserved(client: Client, queue: str, endpoint: str) -> float:
    """A call on a workspace no worker serves: SEARCH_FAILED naming it, after its
    schedule-to-start timeout (1 s) and one queue check by the handler."""
    started = time.monotonic()
    wsid = f"nobody-{uuid.uuid4().hex[:6]}"
    (result,) = await client.execute_workflow(
        CallsWorkflow.run,
        Calls(
            options=Options(workspace_id=wsid, endpoint=endpoint, schedule_to_start_ms=1000),
            calls=[("grep", {"pattern": "needle"})],
        ),
        id=f"unserved-{uuid.uuid4()}",
        task_queue=queue,
    )
    took = time.monotonic() - started
    assert result.error is not None and result.error.code == ErrorCode.SEARCH_FAILED, result.text
    assert f"no fs-search worker is serving workspace {wsid!r}" in result.text, result.text
    _say(f"unserved call {took:.2f} s")
    return took


def _say(text: str) -> None:
    print(f"[fairness] {text}", file=sys.stderr, flush=True)


async def _attach(worker: WorkerProcess, root: Path) -> float:
    """Seconds from a new workspace's directory to the worker's "attached" line."""
    name = f"late-{uuid.uuid4().hex[:6]}"
    started = time.monotonic()
    write_tree(root / name, {"a.txt": "needle\n"})
    await asyncio.to_thread(
        wait_until, lambda: f"attached workspace {name}" in worker.log(), 120, 0.05
    )
    return time.monotonic() - started


@pytest.mark.timeout(600)
async def test_a_flood_from_one_namespace_leaves_the_others_their_share(tmp_path):
    """The quiet caller's grep under the hostile caller's 600 operations, against alone;
    and a new workspace's attach under the flood, against without it."""
    server = await DevServer(
        dynamic_config=[CALLBACKS_DYNAMIC_CONFIG], namespaces=["fs-search", "agents", "others"]
    ).start()
    worker: WorkerProcess | None = None
    try:
        plugin = FsSearchPlugin(spill_url=f"file://{tmp_path}/payloads", getenv=lambda _: None)
        search = await Client.connect(server.address, namespace="fs-search", plugins=[plugin])
        quiet_plugin = FsSearchPlugin(external_storage=False, getenv=lambda _: None)
        others = await Client.connect(server.address, namespace="others", plugins=[quiet_plugin])
        endpoint, nexus_queue = f"fair-{uuid.uuid4().hex[:8]}", "fs-search-nexus"
        await create_endpoint(
            search, name=endpoint, target_namespace="fs-search", target_queue=nexus_queue
        )
        root = tmp_path / "root"
        write_tree(root / "quiet", {"a.txt": "needle\n", "b.txt": "hay\n"})
        worker = WorkerProcess(
            root,
            server.address,
            None,
            env={"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill"},
            args=(
                "--sample-over-cap-glob-results",
                "--namespace",
                "fs-search",
                "--nexus-queue",
                nexus_queue,
                "--scan-interval",
                "1",
            ),
        )
        await asyncio.to_thread(wait_until, lambda: "attached workspace quiet" in worker.log(), 60)
        queue = f"quiet-{uuid.uuid4().hex[:6]}"
        async with Worker(others, task_queue=queue, workflows=[CallsWorkflow]):
            await _quiet_grep(others, queue, endpoint)  # warm
            alone = [await _quiet_grep(others, queue, endpoint) for _ in range(QUIET_CALLS)]
            unserved_alone = [await _unserved(others, queue, endpoint) for _ in range(2)]
            attach_alone = await _attach(worker, root)
            flood = NexusFlood(server.address, endpoint, tmp_path / "flood.log")
            try:
                await asyncio.to_thread(flood.started)
                await asyncio.sleep(3)  # the flood under way
                _say(f"alone {alone}, attach alone {attach_alone:.2f}; flood started")
                attach_flooded = await _attach(worker, root)
                _say(f"attach under the flood {attach_flooded:.2f}")
                flooded = [await _quiet_grep(others, queue, endpoint) for _ in range(QUIET_CALLS)]
                unserved_flooded = [await _unserved(others, queue, endpoint) for _ in range(2)]
            finally:
                await asyncio.to_thread(flood.stop)
        (tmp_path / "worker.log").write_text(worker.log())
        async for a in search.list_activities("TaskQueue = 'fs-search/quiet'"):
            d = await search.get_activity_handle(a.activity_id, run_id=a.activity_run_id).describe()
            _say(
                f"activity {a.activity_id[-12:]}: attempt {d.attempt} scheduled "
                f"{d.schedule_time:%H:%M:%S.%f} started {d.last_started_time} "
                f"closed {d.close_time}"
            )
        _say(f"worker log: {tmp_path / 'worker.log'}")
        print(
            f"quiet grep alone {[round(t, 2) for t in alone]} s, under the flood "
            f"{[round(t, 2) for t in flooded]} s; unserved call alone "
            f"{[round(t, 2) for t in unserved_alone]} s, under the flood "
            f"{[round(t, 2) for t in unserved_flooded]} s; attach alone {attach_alone:.2f} s, "
            f"under the flood {attach_flooded:.2f} s"
        )
        bound = max(5.0, 10 * statistics.median(alone))
        assert statistics.median(flooded) <= bound, (flooded, alone)
        bound = max(10.0, 3 * statistics.median(unserved_alone))
        assert max(unserved_flooded) <= bound, (unserved_flooded, unserved_alone)
        assert attach_flooded <= 6, (attach_flooded, attach_alone)
    finally:
        if worker is not None:
            worker.terminate(60)
        server.stop()
