"""A workspace queue has one host (worker/_queue_owner.py): the rules, then real workers on the
dev server — `fs-search worker` processes, and fleets of two "hosts" (host ids) in this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from types import SimpleNamespace

import pytest
import pytest_asyncio
from google.protobuf.timestamp_pb2 import Timestamp
from temporalio import activity
from temporalio.api.enums.v1 import DescribeTaskQueueMode, TaskQueueKind, TaskQueueType
from temporalio.api.taskqueue.v1 import PollerInfo
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest, DescribeTaskQueueResponse
from temporalio.client import Client
from temporalio.worker import Worker

from fs_search.activities._config import ConfigError
from fs_search.activities._contract import task_queue_for
from fs_search.worker._queue_owner import (
    LIVE_S,
    QueueOwners,
    RateLimit,
    default_host_id,
    host_id_from_env,
    host_of,
    identity_for,
)
from fs_search.workflows import FsSearchPlugin
from tests.helpers import pollers_of, write_tree
from tests.procs import WorkerProcess
from tests.worker.cli.test_main import cli
from tests.worker.test_fleet import _calls, _fleet, _ids, _until

HOSTNAME = socket.gethostname()

# --- the rules -----------------------------------------------------------------------------


def test_identity_names_the_host_id_when_it_is_not_the_host_name():
    assert identity_for(default_host_id()) == f"fs-search-worker {os.getpid()}@{HOSTNAME}"
    assert identity_for("node-7").endswith(f"@{HOSTNAME} host=node-7")
    for host in (default_host_id(), "node-7"):
        assert host_of(identity_for(host)) == host


def test_host_of_an_identity():
    assert host_of("fs-search-worker 12@pod-abc host=node-1") == "node-1"
    assert host_of("fs-search-worker 12@node-2") == "node-2"  # before host ids: the host name
    assert host_of("4242@some-host") == "some-host"  # the SDK's default identity
    assert host_of("my own worker") is None


def test_host_id_comes_from_the_environment_or_the_host_name():
    assert host_id_from_env(lambda _: None) == default_host_id()
    assert host_id_from_env(lambda _: "  ") == default_host_id()
    assert host_id_from_env({"FS_SEARCH_HOST_ID": "node-1.example"}.get) == "node-1.example"
    for bad in ("node 1", "-node", "x" * 129):
        with pytest.raises(ConfigError, match="FS_SEARCH_HOST_ID"):
            host_id_from_env({"FS_SEARCH_HOST_ID": bad}.get)


def test_rate_limit_lets_a_burst_through_then_spaces_calls():
    limit = RateLimit(per_second=10, burst=3)
    delays = [limit.reserve() for _ in range(6)]
    assert delays[:3] == [0.0, 0.0, 0.0]
    assert delays[3:] == pytest.approx([0.1, 0.2, 0.3], abs=0.02)


def _fake_client(pollers: list[tuple[str, float]], now: float):
    """A client whose DescribeTaskQueue lists (identity, seconds since its last poll), as the
    enhanced mode does (per version and type), the first poller also in the root's list."""
    seen: list[DescribeTaskQueueRequest] = []

    async def describe_task_queue(request, timeout=None):
        seen.append(request)
        infos = []
        for identity, age in pollers:
            stamp = Timestamp()
            stamp.FromNanoseconds(int((now - age) * 1e9))
            infos.append(PollerInfo(identity=identity, last_access_time=stamp))
        response = DescribeTaskQueueResponse(pollers=infos[:1])
        activity = TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY
        response.versions_info[""].types_info[activity].pollers.extend(infos)
        response.versions_info[""].types_info[TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW].pollers.add(
            identity="a workflow worker (another type: not counted)"
        )
        return response

    client = SimpleNamespace(
        namespace="ns", workflow_service=SimpleNamespace(describe_task_queue=describe_task_queue)
    )
    return client, seen


async def test_only_live_pollers_of_other_hosts_are_conflicts():
    now = 1_000_000.0
    pollers = [
        ("fs-search-worker 1@pod-old host=node-a", 5.0),  # this host, another pid and pod
        ("fs-search-worker 2@pod-x host=node-b", LIVE_S + 30),  # another host, gone
        ("fs-search-worker 3@pod-y host=node-c", 59.0),  # another host, live
        ("something else", 1.0),  # names no host: someone else
    ]
    client, seen = _fake_client(pollers, now)
    owners = QueueOwners(client, "node-a", limit=RateLimit(1000, burst=10), clock=lambda: now)
    check = await owners.check("fs-search/w")
    assert [(p.identity, p.host) for p in check.others] == [
        ("fs-search-worker 3@pod-y host=node-c", "node-c"),
        ("something else", None),
    ]
    assert check.taken and check.clears_in() == pytest.approx(LIVE_S - 1.0, abs=0.01)
    (request,) = seen
    assert request.namespace == "ns"
    assert request.task_queue.name == "fs-search/w"
    assert request.task_queue.kind == TaskQueueKind.TASK_QUEUE_KIND_NORMAL
    # Every partition (enhanced mode), activity pollers.
    assert request.api_mode == DescribeTaskQueueMode.DESCRIBE_TASK_QUEUE_MODE_ENHANCED
    assert request.report_pollers
    assert list(request.task_queue_types) == [TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY]
    assert request.versions.unversioned
    message = check.refusal("fs-search-worker 9@pod-new host=node-a", "node-a", "refuses to start")
    assert "fs-search-worker 3@pod-y host=node-c" in message
    assert "fs-search-worker 9@pod-new host=node-a" in message
    assert "FS_SEARCH_ALLOW_SHARED_QUEUE=1" in message

    quiet, _ = _fake_client(pollers[:2], now)
    assert not (await QueueOwners(quiet, "node-a", clock=lambda: now).check("q")).taken


async def test_a_check_that_cannot_be_made_says_why():
    async def failing(request, timeout=None):
        raise RuntimeError("the frontend said no")

    client = SimpleNamespace(
        namespace="ns", workflow_service=SimpleNamespace(describe_task_queue=failing)
    )
    check = await QueueOwners(client, "node-a").check("q")
    assert not check.taken and "the frontend said no" in (check.error or "")


# --- on the dev server ---------------------------------------------------------------------


async def _pollers(client, queue: str) -> list[str]:
    return [p.identity for p in await pollers_of(client, queue)]


async def _until_polled(client, queue: str, identity: str, timeout: float = 30.0) -> None:
    """Until the server lists ``identity`` among the queue's pollers."""
    deadline = time.monotonic() + timeout
    while identity not in await _pollers(client, queue):
        if time.monotonic() > deadline:
            raise AssertionError(f"{identity!r} never polled {queue}")
        await asyncio.sleep(0.1)


# --- `fs-search worker --workspace` --------------------------------------------------------


async def test_a_single_workspace_worker_of_another_host_does_not_start(dev_env, tmp_path):
    """`fs-search worker --workspace` on host-b while host-a's worker polls the queue: exit 2,
    the error naming both identities, no traceback. A worker restarted on host-a (new pid; the
    killed one is still listed) starts; beside it, host-b's starts with
    FS_SEARCH_ALLOW_SHARED_QUEUE=1."""
    ws = write_tree(tmp_path / "ws", {"a.txt": "a\n"})
    address = dev_env.client.service_client.config.target_host
    wsid = f"single-{uuid.uuid4().hex[:8]}"
    queue = task_queue_for(wsid)
    env = {"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill"}
    args = ("worker", "--workspace", str(ws), "--workspace-id", wsid, "--address", address)
    args += ("--sample-over-cap-glob-results",)
    first = WorkerProcess(ws, address, wsid, env={**env, "FS_SEARCH_HOST_ID": "host-a"})
    try:
        first_identity = f"fs-search-worker {first.pid}@{HOSTNAME} host=host-a"
        await _until_polled(dev_env.client, queue, first_identity)

        refused = await asyncio.to_thread(
            cli, *args, env={**env, "FS_SEARCH_HOST_ID": "host-b"}, timeout=60
        )
        assert refused.returncode == 2, refused.stderr
        assert "Traceback" not in refused.stderr
        (error,) = [line for line in refused.stderr.splitlines() if " ERROR " in line]
        assert first_identity in error and "host=host-b" in error and queue in error
        assert "refuses to start" in error
        assert f"worker not started: another host's worker polls {queue}" in refused.stderr

        first.kill()  # no goodbye: its poller stays listed, last seen seconds ago
        assert first_identity in await _pollers(dev_env.client, queue)
        again = WorkerProcess(ws, address, wsid, env={**env, "FS_SEARCH_HOST_ID": "host-a"})
        try:
            assert again.pid != first.pid
            await _until_polled(
                dev_env.client, queue, f"fs-search-worker {again.pid}@{HOSTNAME} host=host-a"
            )
            assert "refuses" not in again.log()

            shared = WorkerProcess(
                ws,
                address,
                wsid,
                env={**env, "FS_SEARCH_HOST_ID": "host-b", "FS_SEARCH_ALLOW_SHARED_QUEUE": "1"},
            )
            try:
                shared_identity = f"fs-search-worker {shared.pid}@{HOSTNAME} host=host-b"
                await _until_polled(dev_env.client, queue, shared_identity)
            finally:
                assert shared.terminate(timeout=30) == 0
        finally:
            assert again.terminate(timeout=30) == 0
    finally:
        if first.proc.poll() is None:
            first.kill()


def test_an_invalid_host_id_is_a_usage_error(tmp_path):
    p = cli(
        "worker",
        "--workspace",
        str(tmp_path),
        "--sample-over-cap-glob-results",
        "--address",
        "127.0.0.1:1",
        env={"FS_SEARCH_HOST_ID": "not valid"},
        timeout=30,
    )
    assert p.returncode == 2 and "FS_SEARCH_HOST_ID" in p.stderr and "Traceback" not in p.stderr


# --- fleets: two "hosts" in this process ---------------------------------------------------


@pytest_asyncio.fixture
async def host_b(dev_env, payload_dir) -> Client:
    """A second connection to the dev server, for a second "host" in this process (Temporal
    allows one worker per queue and client)."""
    return await Client.connect(
        dev_env.client.service_client.config.target_host,
        namespace=dev_env.client.namespace,
        plugins=[FsSearchPlugin(spill_url=f"file://{payload_dir}", getenv=lambda _: None)],
    )


class CountingOwners(QueueOwners):
    """QueueOwners that counts its checks."""

    calls = 0

    async def check(self, queue):
        self.calls += 1
        return await super().check(queue)


def _count_ticks(fleet):
    """Count the fleet's ticks (a scan, or with events the cheap checks) from now on;
    returns the counter."""
    count = 0
    tick = fleet.tick

    async def counted():
        nonlocal count
        count += 1
        await tick()

    fleet.tick = counted
    return lambda: count


def _two_hosts(tmp_path, wid: str):
    """The same workspace name on two "hosts": roots a/ and b/, each its own content."""
    write_tree(tmp_path / "a" / wid, {"where.txt": "served by host a\n"})
    write_tree(tmp_path / "b" / wid, {"where.txt": "served by host b\n"})
    return tmp_path / "a", tmp_path / "b"


async def test_a_second_host_is_refused_while_the_first_polls(dev_env, host_b, tmp_path, caplog):
    """Fleet B (host-b) finds fs-search/<w> polled by fleet A (host-a): it does not attach,
    logs an error naming both identities once, does not ask again on every scan, and every
    call is answered from A's directory."""
    (wid,) = _ids("own", 1)
    root_a, root_b = _two_hosts(tmp_path, wid)
    queue = task_queue_for(wid)
    caplog.set_level(logging.INFO, logger="fs_search.worker._fleet")
    async with _fleet(dev_env, root_a, tmp_path / "spill-a", host_id="host-a") as (a, wf_queue):
        await _until(lambda: wid in a.attached, 30)
        await _until_polled(dev_env.client, queue, a.identity)
        owners = CountingOwners(host_b, "host-b")
        async with _fleet(dev_env, root_b, tmp_path / "spill-b", owners=owners, client=host_b) as (
            b,
            _,
        ):
            await _until(lambda: wid in b.refused, 30)
            ticks = _count_ticks(b)
            answers = await _calls(dev_env, wf_queue, [(wid, "grep", {"pattern": "served"})] * 4)
            await _until(lambda: ticks() >= 5)  # b ticks every 0.2 s; the retry is 10 s away
            assert wid not in b.attached
            assert (b.refused[wid].count, owners.calls) == (1, 1)
            assert b.identity not in await _pollers(dev_env.client, queue)
    assert [[m.line for m in r.result.matches] for r in answers] == [["served by host a"]] * 4
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1, errors
    assert a.identity in errors[0] and b.identity in errors[0], errors[0]
    assert f"refuses to attach workspace {wid}" in errors[0] and queue in errors[0]
    assert a.identity.endswith(" host=host-a") and b.identity.endswith(" host=host-b")


async def test_allow_shared_queue_attaches_beside_another_host(dev_env, host_b, tmp_path):
    """With allow_shared_queue (FS_SEARCH_ALLOW_SHARED_QUEUE=1) the second host attaches and
    both poll the queue."""
    (wid,) = _ids("shared", 1)
    root_a, root_b = _two_hosts(tmp_path, wid)
    queue = task_queue_for(wid)
    async with _fleet(dev_env, root_a, tmp_path / "spill-a", host_id="host-a") as (a, _):
        await _until(lambda: wid in a.attached, 30)
        await _until_polled(dev_env.client, queue, a.identity)
        async with _fleet(
            dev_env,
            root_b,
            tmp_path / "spill-b",
            host_id="host-b",
            client=host_b,
            allow_shared_queue=True,
        ) as (b, _):
            await _until(lambda: wid in b.attached, 30)
            await _until_polled(dev_env.client, queue, b.identity)
            assert not b.refused
            assert {a.identity, b.identity} <= set(await _pollers(dev_env.client, queue))


@activity.defn(name="fs_search.tools")
async def _never_called() -> None:
    raise AssertionError("not called")


async def test_the_same_host_is_never_refused(dev_env, host_b, tmp_path):
    """A predecessor on this host (another pid, another pod name, same host id) is still
    listed after it stopped: the fleet attaches anyway, and beside a live one too."""
    (wid,) = _ids("restart", 1)
    write_tree(tmp_path / "root" / wid, {"a.txt": "a\n"})
    queue = task_queue_for(wid)
    for predecessor, live in (("4242@old-pod host=host-a", False), ("77@pod-2 host=host-a", True)):
        identity = f"fs-search-worker {predecessor}"
        old = Worker(host_b, task_queue=queue, activities=[_never_called], identity=identity)
        running = asyncio.create_task(old.run())
        try:
            await _until_polled(dev_env.client, queue, identity)
            if not live:
                await old.shutdown()
                assert identity in await _pollers(dev_env.client, queue)  # listed, not polling
            async with _fleet(dev_env, tmp_path / "root", tmp_path / "spill", host_id="host-a") as (
                fleet,
                _,
            ):
                await _until(lambda: wid in fleet.attached, 30)
                assert not fleet.refused
        finally:
            with contextlib.suppress(Exception):
                await old.shutdown()
            await running


async def test_a_refused_workspace_attaches_once_the_other_host_is_gone(dev_env, host_b, tmp_path):
    """A refused workspace is checked again on a later scan: once the other host's last poll
    is past the live window (15 s here, 90 s by default), it attaches and serves its tree."""
    (wid,) = _ids("gone", 1)
    root_a, root_b = _two_hosts(tmp_path, wid)
    queue = task_queue_for(wid)
    async with contextlib.AsyncExitStack() as stack:
        a, wf_queue = await stack.enter_async_context(
            _fleet(dev_env, root_a, tmp_path / "spill-a", host_id="host-a")
        )
        await _until(lambda: wid in a.attached, 30)
        # A call served by A: its poller polls afresh right after (its last poll is now).
        (first,) = await _calls(dev_env, wf_queue, [(wid, "grep", {"pattern": "served"})])
        assert first.result.matches[0].line == "served by host a"
        # Listed (the server caches the list ~5 s: A's own check before it polled said none).
        await _until_polled(dev_env.client, queue, a.identity)
        owners = QueueOwners(host_b, "host-b", live_s=15)
        async with _fleet(dev_env, root_b, tmp_path / "spill-b", owners=owners, client=host_b) as (
            b,
            wf_b,
        ):
            await _until(lambda: wid in b.refused, 30)
            await stack.aclose()  # host A goes away; the server keeps listing its poller
            assert a.identity in await _pollers(dev_env.client, queue)
            await _until(lambda: wid in b.attached, 90)
            assert not b.refused
            (answer,) = await _calls(dev_env, wf_b, [(wid, "grep", {"pattern": "served"})])
    assert [m.line for m in answer.result.matches] == ["served by host b"], answer.text


async def test_many_workspaces_are_checked_at_a_bounded_rate(dev_env, tmp_path):
    """30 new workspaces, a limiter of 10 checks/s with bursts of 10: all attach, no sooner
    than the limiter allows (2 s for the 20 after the burst)."""
    ids = _ids("rate", 30)
    for wid in ids:
        write_tree(tmp_path / "root" / wid, {"a.txt": "a\n"})
    owners = CountingOwners(dev_env.client, "host-r", limit=RateLimit(per_second=10, burst=10))
    started = time.monotonic()
    async with _fleet(dev_env, tmp_path / "root", tmp_path / "spill", owners=owners) as (fleet, _):
        await _until(lambda: len(fleet.attached) == 30, 60)
        elapsed = time.monotonic() - started
    assert owners.calls == 30
    assert elapsed >= 1.9, elapsed
