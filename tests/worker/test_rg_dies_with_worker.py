"""rg never outlives its worker (issue 47, finding 5), through a real `fs-search worker`.

rg was started by the fork server with ``posix_spawn``, which cannot set a parent-death
signal: with the worker and its fork server killed together (SIGKILL, neither able to act),
rg kept reading — seconds more on a large file, for ever on a FIFO. Now the fork server's
thread that starts rg sets ``PR_SET_PDEATHSIG`` (SIGKILL) in the child before its exec and
stays until rg is reaped, so rg dies with the server, sandbox on or off.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import uuid

import psutil
import pytest
from temporalio.worker import Worker

from tests.helpers import sparse_file
from tests.procs import WorkerProcess, alive, wait_until
from tests.workflows_under_test import Calls, CallsWorkflow, Options


@pytest.mark.parametrize("sandbox", ["auto", "off"])
async def test_rg_dies_when_the_worker_and_its_fork_server_are_killed_together(
    dev_env, tmp_path, sandbox
):
    """A grep reading a 200 GB sparse file (minutes of rg): worker and fork server stopped,
    then both SIGKILLed; rg is gone within seconds, not at the end of its budget."""
    ws = tmp_path / "ws"
    sparse_file(ws / "huge.bin", gigabytes=200)
    wsid = f"orphan-{uuid.uuid4().hex[:8]}"
    env = {"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill", "FS_SEARCH_SANDBOX": sandbox}
    address = dev_env.client.service_client.config.target_host
    worker = WorkerProcess(ws, address, wsid, env=env)
    queue = f"wf-{uuid.uuid4()}"
    rgs: list[psutil.Process] = []
    try:
        async with Worker(dev_env.client, task_queue=queue, workflows=[CallsWorkflow]):
            call = await dev_env.client.start_workflow(
                CallsWorkflow.run,
                Calls(
                    options=Options(workspace_id=wsid, timeout_ms=300_000),
                    calls=[("grep", {"pattern": "zzz", "path": "huge.bin"})],
                ),
                id=f"orphan-{uuid.uuid4()}",
                task_queue=queue,
            )
            await asyncio.to_thread(wait_until, worker.rg_processes, 60)
            rgs = worker.rg_processes()
            (server,) = {rg.parent().pid for rg in rgs}
            assert server != worker.pid
            # Neither may act (the worker would kill rg through its pidfd, the server its
            # children, each on the other's death): frozen first, then killed.
            for pid in (worker.pid, server):
                os.kill(pid, signal.SIGSTOP)
            for pid in (server, worker.pid):
                os.kill(pid, signal.SIGKILL)
            worker.proc.wait(10)
            took = await asyncio.to_thread(wait_until, lambda: not alive(rgs), 10)
            assert took < 10
            await call.terminate()
    finally:
        for rg in alive(rgs):
            with contextlib.suppress(psutil.Error):
                rg.kill()
        if worker.proc.poll() is None:
            worker.kill()


async def test_the_fork_server_writes_nothing_into_the_workers_log(dev_env, tmp_path):
    """The fork server and its guard have stdout on /dev/null and stderr on a pipe of
    their own (the worker reads and logs it, escaped), never the worker's log itself; the
    guard runs in a session of its own."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("needle\n")
    wsid = f"orphan-{uuid.uuid4().hex[:8]}"
    address = dev_env.client.service_client.config.target_host
    worker = WorkerProcess(ws, address, wsid, env={"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/s"})
    try:
        me = psutil.Process(worker.pid)
        servers = [p for p in me.children() if "_fork_server.py" in " ".join(p.cmdline())]
        assert len(servers) == 1, me.children()
        server = servers[0]
        guards = [g for g in server.children() if "_fork_server.py" in " ".join(g.cmdline())]
        assert len(guards) == 1, server.children()
        worker_log = os.stat(f"/proc/{worker.pid}/fd/2")
        for pid in (server.pid, guards[0].pid):
            assert os.readlink(f"/proc/{pid}/fd/1") == "/dev/null"
            own = os.stat(f"/proc/{pid}/fd/2")
            assert (own.st_dev, own.st_ino) != (worker_log.st_dev, worker_log.st_ino)
        assert os.readlink(f"/proc/{guards[0].pid}/fd/2") == "/dev/null"
        assert os.getsid(guards[0].pid) == guards[0].pid
    finally:
        assert worker.terminate() == 0
