"""`fs-search dev`: the whole local stack in one command, stopped cleanly by Ctrl-C."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path

import psutil
import pytest

from tests.helpers import write_tree
from tests.worker.cli.test_main import FS_SEARCH, cli


def _listeners(*addresses: str) -> set[int]:
    """The processes listening on ``addresses`` (host:port) now."""
    ports = {int(a.rsplit(":", 1)[1]) for a in addresses}
    return {
        c.pid
        for c in psutil.net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port in ports and c.pid
    }


def _all_gone(pids: set[int], timeout: float = 10) -> bool:
    """Whether every one of ``pids`` has exited (a zombie counts as gone), within ``timeout``.

    A port is no proof: another process (a second copy of this suite) may take it the moment
    the stack lets it go."""
    deadline = time.monotonic() + timeout
    while True:
        alive = set()
        for pid in pids:
            with contextlib.suppress(psutil.NoSuchProcess):
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.add(pid)
        if not alive or time.monotonic() > deadline:
            return not alive
        time.sleep(0.1)


def test_dev_stack_serves_searches_with_s3_spills_and_stops_on_ctrl_c(tmp_path: Path):
    """dev prints the UI and caller env; a CLI call through it spills to S3; Ctrl-C stops all."""
    ws = write_tree(tmp_path / "ws", {"many.txt": "".join(f"hit {i}\n" for i in range(300))})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FS_SEARCH_", "AWS_", "OTEL_"))}
    proc = subprocess.Popen(
        [
            FS_SEARCH,
            "dev",
            "--workspace",
            str(ws),
            "--workspace-id",
            "dev-test",
            "--data-dir",
            str(tmp_path / "s3"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        banner = []
        deadline = time.monotonic() + 90
        for line in proc.stdout:
            banner.append(line)
            if line.startswith("Try:") or time.monotonic() > deadline:
                break
        text = "".join(banner)
        exports = dict(re.findall(r"^export (\w+)=(.*)$", text, re.M))
        ui = re.search(r"Temporal UI:\s+(\S+)", text).group(1)
        assert "task queue fs-search/dev-test" in text
        assert set(exports) >= {
            "TEMPORAL_ADDRESS",
            "FS_SEARCH_SPILL_URL",
            "FS_SEARCH_S3_ENDPOINT_URL",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_REGION",
        }
        with urllib.request.urlopen(ui, timeout=10) as response:
            assert response.status == 200
        # The worker's probes and metrics, at a free loopback port the banner prints.
        http = re.search(r"Worker HTTP:\s+(http://127\.0\.0\.1:\d+)/livez", text).group(1)
        with urllib.request.urlopen(http + "/livez", timeout=10) as response:
            assert response.status == 200
        with urllib.request.urlopen(http + "/metrics", timeout=10) as response:
            assert b"fs_search_workspaces_attached 1.0" in response.read()

        p = cli(
            "grep",
            "hit",
            "--address",
            exports["TEMPORAL_ADDRESS"],
            "--workspace-id",
            "dev-test",
            env=exports,
        )
        assert p.returncode == 0, p.stderr
        locator = re.search(r"(s3://fs-search/spill/\S+)", p.stdout).group(1)
        assert f"Read it with `fs-search spill read {locator}`" in p.stdout
        page = cli("spill", "read", locator, "--offset", "295", env=exports)
        assert page.returncode == 0, page.stderr
        assert "Line 300: hit 299" in page.stdout

        # Callbacks are on and the endpoint fs-search reaches the worker's Nexus handler.
        assert "Nexus:        endpoint fs-search -> namespace default" in text
        nexus = asyncio.run(_grep_through_the_endpoint(exports["TEMPORAL_ADDRESS"], "dev-test"))
        assert nexus.startswith("many.txt:\n  Line 1: hit 0"), nexus
        servers = _listeners(
            exports["TEMPORAL_ADDRESS"],
            exports["FS_SEARCH_S3_ENDPOINT_URL"].removeprefix("http://"),
        )
        assert len(servers) >= 2, servers  # the Temporal server and the S3 server
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
    assert code == 0
    assert _all_gone(servers)


async def _grep_through_the_endpoint(address: str, workspace_id: str) -> str:
    """A workflow calling grep through the endpoint fs-search: the text it read."""
    from temporalio.client import Client
    from temporalio.worker import Worker

    from fs_search.workflows import FsSearchPlugin
    from tests.workflows_under_test import Calls, CallsWorkflow, Options

    client = await Client.connect(
        address, plugins=[FsSearchPlugin(external_storage=False, getenv=lambda _: None)]
    )
    queue = f"wf-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[CallsWorkflow]):
        (result,) = await client.execute_workflow(
            CallsWorkflow.run,
            Calls(
                options=Options(workspace_id=workspace_id, endpoint="fs-search"),
                calls=[("grep", {"pattern": "hit"})],
            ),
            id=f"wf-{uuid.uuid4()}",
            task_queue=queue,
        )
    return result.text


def test_usual_port_when_free_else_a_free_one_said_so():
    """A port asked for must be free; the usual one is used when free, else a free one."""
    from fs_search.worker._processes import PortTaken, free_port, usual_port

    usual = free_port()
    assert usual_port(None, usual, option="--port") == (usual, None)
    with socket.socket() as held:
        held.bind(("127.0.0.1", usual))
        held.listen(1)
        port, note = usual_port(None, usual, option="--port")
        assert port != usual and note == (
            f"port {usual} is in use, so --port is {port} (give --port to choose)"
        )
        with pytest.raises(PortTaken, match=f"--port {usual}: the port is in use"):
            usual_port(usual, 7233, option="--port")


def test_dev_refuses_a_port_in_use_in_one_line(tmp_path: Path):
    """`dev --port P` with P taken exits 2 naming the option, before starting anything."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        p = cli("dev", "--workspace", str(tmp_path), "--port", str(port), timeout=60)
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines() == [f"fs-search: --port {port}: the port is in use"]


@contextlib.contextmanager
def holding(port: int, wait_s: float = 120.0):
    """Hold ``port`` on loopback for the block. Taken by someone else, it is asked for again
    until ``wait_s`` has passed (a second copy of the suite runs dev on it for a while, and
    would free it mid-test); still taken then, its holder is taken to keep it."""
    with socket.socket() as s:
        # As servers bind: a connection of an earlier test in TIME_WAIT does not hold it.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                s.bind(("127.0.0.1", port))
                s.listen(1)
                break
            except OSError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.2)
        yield


def test_dev_moves_off_a_taken_7233_and_writes_an_env_file_the_cli_reads(tmp_path: Path):
    """With 7233 taken, dev says so and takes a free port; --env-file holds what callers need."""
    ws = write_tree(tmp_path / "ws", {"a.txt": "TODO here\n"})
    env_file = tmp_path / "conf" / "dev.env"
    env_file.parent.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FS_SEARCH_", "AWS_", "OTEL_"))}
    err = tmp_path / "dev.err"
    with holding(7233), open(err, "w") as err_out:
        proc = subprocess.Popen(
            [FS_SEARCH, "dev", "--workspace", str(ws), "--workspace-id", "dev-env-file"]
            + ["--data-dir", str(tmp_path / "s3"), "--env-file", str(env_file)],
            stdout=subprocess.PIPE,
            stderr=err_out,
            text=True,
            env=env,
            start_new_session=True,
        )
        try:
            assert proc.stdout is not None
            banner = []
            for line in proc.stdout:
                banner.append(line)
                if line.startswith("Try:"):
                    break
            text = "".join(banner)
            exports = dict(re.findall(r"^export (\w+)=(.*)$", text, re.M))
            assert not exports["TEMPORAL_ADDRESS"].endswith(":7233"), text
            port = exports["TEMPORAL_ADDRESS"].rsplit(":", 1)[1]
            said = err.read_text()
            # The port it names first, or (taken again while the server started: another
            # process on the machine got it first) the one it says it moved on to.
            assert "fs-search dev: port 7233 is in use, so --port is" in said, said
            assert f"so --port is {port} " in said or f"; Temporal is on {port} " in said, said
            written = dict(
                line.split("=", 1)
                for line in env_file.read_text().splitlines()
                if line and not line.startswith("#")
            )
            assert written == exports
            assert env_file.stat().st_mode & 0o077 == 0  # it holds credentials
            assert f"Try:  fs-search --env-file {env_file} grep TODO" in text
            p = cli("--env-file", str(env_file), "grep", "TODO", "--workspace-id", "dev-env-file")
            assert (p.returncode, p.stdout) == (0, "a.txt:\n  Line 1: TODO here\n"), p.stderr
            servers = _listeners(exports["TEMPORAL_ADDRESS"])
            assert servers
        finally:
            proc.send_signal(signal.SIGINT)
            code = proc.wait(timeout=60)
    assert code == 0, err.read_text()
    assert _all_gone(servers)


def test_dev_serves_every_workspace_under_a_root_on_a_host_queue(tmp_path: Path):
    """`dev --workspaces-root R --queues host` runs the fleet worker: one process serves each
    directory under R through the host queue, as `fs-search worker --workspaces-root` does."""
    root = tmp_path / "root"
    write_tree(root / "alpha", {"a.txt": "needle in alpha\n"})
    write_tree(root / "beta", {"b.txt": "needle in beta\n"})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FS_SEARCH_", "AWS_", "OTEL_"))}
    proc = subprocess.Popen(
        [FS_SEARCH, "dev", "--workspaces-root", str(root), "--queues", "host", "--host-id", "h1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        banner = []
        deadline = time.monotonic() + 90
        for line in proc.stdout:
            banner.append(line)
            if line.startswith("Try:") or time.monotonic() > deadline:
                break
        text = "".join(banner)
        address = re.search(r"^export TEMPORAL_ADDRESS=(\S+)$", text, re.M).group(1)
        assert f"every directory under {root.resolve()}" in text
        assert "the host queue fs-search-host/h1 for all (host id h1)" in text
        assert (
            f"Try:  fs-search grep TODO --workspace-id <a directory's name> --host h1 --address {address}"
            in text
        )
        for name in ("alpha", "beta"):
            p = cli("grep", "needle", "--address", address, "--workspace-id", name, "--host", "h1")
            assert (p.returncode, p.stdout) == (
                0,
                f"{name[0]}.txt:\n  Line 1: needle in {name}\n",
            ), p.stderr
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
    assert code == 0


def test_dev_options_of_a_root_go_with_it(tmp_path: Path):
    """--workspaces-root and --workspace are exclusive; --queues host needs a root."""
    p = cli("dev", "--workspaces-root", str(tmp_path), "--workspace", str(tmp_path), timeout=60)
    assert p.returncode == 2 and "not allowed with argument" in p.stderr
    assert p.stderr.startswith("usage: fs-search dev ")
    p = cli("dev", "--workspace", str(tmp_path), "--queues", "host", timeout=60)
    assert (p.returncode, p.stderr.strip()) == (
        2,
        "fs-search: --queues host|both goes with --workspaces-root (a host queue serves many)",
    )
