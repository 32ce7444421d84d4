"""A cold `fs-search`: what each command imports (a deterministic check; bench/cli_start.py
times it), and Ctrl-C from the first instruction on: exit 130, no traceback, nothing left
running."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from tests.helpers import sparse_file, write_tree
from tests.procs import FS_SEARCH, WorkerProcess, alive, wait_until
from tests.worker.cli.test_main import cli_env

# Never loaded by --version and --help: the parser answers them alone.
NOT_FOR_THE_PARSER = (
    "temporalio",
    "pydantic",
    "asyncio",
    "opentelemetry",
    "importlib.metadata",
    "fs_search.activities._contract",
    "fs_search.activities._config",
    "fs_search.workflows",
)
# Never loaded by a one-off call in address mode: the worker's parts (Temporal's worker, and
# FsSearchPlugin, which loads it), the embedded server, the stores' S3 backend, OpenTelemetry's
# SDK and Temporal interceptor (no exporter set).
NOT_FOR_A_ONE_OFF_CALL = (
    "fs_search.worker._app",
    "fs_search.worker._fleet",
    "fs_search.worker._devstack",
    "fs_search.worker.cli._embedded",
    "fs_search.worker.cli._dev",
    "fs_search.activities._search",
    "fs_search.activities.rg",
    "fs_search.activities.storage._s3",
    "temporalio.contrib.opentelemetry",
    "temporalio.plugin",
    "temporalio.worker",
    "fs_search.workflows._plugin",
    "opentelemetry.sdk",
    "numpy",
    "aioboto3",
    "botocore",
)


def imported(*args: str, env: dict[str, str] | None = None) -> tuple[set[str], str, int]:
    """The modules ``fs-search ARGS`` imports (python -X importtime), its stdout and exit code."""
    p = subprocess.run(
        [sys.executable, "-X", "importtime", FS_SEARCH, *args],
        env=cli_env(env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    modules = set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", p.stderr, re.M))
    assert modules, p.stderr[-2000:]
    return modules, p.stdout, p.returncode


def loaded(modules: set[str], roots: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == r or m.startswith(f"{r}.") for r in roots))


@pytest.mark.parametrize("option", ["--version", "--help"])
def test_version_and_help_load_neither_pydantic_nor_temporalio(option):
    """`fs-search --version` and `--help` import the parser and the standard library only."""
    modules, out, code = imported(option)
    assert code == 0 and out.startswith(("fs-search (fs-search-temporal)", "usage: fs-search"))
    assert loaded(modules, NOT_FOR_THE_PARSER) == []
    assert "fs_search.worker.cli._parser" in modules  # the check can see what loads


async def test_a_one_off_call_loads_no_worker(dev_env, tmp_path):
    """A one-off grep in address mode answers without importing the worker's parts."""
    address = dev_env.client.service_client.config.target_host
    ws = write_tree(tmp_path / "ws", {"a.py": "# TODO one\n"})
    wsid = f"cli-{uuid.uuid4()}"
    worker = WorkerProcess(ws, address, wsid, env={"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/s"})
    try:
        modules, out, code = imported(
            "grep", "TODO", "--address", address, "--workspace-id", wsid, env={}
        )
    finally:
        assert worker.terminate(timeout=20) == 0
    assert (code, out) == (0, "a.py:\n  Line 1: # TODO one\n")
    assert loaded(modules, NOT_FOR_A_ONE_OFF_CALL) == []
    assert "fs_search.worker.cli._address" in modules and "temporalio.client" in modules


def cpu_seconds(pid: int) -> float:
    """The process's own CPU time so far (user + system)."""
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def interrupt_at(argv: list[str], at: float, env: dict[str, str]) -> tuple[int, str, list]:
    """Start ``argv`` in a process group of its own and send the group SIGINT, as a terminal's
    Ctrl-C does, ``at`` seconds after the start; the exit code, stderr, and every process it
    started meanwhile.

    On a loaded machine ``at`` seconds of wall time may be no progress at all: the signal
    waits until the process has also used some CPU time (``at``, at most 0.1 s: well past
    Python's own start-up, ~0.03 s here, after which fs-search's first instruction runs).
    """
    proc = subprocess.Popen(
        argv,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    started: dict[int, psutil.Process] = {}
    begun = time.monotonic()
    try:
        me = psutil.Process(proc.pid)
        while time.monotonic() - begun < at or cpu_seconds(proc.pid) < min(at, 0.1):
            assert time.monotonic() - begun < 60, "the command made no progress in 60 s"
            for child in me.children(recursive=True):
                started.setdefault(child.pid, child)
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    return proc.returncode, err, list(started.values())


@pytest.fixture
def huge(tmp_path: Path) -> Path:
    """A workspace rg reads for a call's whole budget (a 200 GiB sparse file)."""
    ws = tmp_path / "huge-ws"
    sparse_file(ws / "huge.bin", gigabytes=200)
    return ws


@pytest.mark.parametrize("at", [0.2, 1.0, 5.0])
def test_ctrl_c_in_embedded_mode_is_exit_130_and_leaves_nothing(huge, at):
    """Ctrl-C at 0.2 s (importing), 1 s and 5 s (the embedded server starting or the search
    running): exit 130, no traceback, and nothing it started (rg, the dev server) left."""
    argv = [FS_SEARCH, "grep", "zzz", "--path", "huge.bin", "--workspace", str(huge)]
    code, err, started = interrupt_at(argv, at, cli_env())
    assert code == 130, err
    assert "Traceback" not in err, err
    wait_until(lambda: not alive(started), timeout=10)


@pytest.mark.parametrize("at", [0.2, 1.0, 5.0])
async def test_ctrl_c_in_address_mode_is_exit_130_and_leaves_nothing(dev_env, huge, at):
    """Ctrl-C at 0.2 s, 1 s and 5 s of a one-off call: exit 130, no traceback; whatever had
    started of the call (its activity, the worker's rg) stops."""
    address = dev_env.client.service_client.config.target_host
    wsid = f"cli-{uuid.uuid4()}"
    worker = WorkerProcess(huge, address, wsid, env={"FS_SEARCH_SPILL_URL": f"file://{huge}/s"})
    try:
        argv = [FS_SEARCH, "grep", "zzz", "--path", "huge.bin", "--workspace-id", wsid]
        code, err, started = interrupt_at(argv, at, cli_env({"TEMPORAL_ADDRESS": address}))
        assert code == 130, err
        assert "Traceback" not in err, err
        wait_until(lambda: not alive(started), timeout=10)
        # The call's rg, if it started, is killed with the activity (the budget is 30 s).
        wait_until(lambda: not worker.rg_processes(), timeout=15)
    finally:
        assert worker.terminate(timeout=20) == 0


async def test_the_fallback_runs_without_the_plugin_on_the_client():
    """On a server without standalone activities the one-off call's client (FsSearchPlugin's
    converter, no plugin) still runs the one-call workflow whole: a workspace no worker
    serves is SEARCH_FAILED naming it (the fallback's worker asks queue_liveness)."""
    from fs_search.worker._devstack import DevServer

    server = await DevServer(dynamic_config=["activity.enableStandalone=false"]).start()
    try:
        wsid = f"nobody-{uuid.uuid4().hex[:8]}"
        p = subprocess.run(
            [FS_SEARCH, "grep", "x", "--address", server.address, "--workspace-id", wsid],
            env=cli_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        server.stop()
    assert p.returncode == 1, p.stderr
    assert p.stdout.startswith("Error: ") and wsid in p.stdout, p.stdout
    assert "Traceback" not in p.stderr and "fs_search.Call" in p.stderr
