"""A workspace queue has one host (worker/queue_owner.py): the rules, then real
`fs-search worker` processes on the dev server.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid
from types import SimpleNamespace

import pytest
from google.protobuf.timestamp_pb2 import Timestamp
from temporalio.api.enums.v1 import DescribeTaskQueueMode, TaskQueueKind, TaskQueueType
from temporalio.api.taskqueue.v1 import PollerInfo
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest, DescribeTaskQueueResponse

from fs_search.activities.config import ConfigError
from fs_search.activities.models import task_queue_for
from fs_search.worker.queue_owner import (
    LIVE_S,
    QueueOwners,
    RateLimit,
    default_host_id,
    host_id_from_env,
    host_of,
    identity_for,
    list_pollers,
)
from tests.helpers import write_tree
from tests.procs import WorkerProcess
from tests.worker.test_cli import cli

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
    return [p.identity for p in await list_pollers(client, queue)]


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
