"""fs-search as a Nexus service: workflows in another namespace call it through an endpoint.

A real dev server with two namespaces (``fs-search``: the search workers and the handler;
``agents``: the callers, with no fs-search worker and no spill store) and
``activity.enableCallbacks=true``; the real handler, worker and rg.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.worker import Worker

from fs_search.activities._contract import ErrorCode, GrepResult, ReadSpillResult, ToolResult
from fs_search.worker import create_endpoint, serving_service
from fs_search.worker.testing import search_worker
from fs_search.workflows import FsSearchPlugin
from tests.helpers import sparse_file, write_tree
from tests.procs import WorkerProcess, alive, wait_until
from tests.workflows_under_test import (
    Calls,
    CallsWorkflow,
    CancelOneCallWorkflow,
    CatalogueWorkflow,
    ConcurrentCallsWorkflow,
    Options,
)

WORKFLOWS = [CallsWorkflow, CatalogueWorkflow, CancelOneCallWorkflow, ConcurrentCallsWorkflow]
TREE = {
    "src/a.py": "import os\n# TODO one\n",
    "src/b.py": "# TODO two\n",
    "notes.md": "todo, lower case\n",
}
# Results, and every contract code the two routes must agree on.
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("grep", {"pattern": "TODO"}),
    ("grep", {"pattern": "TODO", "path": "src", "include": "a.py"}),
    ("glob", {"pattern": "**/*.py"}),
    ("grep", {"pattern": "absent_zzz"}),
    ("grep", {"pattern": "("}),
    ("grep", {"pattern": "x", "path": "missing"}),
    ("glob", {"pattern": "*", "path": "/etc"}),
    ("grep", {"pattern": "   "}),
]
CODES = [
    "ok",
    "ok",
    "ok",
    "ok",
    "SEARCH_INVALID_PATTERN",
    "SEARCH_FAILED",
    "INVALID_ARGUMENT",
    "INVALID_ARGUMENT",
]


def _codes(results: list[ToolResult]) -> list[str]:
    return [r.error.code.value if r.error else "ok" for r in results]


async def _run(client: Client, workflow: Any, arg: Any) -> Any:
    """Run ``workflow`` with ``arg`` on a worker of ``client``'s namespace; its result."""
    queue = f"wf-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=WORKFLOWS):
        return await client.execute_workflow(
            workflow.run, arg, id=f"wf-{uuid.uuid4()}", task_queue=queue
        )


async def test_results_equal_the_activity_route(service, tmp_path: Path):
    """Through the endpoint from the callers' namespace: the same ToolResults, codes and
    catalogue as the activity route in the search namespace, and no activity scheduled in
    the callers' namespace (only Nexus operations)."""
    ws = write_tree(tmp_path / "ws", TREE)
    wsid = f"ws-{uuid.uuid4()}"
    direct_options = Options(workspace_id=wsid)
    nexus_options = Options(workspace_id=wsid, endpoint=service.endpoint)
    async with search_worker(service.search, ws, workspace_id=wsid):
        direct = await _run(
            service.search, CallsWorkflow, Calls(options=direct_options, calls=CALLS)
        )
        queue = f"wf-{uuid.uuid4()}"
        async with Worker(service.caller, task_queue=queue, workflows=WORKFLOWS):
            handle = await service.caller.start_workflow(
                CallsWorkflow.run,
                Calls(options=nexus_options, calls=CALLS),
                id=f"wf-{uuid.uuid4()}",
                task_queue=queue,
            )
            through = await handle.result()
            events = [e.event_type async for e in handle.fetch_history_events()]
        catalogue = await _run(service.search, CatalogueWorkflow, direct_options)
        nexus_catalogue = await _run(service.caller, CatalogueWorkflow, nexus_options)
        # The operations' activities, as the search namespace's UI lists them.
        backing = [
            await service.search.get_activity_handle(
                a.activity_id, run_id=a.activity_run_id
            ).describe()
            async for a in service.search.list_activities(f"TaskQueue = 'fs-search/{wsid}'")
        ]
    assert _codes(direct) == CODES
    assert [r.model_dump() for r in through] == [r.model_dump() for r in direct]
    assert through[0].text == "src/a.py:\n  Line 2: # TODO one\n\nsrc/b.py:\n  Line 1: # TODO two"
    assert nexus_catalogue == catalogue and catalogue.available
    assert catalogue.workspace_id == wsid
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED not in events
    # One operation per scheduled call (the blank pattern never left the workflow).
    scheduled = events.count(EventType.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED)
    assert scheduled == len(CALLS) - 1
    # Each a standalone activity carrying its operation's callback, with the UI's summary.
    assert len(backing) == scheduled + 1  # and the catalogue's
    summaries = sorted(json.loads(d.raw_info.user_metadata.summary.data) for d in backing)
    assert 'grep "TODO"' in summaries and 'grep "TODO" in src (a.py)' in summaries
    assert "fs_search tools" in summaries
    assert all(d.raw_callbacks for d in backing)


async def test_a_spill_is_read_back_through_the_endpoint(service, tmp_path: Path):
    """An over-cap grep's spill is paged with read_spill through the endpoint: the callers'
    namespace never touches the spill store."""
    ws = write_tree(tmp_path / "ws", {"many.txt": "".join(f"hit {i}\n" for i in range(40))})
    wsid = f"ws-{uuid.uuid4()}"
    options = Options(workspace_id=wsid, endpoint=service.endpoint)
    async with search_worker(service.search, ws, workspace_id=wsid, grep_max_matches=10):
        (grep,) = await _run(
            service.caller,
            CallsWorkflow,
            Calls(options=options, calls=[("grep", {"pattern": "hit"})]),
        )
        assert isinstance(grep.result, GrepResult) and grep.result.spill is not None, grep.text
        locator = grep.result.spill.locator
        (page,) = await _run(
            service.caller,
            CallsWorkflow,
            Calls(
                options=options,
                calls=[("read_spill", {"locator": locator, "offset": 30, "limit": 5})],
            ),
        )
        (outside,) = await _run(
            service.caller,
            CallsWorkflow,
            Calls(options=options, calls=[("read_spill", {"locator": "/etc/passwd"})]),
        )
    assert grep.result.total == 40 and len(grep.result.matches) == 10
    assert not page.is_error, page.text
    assert isinstance(page.result, ReadSpillResult)
    assert page.result.offset == 30 and page.result.next_offset == 35
    assert "hit" in page.result.text and page.result.text.count("\n") >= 4
    assert outside.error is not None and outside.error.code == ErrorCode.INVALID_ARGUMENT
    assert "root:" not in outside.text


async def test_an_unknown_workspace_is_named_within_10_s(service):
    """No worker serves the workspace: SEARCH_FAILED naming it, decided by the handler (the
    callers' namespace cannot see the search namespace's queues) within ~10 s; the
    catalogue carries the same error."""
    wsid = f"nobody-{uuid.uuid4().hex[:8]}"
    options = Options(workspace_id=wsid, endpoint=service.endpoint)
    started = time.monotonic()
    (result,) = await _run(
        service.caller, CallsWorkflow, Calls(options=options, calls=[("grep", {"pattern": "x"})])
    )
    took = time.monotonic() - started
    assert result.error is not None and result.error.code == ErrorCode.SEARCH_FAILED
    assert f"no fs-search worker is serving workspace {wsid!r}" in result.text
    assert f"fs-search/{wsid}" in result.text
    assert took < 10 + 5, took  # 8 s schedule-to-start, one check (margin: a busy machine)
    catalogue = await _run(service.caller, CatalogueWorkflow, options)
    assert catalogue.available is False and catalogue.error is not None
    assert catalogue.error.code == ErrorCode.SEARCH_FAILED and wsid in (catalogue.reason or "")


@pytest.mark.parametrize(
    ("workspace_id", "host"),
    [("../etc", None), ("a/b", None), ("ws", "h/../x"), ("ws", "has space"), ("-dash", None)],
)
async def test_ids_outside_the_syntax_are_refused_by_the_handler(service, workspace_id, host):
    """A workspace or host id outside the id syntax names no fs-search queue: the handler
    refuses it at once (INVALID_ARGUMENT), starting nothing."""
    options = Options(workspace_id=workspace_id, host=host, endpoint=service.endpoint)
    started = time.monotonic()
    (result,) = await _run(
        service.caller, CallsWorkflow, Calls(options=options, calls=[("grep", {"pattern": "x"})])
    )
    assert result.error is not None and result.error.code == ErrorCode.INVALID_ARGUMENT
    assert "is not a valid id" in result.text
    assert time.monotonic() - started < 5


async def test_queued_is_not_missing_through_the_endpoint(service, tmp_path: Path):
    """A call waiting behind a busy worker past its schedule-to-start is checked by the
    handler, finds the worker polling, and runs: never "no fs-search worker"."""
    ws = tmp_path / "ws"
    for name in ("a", "b", "c"):
        sparse_file(ws / f"{name}.bin", gigabytes=50)
    wsid = f"ws-{uuid.uuid4()}"
    options = Options(
        workspace_id=wsid, endpoint=service.endpoint, timeout_ms=2000, schedule_to_start_ms=1000
    )
    calls = [("grep", {"pattern": "zzz", "path": f"{n}.bin"}) for n in ("a", "b", "c")]
    async with search_worker(
        service.search, ws, workspace_id=wsid, max_concurrent_searches=1, max_queued_searches=1
    ):
        results = await _run(
            service.caller, ConcurrentCallsWorkflow, Calls(options=options, calls=calls)
        )
    assert _codes(results) == ["SEARCH_ABORTED"] * 3, [r.text for r in results]
    assert not any("no fs-search worker" in r.text for r in results)


async def _endpoint_for(service) -> tuple[str, str]:
    """A private endpoint and its handler queue (served by the worker a test starts)."""
    name, queue = f"proc-{uuid.uuid4().hex[:12]}", f"nexus-{uuid.uuid4().hex[:8]}"
    await create_endpoint(
        service.search, name=name, target_namespace="fs-search", target_queue=queue
    )
    return name, queue


async def test_cancelling_the_caller_leaves_no_rg_running(service, tmp_path: Path):
    """`fs-search worker --nexus-queue`: cancelling the calling workflow cancels the
    operation, its activity and rg (the workflow closes once rg is gone); cancelling just
    the call reads SEARCH_ABORTED, rg gone too."""
    ws = tmp_path / "ws"
    sparse_file(ws / "huge.bin", gigabytes=200)  # rg reads it for its whole budget
    wsid = f"ws-{uuid.uuid4()}"
    endpoint, queue = await _endpoint_for(service)
    worker = WorkerProcess(
        ws,
        service.server.address,
        wsid,
        env={"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill"},
        args=("--sample-over-cap-glob-results", "--namespace", "fs-search", "--nexus-queue", queue),
    )
    try:
        assert f"serving the fs_search Nexus service on task queue {queue}" in worker.log()
        options = Options(workspace_id=wsid, endpoint=endpoint)
        huge = [("grep", {"pattern": "zzz", "path": "huge.bin"})]
        queue_wf = f"wf-{uuid.uuid4()}"
        async with Worker(service.caller, task_queue=queue_wf, workflows=WORKFLOWS):
            handle = await service.caller.start_workflow(
                CallsWorkflow.run,
                Calls(options=options, calls=huge),
                id=f"wf-{uuid.uuid4()}",
                task_queue=queue_wf,
            )
            await asyncio.to_thread(wait_until, worker.rg_processes, 60)
            rgs = worker.rg_processes()
            await handle.cancel()
            with pytest.raises(WorkflowFailureError):
                await handle.result()
            # The workflow waited for the operation's cancellation: rg is gone by now.
            await asyncio.to_thread(wait_until, lambda: not alive(rgs), 2)
            assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED

            one = await service.caller.start_workflow(
                CancelOneCallWorkflow.run,
                Calls(options=options, calls=huge),
                id=f"wf-{uuid.uuid4()}",
                task_queue=queue_wf,
            )
            await asyncio.to_thread(wait_until, worker.rg_processes, 60)
            rgs = worker.rg_processes()
            await one.signal(CancelOneCallWorkflow.cancel_call)
            result = await one.result()
            assert result.error is not None and result.error.code == ErrorCode.SEARCH_ABORTED
            assert not alive(rgs)
    finally:
        assert worker.terminate(timeout=20) == 0


async def test_host_routed_workspaces_through_the_endpoint(service, tmp_path: Path):
    """A fleet worker on its host queue (--queues host) with --nexus-queue: calls naming
    the host reach the workspace; one not attached there is SEARCH_FAILED at once, naming the
    workspace and the host."""
    root = tmp_path / "root"
    write_tree(root / "w1", {"a.py": "needle = 1\n"})
    host = f"h-{uuid.uuid4().hex[:8]}"
    endpoint, queue = await _endpoint_for(service)
    worker = WorkerProcess(
        root,
        service.server.address,
        None,
        env={"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill"},
        args=(
            "--sample-over-cap-glob-results",
            "--namespace",
            "fs-search",
            "--queues",
            "host",
            "--host-id",
            host,
            "--nexus-queue",
            queue,
        ),
    )
    try:
        await asyncio.to_thread(wait_until, lambda: "attached workspace w1" in worker.log(), 30)
        found = Options(workspace_id="w1", host=host, endpoint=endpoint)
        (hit,) = await _run(
            service.caller,
            CallsWorkflow,
            Calls(options=found, calls=[("grep", {"pattern": "needle"})]),
        )
        started = time.monotonic()
        missing = Options(workspace_id="w2", host=host, endpoint=endpoint)
        (miss,) = await _run(
            service.caller,
            CallsWorkflow,
            Calls(options=missing, calls=[("grep", {"pattern": "x"})]),
        )
        took = time.monotonic() - started
    finally:
        assert worker.terminate(timeout=20) == 0
    assert hit.text == "a.py:\n  Line 1: needle = 1", hit.text
    assert miss.error is not None and miss.error.code == ErrorCode.SEARCH_FAILED
    assert "'w2'" in miss.text and repr(host) in miss.text
    assert took < 5, took


async def test_one_trace_from_the_caller_through_the_handler_to_the_activity(
    service, tmp_path: Path
):
    """With tracing on both sides, the caller's workflow, the operation's handler, the
    activity's start and its run are one trace."""
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracer = provider.get_tracer("test")
    address = service.server.address
    search = await Client.connect(
        address,
        namespace="fs-search",
        plugins=[
            FsSearchPlugin(tracer=tracer, spill_url=f"file://{tmp_path}/p", getenv=lambda _: None)
        ],
    )
    caller = await Client.connect(
        address,
        namespace="agents",
        plugins=[FsSearchPlugin(tracer=tracer, external_storage=False, getenv=lambda _: None)],
    )
    ws = write_tree(tmp_path / "ws", TREE)
    wsid = f"ws-{uuid.uuid4()}"
    endpoint, queue = await _endpoint_for(service)
    async with search_worker(search, ws, workspace_id=wsid), serving_service(search, queue):
        (result,) = await _run(
            caller,
            CallsWorkflow,
            Calls(
                options=Options(workspace_id=wsid, endpoint=endpoint),
                calls=[("grep", {"pattern": "TODO"})],
            ),
        )
    assert not result.is_error, result.text
    finished = spans.get_finished_spans()
    names = {s.name: s for s in finished}
    wanted = [
        "StartWorkflow:CallsWorkflow",
        "RunStartNexusOperationHandler:fs_search/grep",
        "StartActivity:fs_search.grep",
        "RunActivity:fs_search.grep",
    ]
    assert set(wanted) <= set(names), sorted(names)
    assert len({names[n].context.trace_id for n in wanted}) == 1


async def test_framework_adapters_work_through_the_endpoint(service, payload_dir, tmp_path: Path):
    """The OpenAI Agents and pydantic-ai adapters over FsSearchTools(endpoint=...) in the
    callers' namespace: the model is offered and reads exactly what the activity route
    gives it (a grep, an invalid pattern, a path outside the workspace)."""
    from tests.workflows.openai_agents_workflows import AgentRun as OpenAIRun
    from tests.workflows.pydantic_ai_workflows import AgentRun as PydanticRun
    from tests.workflows.test_openai_agents import _calls
    from tests.workflows.test_openai_agents import _run as run_openai
    from tests.workflows.test_pydantic_ai import WORKFLOWS as PYDANTIC_WORKFLOWS
    from tests.workflows.test_pydantic_ai import _run as run_pydantic

    ws = write_tree(tmp_path / "ws", {"a.py": "needle = 1\n", "b/c.py": "x\n"})
    wsid = f"ws-{uuid.uuid4()}"
    turns = (
        ("grep", {"pattern": "needle"}),
        ("grep", {"pattern": "("}),
        ("glob", {"pattern": "*", "path": "/etc"}),
    )
    pydantic_agent = next(iter(PYDANTIC_WORKFLOWS.values()))
    outcomes = {}
    async with search_worker(service.search, ws, workspace_id=wsid):
        for route, client, endpoint in [
            ("activity", service.search, None),
            ("nexus", service.caller, service.endpoint),
        ]:
            outcomes["openai", route] = await run_openai(
                client,
                payload_dir,
                _calls(*turns),
                OpenAIRun(workspace_id=wsid, prompt="find the needle", endpoint=endpoint),
            )
            outcomes["pydantic", route] = await run_pydantic(
                client,
                payload_dir,
                pydantic_agent,
                PydanticRun(workspace_id=wsid, calls=list(turns), endpoint=endpoint),
            )
    for framework in ("openai", "pydantic"):
        through, direct = outcomes[framework, "nexus"], outcomes[framework, "activity"]
        assert through == direct, framework
        assert len(through.tool_outputs) == 3
        assert "a.py" in through.tool_outputs[0] and "needle = 1" in through.tool_outputs[0]
        assert "Error:" in through.tool_outputs[1] and "Error:" in through.tool_outputs[2]
        assert [t["name"] for t in through.tools] == ["glob", "grep"]
