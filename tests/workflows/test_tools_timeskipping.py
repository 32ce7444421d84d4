"""FsSearchTools' scheduling and error mapping on the time-skipping test server."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

from temporalio import activity
from temporalio.worker import Worker

from examples.agent import AgentInput, ExampleAgentWorkflow, ToolCall
from fs_search.activities._contract import (
    GREP_ACTIVITY,
    ErrorCode,
    GrepRequest,
    GrepResult,
    task_queue_for,
)
from fs_search.activities._errors import SearchError
from fs_search.worker.testing import canned_activities, search_worker
from tests.helpers import write_tree
from tests.workflows_under_test import Calls, CallsWorkflow, CatalogueWorkflow, Options

WORKFLOWS = [CallsWorkflow, CatalogueWorkflow, ExampleAgentWorkflow]


def _ids() -> tuple[str, str]:
    return f"ws-{uuid.uuid4()}", f"wf-{uuid.uuid4()}"


async def _calls(env, queue: str, options: Options, calls):
    async with Worker(env.client, task_queue=queue, workflows=WORKFLOWS):
        return await env.client.execute_workflow(
            CallsWorkflow.run,
            Calls(options=options, calls=calls),
            id=f"wf-{uuid.uuid4()}",
            task_queue=queue,
        )


async def test_schedule_to_start_without_worker_names_the_workspace(ts_env):
    """No worker on the workspace queue: SEARCH_FAILED "no fs-search worker is serving
    workspace", as against a real server (the test server cannot list pollers: the
    workers of this process answer), after schedule-to-start in real time."""
    wsid, queue = _ids()
    started = time.monotonic()
    [result] = await _calls(
        ts_env,
        queue,
        Options(workspace_id=wsid, schedule_to_start_ms=1000),
        [("grep", {"pattern": "x"})],
    )
    assert result.is_error and result.error.code == ErrorCode.SEARCH_FAILED
    assert result.text.startswith(
        f"Error: no fs-search worker is serving workspace '{wsid}': nothing polls its task "
        f"queue '{task_queue_for(wsid)}' (no worker of this test process polls it"
    ), result.text
    # The test server skips no time while the call waits to be picked up: it is real time.
    assert time.monotonic() - started >= 1.0


async def test_a_worker_of_this_process_counts_as_serving(ts_env):
    """A worker of this process on the queue is seen as serving it (live), and one that
    has stopped no longer is (the answer the test server cannot give)."""
    from temporalio.service import RPCError, RPCStatusCode

    from fs_search.workflows._liveness import _answered_here

    wsid, _ = _ids()
    key = (ts_env.client.service_client.config.target_host, ts_env.client.namespace)
    unimplemented = RPCError("unimplemented", RPCStatusCode.UNIMPLEMENTED, b"")
    worker = Worker(ts_env.client, task_queue=task_queue_for(wsid), activities=canned_activities())
    async with worker:
        await asyncio.sleep(0.2)  # the worker's run starts in a task of its own
        here = _answered_here(key, task_queue_for(wsid), unimplemented)
        assert here is not None and here.polled is True
    here = _answered_here(key, task_queue_for(wsid), unimplemented)
    assert here is not None and here.polled is False
    # Any other failure of the check, or a server nobody registered, stays unknown.
    assert _answered_here(key, task_queue_for(wsid), RuntimeError("boom")) is None
    assert _answered_here(("elsewhere:1", "default"), task_queue_for(wsid), unimplemented) is None


async def test_heartbeat_timeout_becomes_search_aborted(ts_env):
    """An activity that stops heartbeating times out after retries: SEARCH_ABORTED."""
    wsid, queue = _ids()
    attempts = []

    @activity.defn(name=GREP_ACTIVITY)
    async def silent(req: GrepRequest) -> GrepResult:
        import asyncio

        attempts.append(1)
        await asyncio.sleep(3)  # real time: the test server does not skip while we run
        raise AssertionError("should have timed out")

    async with Worker(ts_env.client, task_queue=task_queue_for(wsid), activities=[silent]):
        [result] = await _calls(
            ts_env,
            queue,
            Options(workspace_id=wsid, heartbeat_ms=1000, max_attempts=2),
            [("grep", {"pattern": "x"})],
        )
    assert result.error.code == ErrorCode.SEARCH_ABORTED and "heartbeat" in result.text
    assert len(attempts) == 2


async def test_contract_errors_are_not_retried(ts_env):
    """A contract error fails the call at once (one attempt) and keeps its code and message."""
    wsid, queue = _ids()
    attempts = []

    def failing(req):
        attempts.append(req)
        raise SearchError(ErrorCode.SEARCH_INVALID_PATTERN, "invalid pattern: boom")

    async with Worker(
        ts_env.client,
        task_queue=task_queue_for(wsid),
        activities=canned_activities(grep=failing),
    ):
        [result] = await _calls(
            ts_env, queue, Options(workspace_id=wsid), [("grep", {"pattern": "("})]
        )
    assert len(attempts) == 1
    assert result.text == "Error: invalid pattern: boom"
    assert (result.error.name, result.error.code) == ("SearchError", "SEARCH_INVALID_PATTERN")


async def test_other_failures_are_retried_then_search_failed(ts_env):
    """A non-contract failure is retried up to the policy, then SEARCH_FAILED."""
    wsid, queue = _ids()
    attempts = []

    def flaky(req):
        attempts.append(req)
        raise RuntimeError("disk on fire")

    async with Worker(
        ts_env.client, task_queue=task_queue_for(wsid), activities=canned_activities(glob=flaky)
    ):
        [result] = await _calls(
            ts_env, queue, Options(workspace_id=wsid, max_attempts=3), [("glob", {"pattern": "*"})]
        )
    assert len(attempts) == 3
    assert result.error.code == ErrorCode.SEARCH_FAILED and "disk on fire" in result.text


async def test_call_dispatch_validates_model_arguments(ts_env):
    """Unknown tools, extra keys and wrong types are refused before scheduling."""
    wsid, queue = _ids()
    results = await _calls(
        ts_env,
        queue,
        Options(workspace_id=wsid, schedule_to_start_ms=1000),
        [
            ("find", {"pattern": "x"}),
            ("grep", {"pattern": "x", "cwd": "/etc"}),
            ("grep", {"pattern": 5}),
            ("glob", {}),
            ("grep", {"pattern": "x" * 3_000_000}),
        ],
    )
    assert [r.error.code for r in results] == [ErrorCode.INVALID_ARGUMENT] * 5
    assert "unknown tool 'find'" in results[0].text
    assert "cwd" in results[1].text
    assert "limit" in results[4].text


async def test_real_activities_in_process_for_tmp_path(ts_env, tmp_path: Path):
    """The testing helper runs the real activities over tmp_path on the workspace queue."""
    ws = write_tree(tmp_path / "ws", {"a.py": "needle = 1\n", "b/c.py": "x\n"})
    wsid, queue = _ids()
    async with search_worker(ts_env.client, ws, workspace_id=wsid):
        async with Worker(ts_env.client, task_queue=queue, workflows=WORKFLOWS):
            out = await ts_env.client.execute_workflow(
                ExampleAgentWorkflow.run,
                AgentInput(
                    workspace_id=wsid,
                    calls=[
                        ToolCall(name="glob", arguments={"pattern": "*.py"}),
                        ToolCall(name="grep", arguments={"pattern": "needle"}),
                        ToolCall(name="grep", arguments={"pattern": "("}),
                    ],
                ),
                id=f"wf-{uuid.uuid4()}",
                task_queue=queue,
            )
    assert out.catalogue.available and [t.name for t in out.catalogue.tools] == ["glob", "grep"]
    glob, grep, bad = out.results
    assert glob.text == "a.py\nb/c.py" and not glob.is_error
    assert grep.text == "a.py:\n  Line 1: needle = 1"
    assert bad.error.code == ErrorCode.SEARCH_INVALID_PATTERN


async def test_canned_results(ts_env):
    """Canned results answer under the same activity names."""
    from fs_search.activities._contract import GlobResult

    wsid, queue = _ids()
    canned = GlobResult(
        root=".", paths=["x.py"], total=1, truncated=False, sampled=False, text="x.py"
    )
    async with Worker(
        ts_env.client, task_queue=task_queue_for(wsid), activities=canned_activities(glob=canned)
    ):
        results = await _calls(
            ts_env,
            queue,
            Options(workspace_id=wsid),
            [("glob", {"pattern": "*"}), ("grep", {"pattern": "x"})],
        )
    assert results[0].text == "x.py" and results[0].result.paths == ["x.py"]
    assert (
        results[1].error.code == ErrorCode.SEARCH_FAILED and "no canned result" in results[1].text
    )


async def test_catalogue_unavailable_without_worker(ts_env):
    """The catalogue reports unavailable (with the reason) when no worker answers."""
    wsid, queue = _ids()
    async with Worker(ts_env.client, task_queue=queue, workflows=WORKFLOWS):
        cat = await ts_env.client.execute_workflow(
            CatalogueWorkflow.run,
            Options(workspace_id=wsid, schedule_to_start_ms=1000),
            id=f"wf-{uuid.uuid4()}",
            task_queue=queue,
        )
    assert not cat.available and wsid in (cat.reason or "")


async def test_a_host_routed_call_runs_real_activities_in_time_skipping(ts_env, tmp_path: Path):
    """``search_worker(host=...)`` serves the workspace on the host queue: a workflow with
    ``FsSearchTools(wsid, host=...)`` gets the real catalogue and grep result; a workspace
    the host does not hold is SEARCH_FAILED naming it and the host."""
    ws = write_tree(tmp_path / "ws", {"a.txt": "needle\n"})
    wsid, queue = _ids()
    host = f"h-{uuid.uuid4().hex[:8]}"
    async with search_worker(ts_env.client, ws, workspace_id=wsid, host=host):
        [found, other] = [
            (await _calls(ts_env, queue, Options(workspace_id=w, host=host), [call]))[0]
            for w, call in (
                (wsid, ("grep", {"pattern": "needle"})),
                ("elsewhere", ("grep", {"pattern": "needle"})),
            )
        ]
        async with Worker(ts_env.client, task_queue=queue, workflows=WORKFLOWS):
            catalogue = await ts_env.client.execute_workflow(
                CatalogueWorkflow.run,
                Options(workspace_id=wsid, host=host),
                id=f"wf-{uuid.uuid4()}",
                task_queue=queue,
            )
    assert not found.is_error and found.result.total == 1
    assert other.error.code == ErrorCode.SEARCH_FAILED
    assert "'elsewhere'" in other.text and repr(host) in other.text
    assert catalogue.available and catalogue.workspace_id == wsid


async def test_no_heartbeat_capability_warning_on_the_test_server(capfd):
    """Workers on time_skipping_env() do not print Core's "Temporal Server 1.16.0 or newer
    is required" warning (the test server does not advertise that capability; see
    worker/testing.py)."""
    from fs_search.worker.testing import time_skipping_env

    async with time_skipping_env() as env:
        async with Worker(
            env.client, task_queue=f"q-{uuid.uuid4()}", activities=canned_activities()
        ):
            await asyncio.sleep(0.5)
    out, err = capfd.readouterr()
    assert "1.16.0 or newer" not in out + err
