"""Traces, metrics and Temporal UI visibility of searches, on the real dev server."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from temporalio.client import Client
from temporalio.contrib.opentelemetry import MetricsExporter
from temporalio.runtime import MetricBuffer, Runtime, TelemetryConfig
from temporalio.worker import Worker

from examples.agent import (
    AgentInput,
    ExampleAgentWorkflow,
    ToolCall,
    start_example_agent,
)
from fs_search.activities._config import FsSearchConfig
from fs_search.activities._telemetry import SearchTelemetry, pattern_digest
from fs_search.activities.storage import local_storage
from fs_search.worker import build_activities, new_worker
from fs_search.workflows import FsSearchPlugin
from tests.helpers import sparse_file, write_tree
from tests.worker.cli.test_main import cli
from tests.workflows_under_test import Calls, CallsWorkflow, Options

SECRET = "sk_live_SECRET_TOKEN"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = write_tree(tmp_path / "ws", {"a.py": f"token = '{SECRET}'\n", "b.py": "nothing here\n"})
    sparse_file(root / "huge.bin")
    return root


FOUR_CALLS = [
    ("grep", {"pattern": SECRET}),
    ("grep", {"pattern": "absent_zzz"}),
    ("grep", {"pattern": "("}),
    ("glob", {"pattern": "*.py"}),
]


async def _traced_run(
    dev_env, ws: Path, tmp_path: Path, *, trace_patterns: bool, calls=None, **settings
):
    """The four calls then an aborted one (or only ``calls``), traced and metered."""
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    buffer = MetricBuffer(10_000)
    runtime = Runtime(telemetry=TelemetryConfig(metrics=buffer))
    client = await Client.connect(
        dev_env.client.service_client.config.target_host,
        runtime=runtime,
        plugins=[
            FsSearchPlugin(
                tracer=provider.get_tracer("test"),
                spill_url=f"file://{tmp_path}/p",
                getenv=lambda _: None,
            )
        ],
    )
    wsid, queue = f"ws-{uuid.uuid4()}", f"wf-{uuid.uuid4()}"
    config = FsSearchConfig.load(
        getenv=lambda _: None,
        overrides={
            "sample_over_cap_glob_results": True,
            "trace_patterns": trace_patterns,
            **settings,
        },
    )
    telemetry = SearchTelemetry(
        tracer_provider=provider,
        meter_provider=meters,
        trace_patterns=trace_patterns,
        workspace_id=wsid,
    )
    acts = await build_activities(
        config, ws, storage=local_storage(tmp_path / "spill"), telemetry=telemetry
    )
    async with MetricsExporter(buffer, meters):
        async with (
            new_worker(client, acts, workspace_id=wsid),
            Worker(client, task_queue=queue, workflows=[CallsWorkflow]),
        ):
            results = await client.execute_workflow(
                CallsWorkflow.run,
                Calls(options=Options(workspace_id=wsid), calls=calls or FOUR_CALLS),
                id=f"wf-{uuid.uuid4()}",
                task_queue=queue,
            )
            aborted = (
                []
                if calls
                else await client.execute_workflow(
                    CallsWorkflow.run,
                    Calls(
                        options=Options(workspace_id=wsid, timeout_ms=300),
                        calls=[("grep", {"pattern": "x", "path": "huge.bin"})],
                    ),
                    id=f"wf-{uuid.uuid4()}",
                    task_queue=queue,
                )
            )
        await asyncio.sleep(1.5)  # one more drain of Temporal's metric buffer
    return results + aborted, spans.get_finished_spans(), reader.get_metrics_data(), wsid


async def test_one_trace_from_workflow_to_rg_with_attributes(dev_env, ws, tmp_path):
    """Caller workflow -> activity -> fs_search.rg is one trace, with attributes and error codes."""
    results, spans, _, wsid = await _traced_run(dev_env, ws, tmp_path, trace_patterns=False)
    assert [r.error.code if r.error else "ok" for r in results] == [
        "ok",
        "ok",
        "SEARCH_INVALID_PATTERN",
        "ok",
        "SEARCH_ABORTED",
    ]
    by_id = {s.context.span_id: s for s in spans}

    def ancestors(span):
        names = []
        while span.parent is not None and span.parent.span_id in by_id:
            span = by_id[span.parent.span_id]
            names.append(span.name)
        return names

    rg_spans = [s for s in spans if s.name == "fs_search.rg"]
    assert len(rg_spans) == 5
    for rg in rg_spans:
        chain = ancestors(rg)
        assert chain[0].startswith("RunActivity:fs_search.")
        assert "StartActivity:fs_search.grep" in chain or "StartActivity:fs_search.glob" in chain
        assert chain[-1].startswith("StartWorkflow:CallsWorkflow")
        # The legacy interceptor's workflow spans are zero-length siblings in the same trace.
        assert any(
            s.name == "RunWorkflow:CallsWorkflow" and s.context.trace_id == rg.context.trace_id
            for s in spans
        )
        assert rg.attributes["fs_search.workspace_id"] == wsid
        assert rg.attributes["fs_search.tool"] in ("grep", "glob")
    first_trace = {s.context.trace_id for s in rg_spans[:4]}
    assert len(first_trace) == 1  # the first workflow's four calls share one trace

    found, empty, invalid, glob, aborted = rg_spans
    assert (
        found.attributes["fs_search.exit_code"] == 0 and found.attributes["fs_search.raw_bytes"] > 0
    )
    assert found.attributes["fs_search.outcome"] == "ok"
    assert (
        empty.attributes["fs_search.exit_code"] == 1
        and empty.attributes["fs_search.outcome"] == "ok"
    )
    # The model's own pattern: recorded, but no error (a benign code).
    assert invalid.status.status_code == StatusCode.UNSET
    assert invalid.attributes["fs_search.outcome"] == "SEARCH_INVALID_PATTERN"
    assert aborted.attributes["fs_search.outcome"] == "SEARCH_ABORTED"
    assert aborted.status.status_code == StatusCode.ERROR
    run_spans = [s for s in spans if s.name == "RunActivity:fs_search.grep"]
    assert {s.attributes.get("fs_search.error_code") for s in run_spans} >= {
        "SEARCH_INVALID_PATTERN",
        "SEARCH_ABORTED",
    }
    names = {s.name for s in spans}
    assert {"fs_search.parse", "fs_search.render"} <= names
    # No pattern text anywhere; a hash instead.
    for span in spans:
        assert SECRET not in json.dumps(dict(span.attributes or {}), default=str)
    assert run_spans[0].attributes["fs_search.pattern.sha256"] == pattern_digest(SECRET)


async def test_errors_the_models_input_causes_mark_no_span_log_no_warning_count_no_failure(
    dev_env, ws, tmp_path, caplog
):
    """INVALID_ARGUMENT, SEARCH_INVALID_PATTERN and SEARCH_RAW_OUTPUT_OVERFLOW (BENIGN): the
    activity span carries the code but no error status, Temporal logs them below WARNING and
    counts no failed execution; a SEARCH_FAILED call is an error on all three."""
    calls = [
        ("grep", {"pattern": "x", "path": "../.."}),
        ("grep", {"pattern": "("}),
        ("grep", {"pattern": "o", "path": "b.py"}),
        ("grep", {"pattern": "x", "path": "missing.txt"}),
    ]
    caplog.set_level(logging.DEBUG, logger="temporalio.activity")
    results, spans, data, _ = await _traced_run(
        dev_env, ws, tmp_path, trace_patterns=False, calls=calls, raw_output_max_bytes=64
    )
    codes = ["INVALID_ARGUMENT", "SEARCH_INVALID_PATTERN", "SEARCH_RAW_OUTPUT_OVERFLOW"]
    assert [r.error.code for r in results] == [*codes, "SEARCH_FAILED"], [r.text for r in results]
    runs = {
        s.attributes["fs_search.error_code"]: s
        for s in spans
        if s.name == "RunActivity:fs_search.grep"
    }
    assert set(runs) == {*codes, "SEARCH_FAILED"}
    for code in codes:
        assert runs[code].status.status_code == StatusCode.UNSET, code
    assert runs["SEARCH_FAILED"].status.status_code == StatusCode.ERROR
    failed = [
        r for r in caplog.records if r.getMessage().startswith("Completing activity as failed")
    ]
    by_level = sorted((r.levelname, r.exc_info[1].type) for r in failed if r.exc_info)
    assert by_level == [("DEBUG", code) for code in sorted(codes)] + [("WARNING", "SEARCH_FAILED")]
    metrics = {
        m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
    }
    executions_failed = metrics["temporal_activity_execution_failed"].data.data_points
    assert sum(p.value for p in executions_failed) == 1


async def test_pattern_text_only_when_enabled(dev_env, ws, tmp_path):
    """FS_SEARCH_TRACE_PATTERNS=true puts the pattern text on the activity span."""
    _, spans, _, _ = await _traced_run(dev_env, ws, tmp_path, trace_patterns=True)
    run = next(s for s in spans if s.name == "RunActivity:fs_search.grep")
    assert run.attributes["fs_search.pattern"] == SECRET


async def test_metrics_count_calls_by_tool_and_outcome(dev_env, ws, tmp_path):
    """fs_search.calls counts by tool and outcome; duration and raw_bytes are recorded;
    Temporal's own worker metrics flow into the same provider."""
    _, _, data, _ = await _traced_run(dev_env, ws, tmp_path, trace_patterns=False)
    metrics = {
        m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
    }
    calls = {
        (p.attributes["fs_search.tool"], p.attributes["fs_search.outcome"]): p.value
        for p in metrics["fs_search.calls"].data.data_points
    }
    assert calls == {
        ("grep", "ok"): 2,
        ("grep", "SEARCH_INVALID_PATTERN"): 1,
        ("glob", "ok"): 1,
        ("grep", "SEARCH_ABORTED"): 1,
    }
    assert sum(p.count for p in metrics["fs_search.duration"].data.data_points) == 5
    assert metrics["fs_search.duration"].unit == "ms"
    assert sum(p.count for p in metrics["fs_search.raw_bytes"].data.data_points) == 5
    assert any(name.startswith("temporal_") for name in metrics), sorted(metrics)


def test_console_exporter_prints_spans_from_the_cli(ws, tmp_path):
    """OTEL_TRACES_EXPORTER=console makes the CLI print its spans (to stderr, stdout stays the result)."""
    p = cli(
        "grep",
        "nothing",
        "--workspace",
        str(ws),
        env={"OTEL_TRACES_EXPORTER": "console", "FS_SEARCH_SPILL_URL": f"file://{tmp_path}/s"},
    )
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout == "b.py:\n  Line 1: nothing here\n"
    assert (
        '"name": "fs_search.rg"' in p.stderr and '"name": "RunActivity:fs_search.grep"' in p.stderr
    )
    assert '"service.name": "fs-search"' in p.stderr


def test_bad_exporter_name_is_a_usage_error(ws):
    """An unknown OTEL_TRACES_EXPORTER is refused clearly."""
    p = cli("grep", "x", "--workspace", str(ws), env={"OTEL_TRACES_EXPORTER": "zipkin"})
    assert p.returncode == 2 and "OTEL_TRACES_EXPORTER" in p.stderr


async def test_ui_shows_summaries_and_live_heartbeat_details(dev_env, make_activities, ws):
    """The Temporal API shows the activity summary and heartbeat progress of a running search."""
    acts = await make_activities(ws)
    wsid, queue = f"ws-{uuid.uuid4()}", f"wf-{uuid.uuid4()}"
    async with (
        new_worker(dev_env.client, acts, workspace_id=wsid),
        Worker(dev_env.client, task_queue=queue, workflows=[ExampleAgentWorkflow]),
    ):
        handle = await start_example_agent(
            dev_env.client,
            AgentInput(
                workspace_id=wsid,
                calls=[ToolCall(name="grep", arguments={"pattern": "needle", "path": "huge.bin"})],
            ),
            id=f"agent-{uuid.uuid4()}",
            task_queue=queue,
        )
        details = None
        for _ in range(100):
            await asyncio.sleep(0.1)
            desc = await handle.describe()
            pending = desc.raw_description.pending_activities
            if pending and pending[0].heartbeat_details.payloads:
                details = json.loads(pending[0].heartbeat_details.payloads[0].data)
                if details["elapsed_ms"] > 300:
                    break
        assert details is not None and details["phase"] == "rg"
        assert set(details) == {"phase", "raw_bytes", "elapsed_ms", "rg_ms", "budget_ms"}
        assert details["budget_ms"] == 30_000 and 0 < details["rg_ms"] <= details["elapsed_ms"]
        assert await desc.static_summary() == f"example agent: 1 tool calls on workspace {wsid}"
        await handle.cancel()
    history = await handle.fetch_history()
    summaries = [
        json.loads(e.user_metadata.summary.data)
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert summaries == ["fs_search tools", 'grep "needle" in huge.bin']


def test_otlp_export_over_http_from_the_cli(ws, tmp_path):
    """OTEL_*_EXPORTER=otlp sends spans and metrics with the official exporter to the endpoint."""
    import http.server
    import threading

    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
        ExportMetricsServiceRequest,
    )
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    received: dict[str, list[bytes]] = {}

    class Collector(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's naming
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.setdefault(self.path, []).append(body)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        p = cli(
            "grep",
            "nothing",
            "--workspace",
            str(ws),
            env={
                "OTEL_TRACES_EXPORTER": "otlp",
                "OTEL_METRICS_EXPORTER": "otlp",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}",
                "OTEL_SERVICE_NAME": "fs-search-otlp-test",
                "FS_SEARCH_SPILL_URL": f"file://{tmp_path}/s",
            },
        )
    finally:
        server.shutdown()
    assert p.returncode == 0, p.stderr[-2000:]
    spans = []
    for body in received.get("/v1/traces", []):
        request = ExportTraceServiceRequest.FromString(body)
        for rs in request.resource_spans:
            service = {a.key: a.value.string_value for a in rs.resource.attributes}["service.name"]
            spans += [(service, s.name) for ss in rs.scope_spans for s in ss.spans]
    assert ("fs-search-otlp-test", "fs_search.rg") in spans
    names = set()
    for body in received.get("/v1/metrics", []):
        request = ExportMetricsServiceRequest.FromString(body)
        names |= {
            m.name for rm in request.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
        }
    assert {"fs_search.calls", "fs_search.duration", "fs_search.raw_bytes"} <= names
