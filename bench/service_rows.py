"""The rows of issue 35: one-off calls and calls from another namespace (Nexus).

Registered in ``rows`` on import (``bench.py`` imports this module), so ``--rows
oneoff,nexus`` and the table treat them as any other row.

- **one-off small grep**: ``FsSearchClient.grep`` (one standalone activity, no workflow) vs
  the one-call workflow the CLI ran before (``fs_search.Call``, its worker kept running in
  this process: the reference pays no worker start-up). Target: ratio <= 0.5.
- **Nexus small grep**: a workflow in another namespace calling grep through an endpoint
  (``FsSearchTools(..., endpoint=...)``; the handler in this process starts the activity on
  the workspace's queue) vs the same workflow calling the activity in the workers' namespace
  (the small row's project). Target: ratio <= 1.5.

Both check every result (the small corpus's match count).
"""

from __future__ import annotations

import gc
import time
import uuid
from datetime import datetime

import corpus as c
import rows
from flows import WORKFLOWS, Call, CallsWorkflow
from harness import CALLER_NAMESPACE, WORKFLOW_TIMEOUT
from rows import MS, Context, _grep_ok, _one, _row, interleave
from stats import RowResult, Target, spread
from temporalio.client import Client
from temporalio.worker import Worker

from fs_search.activities._contract import ToolResult
from fs_search.worker import create_endpoint, serving_service
from fs_search.workflows import FsSearchClient, FsSearchPlugin
from fs_search.workflows._call import CALL_WORKFLOW, CallInput, FsSearchCallWorkflow

rows.NAMES.update({"oneoff": "one-off small grep", "nexus": "Nexus small grep"})
rows.PARTS.update({"oneoff": {"small"}, "nexus": {"small"}})
rows.TARGETS.update({"oneoff": Target("ratio", "<=", 0.5), "nexus": Target("ratio", "<=", 1.5)})
rows.FULL_COUNTS.update({"oneoff": 30, "nexus": 30})
rows.QUICK_COUNTS.update({"oneoff": 10, "nexus": 10})


async def one_off_grep(ctx: Context) -> RowResult:
    """``FsSearchClient.grep`` (a standalone activity) vs ``fs_search.Call`` (a workflow)."""
    env = ctx.env
    searches = FsSearchClient(env.client, env.workspace_id, cwd="small")
    call = CallInput(
        workspace_id=env.workspace_id,
        tool="grep",
        arguments={"pattern": c.SMALL_PATTERN},
        cwd="small",
    )
    queue = f"bench-call-{uuid.uuid4().hex[:8]}"
    queued: list[float] = []
    ran: list[float] = []

    async def project() -> float:
        gc.collect()
        started = time.perf_counter()
        result = await searches.grep(c.SMALL_PATTERN)
        took = time.perf_counter() - started
        _grep_ok(result, total=ctx.corpus.small_matches, spilled=False)
        if not searches.standalone:
            raise rows.WrongResult("the server ran the one-off call as a workflow")
        # Outside the timing: where the time went, by the server's clock.
        described = await env.client.get_activity_handle(searches.last_id or "").describe()
        if described.last_started_time and described.close_time:
            queued.append(ms_between(described.schedule_time, described.last_started_time))
            ran.append(ms_between(described.last_started_time, described.close_time))
        return took * MS

    async def reference() -> float:
        gc.collect()
        started = time.perf_counter()
        result = await env.client.execute_workflow(
            CALL_WORKFLOW,
            call,
            id=f"bench-call-{uuid.uuid4().hex[:12]}",
            task_queue=queue,
            result_type=ToolResult,
            execution_timeout=WORKFLOW_TIMEOUT,
        )
        took = time.perf_counter() - started
        _grep_ok(result, total=ctx.corpus.small_matches, spilled=False)
        return took * MS

    async with Worker(env.client, task_queue=queue, workflows=[FsSearchCallWorkflow]):
        ps, rs = await interleave(project, reference, ctx.n("oneoff"))
    return _row(
        "oneoff",
        units="ms",
        project=ps,
        reference=rs,
        project_label="FsSearchClient.grep: one standalone activity -> result",
        reference_label="client -> fs_search.Call workflow (worker running) -> activity -> result",
        details={
            "activity_scheduled_to_started_ms": spread(queued[1:]) if len(queued) > 1 else None,
            "activity_started_to_closed_ms": spread(ran[1:]) if len(ran) > 1 else None,
        },
    )


async def nexus_grep(ctx: Context) -> RowResult:
    """A caller workflow in another namespace through an endpoint vs the activity route."""
    env = ctx.env
    suffix = uuid.uuid4().hex[:8]
    endpoint, handler_queue = f"bench-{suffix}", f"bench-nexus-{suffix}"
    await create_endpoint(
        env.client, name=endpoint, target_namespace="default", target_queue=handler_queue
    )
    caller = await Client.connect(
        env.server.address,
        namespace=CALLER_NAMESPACE,
        plugins=[FsSearchPlugin(external_storage=False, getenv=lambda _: None)],
    )
    caller_queue = f"bench-caller-{suffix}"
    spec = env.spec(Call(tool="grep", arguments={"pattern": c.SMALL_PATTERN}, cwd="small"))
    through = spec.model_copy(update={"endpoint": endpoint})

    async def project() -> float:
        gc.collect()
        started = time.perf_counter()
        results = await caller.execute_workflow(
            CallsWorkflow.run,
            through,
            id=f"bench-{uuid.uuid4().hex[:12]}",
            task_queue=caller_queue,
            execution_timeout=WORKFLOW_TIMEOUT,
        )
        took = time.perf_counter() - started
        _grep_ok(_one(results), total=ctx.corpus.small_matches, spilled=False)
        return took * MS

    async def reference() -> float:
        seconds, results = await env.timed(CallsWorkflow, spec)
        _grep_ok(_one(results), total=ctx.corpus.small_matches, spilled=False)
        return seconds * MS

    async with (
        serving_service(env.client, handler_queue),
        Worker(caller, task_queue=caller_queue, workflows=WORKFLOWS),
    ):
        ps, rs = await interleave(project, reference, ctx.n("nexus"))
    return _row(
        "nexus",
        units="ms",
        project=ps,
        reference=rs,
        project_label=(
            f"workflow in {CALLER_NAMESPACE} -> endpoint -> handler -> fs_search.grep -> result"
        ),
        reference_label="workflow in the workers' namespace -> fs_search.grep -> result",
    )


def ms_between(earlier: datetime, later: datetime) -> float:
    """Milliseconds from one server timestamp to another."""
    return (later - earlier).total_seconds() * MS


rows.ROWS.update({"oneoff": one_off_grep, "nexus": nexus_grep})
