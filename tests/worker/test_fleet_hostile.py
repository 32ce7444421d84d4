"""Hostile tenants on one host (issue 34), through a real Fleet, the dev server and rg: a root
entry exchanged with a link outside while the fleet scans, names that would forge log lines,
and a flooding workspace on a host queue."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.worker import Worker

from fs_search.activities._attempts import (
    HAND_BACKS_ON_SERVER,
    HANDED_BACK_PRIORITY,
    MIN_HANDED_BACK_PAUSE,
)
from fs_search.activities._config import FsSearchConfig
from fs_search.activities._contract import WORKSPACE_BUSY
from fs_search.activities._held_root import HeldRoot
from fs_search.activities._workspace import Changed, Workspace
from fs_search.activities.storage import local_storage
from fs_search.worker import build_services
from fs_search.worker._fleet import Fleet, scan_root
from fs_search.workflows import FsSearchClient
from tests.helpers import sparse_file, write_tree
from tests.oracles import running_for
from tests.procs import WorkerProcess
from tests.workflows_under_test import Calls, CallsWorkflow, ConcurrentCallsWorkflow, Options

CANARY = "the-canary-outside"

# Exchanges ``root/<name>`` and ``root/.swap`` (renameat2 RENAME_EXCHANGE) until killed: one
# is the workspace directory, the other a symlink to a directory outside the root.
SWAPPER = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
root = os.open(sys.argv[1], os.O_PATH | os.O_DIRECTORY)
a, b = sys.argv[2].encode(), b".swap"
while True:
    if libc.renameat2(root, a, root, b, 2) != 0:  # RENAME_EXCHANGE
        sys.exit(f"renameat2: {os.strerror(ctypes.get_errno())}")
    time.sleep(0.0005)
"""


@contextlib.contextmanager
def _swapping(root: Path, name: str):
    """A process exchanging ``root/name`` with ``root/.swap`` as fast as it can."""
    proc = subprocess.Popen(
        [sys.executable, "-I", "-c", SWAPPER, str(root), name],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


@contextlib.asynccontextmanager
async def _host_fleet(dev_env, root: Path, spill: Path, *, scan_interval: float, **settings):
    """A Fleet over ``root`` serving its host queue, and a workflow worker's queue."""
    settings.setdefault("sample_over_cap_glob_results", False)
    config = FsSearchConfig.load(getenv=lambda _: None, overrides=settings)
    services = await build_services(config, storage=local_storage(spill), workspaces_root=True)
    fleet = Fleet(
        dev_env.client,
        services,
        root,
        scan_interval=scan_interval,
        host_id=f"host-{uuid.uuid4().hex[:8]}",
        queues="host",
    )
    stop = asyncio.Event()
    queue = f"wf-{uuid.uuid4()}"
    running = asyncio.create_task(fleet.run(stop))
    try:
        async with Worker(
            dev_env.client, task_queue=queue, workflows=[CallsWorkflow, ConcurrentCallsWorkflow]
        ):
            yield fleet, queue
    finally:
        stop.set()
        await asyncio.wait_for(running, 60)
        await services.executor.kill_all()
        services.offload.shutdown()


async def test_an_entry_exchanged_with_a_link_outside_never_serves_the_outside(dev_env, tmp_path):
    """``root/victim`` and a symlink to a directory outside the root swap places about a
    thousand times a second while the fleet scans every 50 ms and four callers grep the
    workspace for 20 s: no answer holds a byte of the outside directory, and the directory
    itself is still served (the run is not vacuous)."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    write_tree(root / "victim", {"own.txt": "own words\n"})
    write_tree(outside, {"canary.txt": f"{CANARY} words\n"})
    os.symlink(outside, root / ".swap")
    async with _host_fleet(dev_env, root, tmp_path / "spill", scan_interval=0.05) as (fleet, wq):
        options = Options(workspace_id="victim", host=fleet.host_id, timeout_ms=10_000)
        batch = Calls(options=options, calls=[("grep", {"pattern": "words"})] * 10)
        answers: list[str] = []
        deadline = time.monotonic() + 20

        async def caller() -> None:
            while time.monotonic() < deadline:
                results = await dev_env.client.execute_workflow(
                    CallsWorkflow.run, batch, id=f"race-{uuid.uuid4()}", task_queue=wq
                )
                answers.extend(r.text for r in results)

        with _swapping(root, "victim") as swapper:
            await asyncio.gather(*(caller() for _ in range(4)))
            assert swapper.poll() is None, swapper.stderr.read() if swapper.stderr else ""
    leaked = [a for a in answers if CANARY in a]
    served = [a for a in answers if "own words" in a]
    print(f"{len(answers)} answers, {len(served)} served, {len(leaked)} leaked")
    assert not leaked, f"{len(leaked)} of {len(answers)} answers read outside: {leaked[0]}"
    assert len(served) >= 20, f"only {len(served)} of {len(answers)} answers were served"


FORGED = "FORGED fs_search.worker._fleet: attached workspace admin"


async def test_names_that_would_forge_log_lines_reach_the_log_escaped(dev_env, tmp_path):
    """A valid id linking to a sibling whose name holds a newline and ANSI escapes: the real
    worker's log names the linked path escaped (no forged line, no escape byte), attaching,
    serving and detaching it."""
    root = tmp_path / "root"
    evil = f"evil\n{FORGED}\x1b[2J\x1b]0;owned\x07\u2028"
    write_tree(root / evil, {"a.txt": "needle\n"})
    os.symlink(evil, root / "alias")
    address = dev_env.client.service_client.config.target_host
    worker = WorkerProcess(root, address, None, ready_timeout=90)
    queue = f"wf-{uuid.uuid4()}"
    try:
        await _until(lambda: "attached workspace alias" in worker.log(), 60)
        async with Worker(dev_env.client, task_queue=queue, workflows=[CallsWorkflow]):
            [found] = await dev_env.client.execute_workflow(
                CallsWorkflow.run,
                Calls(
                    options=Options(workspace_id="alias"), calls=[("grep", {"pattern": "x|needle"})]
                ),
                id=f"log-{uuid.uuid4()}",
                task_queue=queue,
            )
        os.unlink(root / "alias")
        await _until(lambda: "detached workspace alias" in worker.log(), 60)
    finally:
        worker.terminate(60)
    log = worker.log()
    assert not found.is_error and found.result.total == 1, found.text
    assert "detaching workspace alias" in log
    for line in log.splitlines():
        assert not line.startswith("FORGED"), line
    assert "\x1b" not in log and "\x07" not in log and "\u2028" not in log
    assert "evil\\x0aFORGED" in log  # the name is there, escaped


async def _until(predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.1)


# Small host limits: 2 searches at once, 1 per workspace, 4 calls held (a share of 1 each).
SHARE_OF_ONE = {
    "max_concurrent_searches": 2,
    "max_concurrent_per_workspace": 1,
    "max_queued_searches": 4,
}


async def test_a_flood_holds_only_its_share_of_a_host_queue(dev_env, tmp_path):
    """A host queue at small limits (2 searches at once, 1 per workspace, 4 calls held): A
    fires 16 greps of 1.5 s each, then B one small grep. B answers within seconds — A holds
    at most its share of the held calls, so B's call is taken at once instead of waiting in
    Temporal behind A's backlog — and every call of A's still runs."""
    root = tmp_path / "root"
    sparse_file(root / "flood" / "huge.bin", gigabytes=20)
    write_tree(root / "quiet", {"q.txt": "quiet\n"})
    async with _host_fleet(
        dev_env, root, tmp_path / "spill", scan_interval=0.2, **SHARE_OF_ONE
    ) as (
        fleet,
        wq,
    ):
        await _until(lambda: {"flood", "quiet"} <= set(fleet.attached), 30)
        fleet.router.parked_per_workspace = 0  # hand-backs, not parking (issue 47), here
        host = fleet.host_id
        flood_calls = [("grep", {"pattern": "x", "path": "huge.bin"})] * 16
        flood_started = time.monotonic()
        flood_id = f"flood-{uuid.uuid4()}"
        flood = asyncio.create_task(
            dev_env.client.execute_workflow(
                ConcurrentCallsWorkflow.run,
                Calls(
                    options=Options(workspace_id="flood", host=host, timeout_ms=1500),
                    calls=flood_calls,
                ),
                id=flood_id,
                task_queue=wq,
            )
        )
        slots = fleet.services.executor.running_slots
        await _until(lambda: running_for(slots, "flood") >= 1, 30)
        await asyncio.sleep(2)  # the backlog is queued by now
        started = time.monotonic()
        [quiet] = await dev_env.client.execute_workflow(
            CallsWorkflow.run,
            Calls(
                options=Options(workspace_id="quiet", host=host, queue_ms=60_000),
                calls=[("grep", {"pattern": "quiet"})],
            ),
            id=f"quiet-{uuid.uuid4()}",
            task_queue=wq,
        )
        quiet_s = time.monotonic() - started
        flooded = await flood
        flood_s = time.monotonic() - flood_started
        history = [
            e async for e in dev_env.client.get_workflow_handle(flood_id).fetch_history_events()
        ]
    # The server brings a handed-back call back itself on its first attempts: the attempt
    # that ran names its number and the hand-back before it (the pause the host asked, spaced).
    starts = {
        e.event_id: e.activity_task_started_event_attributes
        for e in history
        if e.HasField("activity_task_started_event_attributes")
    }
    retried = [s for s in starts.values() if s.attempt > 1]
    before = [s.last_failure.application_failure_info for s in retried]
    assert retried and {f.type for f in before} == {WORKSPACE_BUSY}, before
    assert all(f.next_retry_delay.ToTimedelta() >= MIN_HANDED_BACK_PAUSE for f in before)
    # On its last attempt for the server, a hand-back comes back to the workflow: it waits
    # the pause the host asked (a timer) and schedules the call again at the lowest
    # priority, behind every other workspace's new calls; first schedules keep the default.
    failed = [
        e.activity_task_failed_event_attributes
        for e in history
        if e.HasField("activity_task_failed_event_attributes")
    ]
    to_workflow = [f for f in failed if f.failure.application_failure_info.type == WORKSPACE_BUSY]
    assert all(starts[f.started_event_id].attempt == HAND_BACKS_ON_SERVER for f in to_workflow)
    asked = [f.failure.application_failure_info.next_retry_delay for f in to_workflow]
    waited = [
        e.timer_started_event_attributes.start_to_fire_timeout
        for e in history
        if e.HasField("timer_started_event_attributes")
    ]
    assert len(waited) == len(asked), (len(asked), len(waited))
    # (the workflow's timer holds the pause as float seconds: equal to a microsecond)
    for w, a in zip(waited, asked, strict=True):
        expected = max(a.ToTimedelta(), MIN_HANDED_BACK_PAUSE)
        assert abs(w.ToTimedelta() - expected) <= timedelta(milliseconds=1), (w, a)
    priorities = [
        e.activity_task_scheduled_event_attributes.priority.priority_key
        for e in history
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    print(
        f"quiet grep under the flood: {quiet_s:.2f} s; flood of 16: {flood_s:.1f} s, "
        f"{fleet.router.handed_back} calls handed back, {len(retried)} calls retried by the "
        f"server, {len(to_workflow)} hand-backs to the workflow"
    )
    assert not quiet.is_error and quiet.result.total == 1, quiet.text
    assert quiet_s < 4, quiet_s
    assert priorities.count(0) == 16, priorities  # every call's first schedule
    assert priorities.count(HANDED_BACK_PRIORITY) == len(priorities) - 16 == len(to_workflow)
    # The flood's calls all ran to their budget (none refused, none lost).
    assert len(flooded) == 16
    assert all(r.error and r.error.code == "SEARCH_ABORTED" for r in flooded), [
        r.text for r in flooded if not (r.error and r.error.code == "SEARCH_ABORTED")
    ]


def test_an_entry_exchanged_after_the_scan_is_not_attached(tmp_path):
    """Deterministically, the race's two steps: the scan records `victim`'s directory, the
    names are exchanged, and attaching (opening the entry beneath the held root) refuses it;
    exchanged back, it attaches, and a call then serves it only while it is that directory."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    write_tree(root / "victim", {"own.txt": "own\n"})
    write_tree(outside, {"canary.txt": "canary\n"})
    os.symlink(outside, root / ".swap")
    held = HeldRoot(root)
    try:
        scan = scan_root(held)
        vetted = scan.identities["victim"]
        _exchange(root, "victim", ".swap")
        with pytest.raises(Changed):
            Workspace.entry(held, "victim", expected=vetted)
        _exchange(root, "victim", ".swap")
        workspace = Workspace.entry(held, "victim", expected=vetted)
        with workspace.held() as tree:
            assert tree.identity == vetted
        _exchange(root, "victim", ".swap")
        assert not workspace.readable()
        workspace.close()
    finally:
        held.close()


def _exchange(root: Path, a: str, b: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(root, os.O_PATH | os.O_DIRECTORY)
    try:
        if libc.renameat2(fd, a.encode(), fd, b.encode(), 2) != 0:  # RENAME_EXCHANGE
            raise OSError(ctypes.get_errno(), "renameat2")
    finally:
        os.close(fd)


async def test_a_one_off_call_handed_back_is_retried_by_the_server(dev_env, tmp_path):
    """One-off calls (standalone activities) on a host queue at a share of 1: while one holds
    the workspace's share, the next is handed back and the server retries the same activity
    after the pause the host asked; it answers once the share frees, on a later attempt."""
    root = tmp_path / "root"
    sparse_file(root / "w" / "huge.bin", gigabytes=20)
    write_tree(root / "w", {"small.txt": "needle\n"})
    async with _host_fleet(
        dev_env, root, tmp_path / "spill", scan_interval=0.2, **SHARE_OF_ONE
    ) as (
        fleet,
        _,
    ):
        await _until(lambda: "w" in fleet.attached, 30)
        assert fleet.router.share == 1
        fleet.router.parked_per_workspace = 0  # hand-backs, not parking (issue 47), here
        slow = FsSearchClient(dev_env.client, "w", host=fleet.host_id, timeout_ms=1000)
        quick = FsSearchClient(dev_env.client, "w", host=fleet.host_id)
        holding = asyncio.create_task(slow.grep("zzz", path="huge.bin"))
        slots = fleet.services.executor.running_slots
        await _until(lambda: running_for(slots, "w") >= 1, 30)
        found = await quick.grep("needle", path="small.txt")
        held = await holding
        assert quick.last_id is not None
        described = await dev_env.client.get_activity_handle(quick.last_id).describe()
    assert held.error is not None and held.error.code == "SEARCH_ABORTED", held.text
    assert not found.is_error and found.result.total == 1, found.text
    # Handed back while the slow call held the share: the server brought the call back (the
    # same activity, a later attempt), and after HAND_BACKS_ON_SERVER attempts the client
    # would start it again (attempt 1 of a new activity).
    router = fleet.router
    assert router.handed_back >= 1
    assert router.server_retries >= min(router.handed_back, HAND_BACKS_ON_SERVER - 1) >= 1
    expected = router.handed_back + 1 if router.handed_back < HAND_BACKS_ON_SERVER else None
    if expected is not None:
        assert described.attempt == expected, (described.attempt, router.handed_back)


async def test_calls_beyond_a_share_wait_in_the_host_with_their_slots_lent(dev_env, tmp_path):
    """Parking (issue 47): at a share of 1, a flood's calls beyond the share wait in the
    worker (none handed back), lending their slots, so another workspace's grep is taken at
    once; each parked call runs as a place frees, and all of them end (none lost)."""
    root = tmp_path / "root"
    sparse_file(root / "flood" / "huge.bin", gigabytes=20)
    write_tree(root / "quiet", {"q.txt": "quiet\n"})
    async with _host_fleet(
        dev_env, root, tmp_path / "spill", scan_interval=0.2, **SHARE_OF_ONE
    ) as (fleet, wq):
        await _until(lambda: {"flood", "quiet"} <= set(fleet.attached), 30)
        host = fleet.host_id
        flood = asyncio.create_task(
            dev_env.client.execute_workflow(
                ConcurrentCallsWorkflow.run,
                Calls(
                    options=Options(workspace_id="flood", host=host, timeout_ms=1000),
                    calls=[("grep", {"pattern": "x", "path": "huge.bin"})] * 8,
                ),
                id=f"flood-{uuid.uuid4()}",
                task_queue=wq,
            )
        )
        await _until(lambda: fleet.router.parked >= 4, 30)
        # Parked calls lend their slots: the process counts only what it really holds.
        assert fleet.held_slots.running <= fleet.services.capacity.held
        started = time.monotonic()
        [quiet] = await dev_env.client.execute_workflow(
            CallsWorkflow.run,
            Calls(
                options=Options(workspace_id="quiet", host=host),
                calls=[("grep", {"pattern": "quiet"})],
            ),
            id=f"quiet-{uuid.uuid4()}",
            task_queue=wq,
        )
        quiet_s = time.monotonic() - started
        flooded = await flood
    assert not quiet.is_error and quiet.result.total == 1, quiet.text
    assert quiet_s < 4, quiet_s
    assert fleet.router.handed_back == 0
    assert fleet.router.parked == 0
    assert [r.error.code if r.error else "ok" for r in flooded] == ["SEARCH_ABORTED"] * 8
