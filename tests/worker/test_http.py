"""The worker's HTTP server keeps off the search path: a flood of connections, slow clients
and a slow scrape leave the event loop turning and the probes answered; and the SDK's
metrics reach the scrape with bounded labels."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest
from temporalio.runtime import MetricBuffer, MetricBufferDurationFormat, Runtime, TelemetryConfig

from fs_search.worker import _http
from fs_search.worker._http import HttpAddressError, HttpServer, Routes, parse_address
from fs_search.worker._metrics import WorkerMetrics
from fs_search.worker._sdk_metrics import SdkMetrics


def _routes(render=lambda: b"# nothing\n") -> Routes:
    return Routes(
        livez=lambda: (True, {"event_loop": "ok"}),
        readyz=lambda: (False, {"temporal": "the Temporal server does not answer"}),
        metrics=render,
    )


async def _request(port: int, head: bytes, timeout: float = 5.0) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head)
        await writer.drain()
        async with asyncio.timeout(timeout):
            return await reader.read()
    finally:
        writer.close()


async def _get(port: int, path: str) -> tuple[int, bytes]:
    answer = await _request(port, f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


class _Lag:
    """The longest the event loop was late to wake a 10 ms sleep, while running."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.ticks = 0
        self._task: asyncio.Task | None = None

    async def _run(self) -> None:
        while True:
            started = time.monotonic()
            await asyncio.sleep(0.01)
            self.worst = max(self.worst, time.monotonic() - started - 0.01)
            self.ticks += 1

    def __enter__(self) -> _Lag:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()


def test_addresses_parse() -> None:
    assert parse_address("0.0.0.0:9464") == ("0.0.0.0", 9464)
    assert parse_address(":9464") == ("0.0.0.0", 9464)
    assert parse_address("[::1]:0") == ("::1", 0)
    for bad in ("9464", "host", "h:x", "h:70000"):
        with pytest.raises(HttpAddressError):
            parse_address(bad)


async def test_probes_answer_with_their_status_and_checks() -> None:
    async with HttpServer(_routes(), "127.0.0.1", 0).serving() as server:
        assert await _get(server.port, "/livez") == (
            200,
            b'{\n "alive": true,\n "checks": {\n  "event_loop": "ok"\n }\n}\n',
        )
        status, body = await _get(server.port, "/readyz?verbose")
        assert status == 503 and b"does not answer" in body
        assert (await _get(server.port, "/metrics")) == (200, b"# nothing\n")
        assert (await _get(server.port, "/other"))[0] == 404
        post = await _request(server.port, b"POST /livez HTTP/1.1\r\n\r\n")
        assert post.startswith(b"HTTP/1.1 405 ")
        assert (await _request(server.port, b"nonsense\r\n\r\n")).startswith(b"HTTP/1.1 400 ")
        head = await _request(server.port, b"HEAD /livez HTTP/1.1\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 ") and head.endswith(b"\r\n\r\n")


async def test_a_thousand_connections_leave_the_loop_turning_and_probes_answered() -> None:
    """A thousand idle connections at once: the server holds at most MAX_CONNECTIONS, each
    new one pushing out the oldest idle one, the loop is never late by much, and a probe
    made in the middle of the flood is answered."""
    async with HttpServer(_routes(), "127.0.0.1", 0).serving() as server:
        with _Lag() as lag:
            # The flood from another thread: the loop measured is the server's alone.
            opened = await asyncio.to_thread(_flood, server.port, 1000)
            await asyncio.sleep(0.2)
            assert server.connections <= _http.MAX_CONNECTIONS
            status, _ = await asyncio.wait_for(_get(server.port, "/livez"), 5)
            for sock in opened:
                sock.close()
        assert status == 200
        assert server.refused >= 1000 - _http.MAX_CONNECTIONS
        # Seconds of lag would mean the loop was held; a busy machine alone adds some.
        assert lag.ticks > 0 and lag.worst < 3, (lag.ticks, lag.worst)


def _flood(port: int, count: int) -> list[socket.socket]:
    opened = []
    for _ in range(count):
        try:
            opened.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        except OSError:
            pass
    return opened


async def test_slow_clients_are_dropped(monkeypatch) -> None:
    """A request head that never ends, and an answer never read, are dropped on their
    timeouts; the server still answers after them."""
    monkeypatch.setattr(_http, "READ_TIMEOUT_S", 0.3)
    monkeypatch.setattr(_http, "WRITE_TIMEOUT_S", 0.3)
    big = b"x" * (32 * 1024 * 1024)  # more than the sockets buffer
    async with HttpServer(_routes(lambda: big), "127.0.0.1", 0).serving() as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /livez HTTP/1.1\r\n")  # and nothing more
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /metrics HTTP/1.1\r\n\r\n")  # never read
        deadline = time.monotonic() + 10
        while server.connections and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert server.connections == 0
        writer.close()
        assert (await _get(server.port, "/livez"))[0] == 200


async def test_a_slow_scrape_is_rendered_off_the_loop_once_for_all_waiting() -> None:
    """A scrape that takes a second to render leaves the loop turning; three scrapes at once
    share one rendering."""
    renders = []

    def render() -> bytes:
        renders.append(threading.current_thread().name)
        time.sleep(1.0)
        return b"slow 1\n"

    async with HttpServer(_routes(render), "127.0.0.1", 0).serving() as server:
        with _Lag() as lag:
            answers = await asyncio.gather(*(_get(server.port, "/metrics") for _ in range(3)))
        assert answers == [(200, b"slow 1\n")] * 3
    assert len(renders) == 1 and renders[0].startswith("fs-scrape")
    # The loop turned all along the 1 s rendering (at most ~100 ticks of 10 ms).
    assert lag.ticks >= 10 and lag.worst < 3, (lag.ticks, lag.worst)


def _record(runtime: Runtime, queues: list[str]) -> None:
    """Real SDK metric updates (the runtime's own meter): a counter, a gauge and a histogram
    per queue."""
    meter = runtime.metric_meter
    counter = meter.create_counter("temporal_things", "things done")
    gauge = meter.create_gauge("temporal_pollers", "pollers")
    histogram = meter.create_histogram_float("temporal_latency", "latency", "s")
    for queue in queues:
        labelled = {"task_queue": queue, "namespace": "default"}
        counter.add(2, labelled)
        gauge.set(1, labelled)
        histogram.record(0.02, labelled)


def test_the_sdk_metrics_merge_workspace_queues_unless_per_workspace() -> None:
    """Updates from a real MetricBuffer: forty workspace queues are one fs-search/* series
    (counters and histograms added, gauges summed); the host queue keeps its own; per
    workspace, each queue is its own series."""
    queues = [f"fs-search/ws-{n:02}" for n in range(40)] + ["fs-search-host/node-1"]
    for per_workspace in (False, True):
        buffer = MetricBuffer(10_000, MetricBufferDurationFormat.SECONDS)
        runtime = Runtime(telemetry=TelemetryConfig(metrics=buffer))
        sdk = SdkMetrics(buffer, per_workspace=per_workspace)
        tee = sdk.tee()
        _record(runtime, queues)
        assert sdk.drain() == 3 * len(queues)
        scrape = WorkerMetrics(per_workspace=per_workspace, sdk=sdk).render().decode()
        merged = 'task_queue="fs-search/*"'
        if per_workspace:
            assert "ws-07" in scrape and merged not in scrape
        else:
            assert "ws-" not in scrape
            assert f'temporal_things_total{{namespace="default",{merged}}} 80.0' in scrape
            assert f'temporal_pollers{{namespace="default",{merged}}} 40.0' in scrape
            assert f'temporal_latency_seconds_count{{namespace="default",{merged}}} 40.0' in scrape
        assert (
            'temporal_things_total{namespace="default",task_queue="fs-search-host/node-1"} 2.0'
            in scrape
        )
        # The OpenTelemetry export reads the same updates through its tee.
        assert len(tee.retrieve_updates()) == 3 * len(queues)
        assert tee.retrieve_updates() == []


def test_a_detached_workspaces_gauges_stop_counting() -> None:
    buffer = MetricBuffer(10_000, MetricBufferDurationFormat.SECONDS)
    runtime = Runtime(telemetry=TelemetryConfig(metrics=buffer))
    sdk = SdkMetrics(buffer, per_workspace=False)
    _record(runtime, ["fs-search/a", "fs-search/b", "fs-search/c"])
    sdk.drain()
    attached = {"a", "c"}
    sdk.live_queue = lambda queue: queue.removeprefix("fs-search/") in attached
    scrape = WorkerMetrics(per_workspace=False, sdk=sdk).render().decode()
    assert 'temporal_pollers{namespace="default",task_queue="fs-search/*"} 2.0' in scrape
