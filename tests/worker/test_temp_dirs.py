"""Nothing left behind: the real `fs-search` processes (a one-off call, a worker for one
workspace or a workspaces root, the `dev` stack) leave their TMPDIR empty on exit, whether they
finish by themselves, get SIGTERM or Ctrl-C (SIGINT)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from temporalio.worker import Worker

from fs_search.worker._devstack import DevServer
from tests.helpers import write_tree
from tests.procs import FS_SEARCH, WorkerProcess
from tests.worker.cli.test_main import cli
from tests.workflows_under_test import Calls, CallsWorkflow, Options

SIGNALS = [signal.SIGTERM, signal.SIGINT]
# A pattern rg rejects: confirming it is what makes a worker create its empty directory.
CALLS = [("grep", {"pattern": "("}), ("grep", {"pattern": "needle"})]


def _tmpdir(tmp_path: Path) -> Path:
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    return tmp


def assert_left_empty(tmp: Path, timeout: float = 30.0) -> None:
    """``tmp`` is empty, or becomes so within ``timeout`` (children may still be exiting)."""
    deadline = time.monotonic() + timeout
    while (left := sorted(p.name for p in tmp.iterdir())) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, left


def test_a_one_off_call_leaves_no_temp_dir(tmp_path):
    """`fs-search grep` with its embedded dev server and worker, ending by itself."""
    tmp = _tmpdir(tmp_path)
    ws = write_tree(tmp_path / "ws", {"a.txt": "needle\n"})
    env = {"TMPDIR": str(tmp), "FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill"}
    p = cli("grep", "(", "--workspace", str(ws), env=env)
    assert p.returncode == 1 and "invalid pattern" in p.stdout, p.stdout + p.stderr[-2000:]
    assert_left_empty(tmp)


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
@pytest.mark.parametrize("fleet", [False, True], ids=["workspace", "workspaces-root"])
async def test_a_worker_stopped_by_a_signal_leaves_no_temp_dir(dev_env, tmp_path, sig, fleet):
    tmp = _tmpdir(tmp_path)
    wsid = f"tmp-{uuid.uuid4().hex[:8]}"
    root = tmp_path / "root"
    ws = write_tree(root / wsid, {"a.txt": "needle\n"})
    env = {"TMPDIR": str(tmp), "FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill"}
    address = dev_env.client.service_client.config.target_host
    worker = WorkerProcess(root if fleet else ws, address, None if fleet else wsid, env=env)
    queue = f"wf-{uuid.uuid4()}"
    try:
        async with Worker(dev_env.client, task_queue=queue, workflows=[CallsWorkflow]):
            invalid, found = await dev_env.client.execute_workflow(
                CallsWorkflow.run,
                Calls(options=Options(workspace_id=wsid), calls=CALLS),
                id=f"tmp-{uuid.uuid4()}",
                task_queue=queue,
            )
        assert invalid.error.code == "SEARCH_INVALID_PATTERN", invalid.text
        assert found.result.total == 1, found.text
        worker.proc.send_signal(sig)
        assert worker.proc.wait(60) == 0, worker.log()[-3000:]
    finally:
        if worker.proc.poll() is None:
            worker.kill()
    assert_left_empty(tmp)


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
def test_the_dev_stack_stopped_by_a_signal_leaves_no_temp_dir(tmp_path, sig):
    """`fs-search dev` without --data-dir: its S3 data, logs and the worker's directories."""
    tmp = _tmpdir(tmp_path)
    ws = write_tree(tmp_path / "ws", {"a.txt": "needle\n"})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FS_SEARCH_", "AWS_", "OTEL_"))}
    env["TMPDIR"] = str(tmp)
    proc = subprocess.Popen(
        [FS_SEARCH, "dev", "--workspace", str(ws), "--workspace-id", f"tmp-{uuid.uuid4().hex[:8]}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        banner = []
        for line in proc.stdout:  # ends at "Try:", or at EOF if dev failed
            banner.append(line)
            if line.startswith("Try:"):
                break
        text = "".join(banner)
        exports = dict(re.findall(r"^export (\w+)=(.*)$", text, re.M))
        workspace_id = re.search(r"Workspace id: (\S+)", text).group(1)
        p = cli(
            "grep",
            "(",
            "--address",
            exports["TEMPORAL_ADDRESS"],
            "--workspace-id",
            workspace_id,
            env=exports,
        )
        assert p.returncode == 1 and "invalid pattern" in p.stdout, p.stdout + p.stderr[-2000:]
        proc.send_signal(sig)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert_left_empty(tmp)


async def test_a_dev_server_that_fails_to_start_leaves_no_temp_log(tmp_path, monkeypatch):
    """A dev server that never became healthy (here its port is taken: two `fs-search dev`
    on one machine) removes the temporary log it made, after quoting it in the error."""
    tmp = _tmpdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))  # bound, not listening: the server cannot bind it
        with pytest.raises(RuntimeError):
            await DevServer(port=taken.getsockname()[1]).start(timeout=10)
    assert_left_empty(tmp, timeout=0)
