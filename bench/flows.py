"""Workflows the benchmark drives; they run in Temporal's workflow sandbox.

Every workflow schedules its activities exactly as an agent would, through
``FsSearchTools`` (or, for the no-op reference, with ``FsSearchTools.activity_config()``
so the options match and only the activity body differs).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, NexusOperationError

with workflow.unsafe.imports_passed_through():
    from fs_search.activities._contract import (
        GREP_ACTIVITY,
        GrepRequest,
        GrepResult,
        ToolResult,
        host_queue_for,
    )
    from fs_search.workflows import FsSearchService, FsSearchTools, GrepCall

NOOP_ACTIVITY = "bench.noop"
PLAIN_RG_ACTIVITY = "bench.plain_rg"


class Call(BaseModel):
    """One model-style tool call and the session cwd it runs in."""

    tool: str
    arguments: dict[str, Any]
    cwd: str | None = None


class Spec(BaseModel):
    """The calls one workflow makes on a workspace's worker."""

    workspace_id: str
    calls: list[Call]
    concurrent: bool = False
    # Call through this Nexus endpoint (the fs_search service) instead of activities.
    endpoint: str | None = None
    host: str | None = None  # the host queue serving the workspace (None: its own queue)


class PlainRg(BaseModel):
    """The plain reference: an rg argv, where it runs, and the queue of its activity."""

    argv: list[str]
    cwd: str
    task_queue: str


def _tools(spec: Spec, call: Call) -> FsSearchTools:
    return FsSearchTools(spec.workspace_id, cwd=call.cwd, endpoint=spec.endpoint, host=spec.host)


@workflow.defn(name="bench.Calls")
class CallsWorkflow:
    """Runs the calls one after another, or all at once when ``spec.concurrent``."""

    @workflow.run
    async def run(self, spec: Spec) -> list[ToolResult]:
        """Return each call's ToolResult, in the order of ``spec.calls``."""
        if spec.concurrent:
            results = await asyncio.gather(
                *(_tools(spec, c).call(c.tool, c.arguments) for c in spec.calls)
            )
            return list(results)
        return [await _tools(spec, c).call(c.tool, c.arguments) for c in spec.calls]


@workflow.defn(name="bench.Noop")
class NoopWorkflow:
    """The reference round trip: one trivial activity with FsSearchTools' options."""

    @workflow.run
    async def run(self, spec: Spec) -> list[ToolResult]:
        """Call ``bench.noop`` once per call (grep-shaped request and result)."""
        out: list[ToolResult] = []
        for c in spec.calls:
            tools = _tools(spec, c)
            req = GrepRequest(pattern=str(c.arguments.get("pattern", "")), cwd=c.cwd)
            result = await workflow.execute_activity(
                NOOP_ACTIVITY,
                req,
                result_type=GrepResult,
                **tools.activity_config(summary=f'noop "{req.pattern}"'),
            )
            out.append(ToolResult(text=result.text, result=result))
        return out


@workflow.defn(name="bench.PlainRg")
class PlainRgWorkflow:
    """The alternative a Temporal user writes today: one activity that runs rg with asyncio
    subprocess and returns its stdout (on its own queue in the same worker process)."""

    @workflow.run
    async def run(self, spec: PlainRg) -> str:
        """rg's stdout."""
        return await workflow.execute_activity(
            PLAIN_RG_ACTIVITY,
            spec,
            result_type=str,
            task_queue=spec.task_queue,
            start_to_close_timeout=timedelta(seconds=60),
        )


@workflow.defn(name="bench.CancelOne")
class CancelOneWorkflow:
    """Starts the first call; when signalled, cancels just that call and returns its result."""

    def __init__(self) -> None:
        self._cancel = False

    @workflow.signal
    def cancel_call(self) -> None:
        """Ask the workflow to cancel its running call."""
        self._cancel = True

    @workflow.run
    async def run(self, spec: Spec) -> ToolResult:
        """The call's ToolResult (SEARCH_ABORTED once cancelled)."""
        call = spec.calls[0]
        task = asyncio.ensure_future(_tools(spec, call).call(call.tool, call.arguments))
        await workflow.wait_condition(lambda: self._cancel or task.done())
        if not task.done():
            task.cancel()
        return await task


# Nexus operations one workflow may have open at once (the server's default limit, 30).
NEXUS_PER_WORKFLOW = 30


class NexusFlood(BaseModel):
    """A hostile caller's operations on the fs_search endpoint: ``calls`` at once, each on
    its own made-up workspace (``prefix-<i>``), each asking the handler to check the queue
    first (``check_queue``, which FsSearchTools sends only after a schedule-to-start
    timeout) and giving up after ``schedule_to_start_ms`` when no worker takes it."""

    endpoint: str
    prefix: str
    calls: int = NEXUS_PER_WORKFLOW
    check_queue: bool = True
    schedule_to_start_ms: int = 2_000


@workflow.defn(name="bench.NexusFlood")
class NexusFloodWorkflow:
    """Starts ``calls`` operations at once and waits for all of them to end (any way)."""

    @workflow.run
    async def run(self, flood: NexusFlood) -> int:
        """How many operations ended."""
        client = workflow.create_nexus_client(service=FsSearchService, endpoint=flood.endpoint)

        async def one(i: int) -> None:
            call = GrepCall(
                workspace_id=f"{flood.prefix}-{i}",
                request=GrepRequest(pattern="x"),
                check_queue=flood.check_queue,
                schedule_to_start_ms=flood.schedule_to_start_ms,
                max_attempts=1,
            )
            try:
                await client.execute_operation(
                    FsSearchService.grep, call, schedule_to_close_timeout=timedelta(minutes=5)
                )
            except NexusOperationError:
                pass

        await asyncio.gather(*(one(i) for i in range(flood.calls)))
        return flood.calls


@workflow.defn(name="bench.HostileGrep")
class HostileGrepWorkflow:
    """A caller that will not cooperate with a host queue's hand-backs: each grep is one
    activity with ``max_attempts: 1`` (the server never brings a handed-back call back
    itself), scheduled again at once whatever the failure (the pause the host asks is
    ignored), until it runs; the result of the first call that ran."""

    @workflow.run
    async def run(self, spec: Spec) -> list[ToolResult]:
        """Each call's result, after as many hand-backs as it took."""
        assert spec.host is not None
        out: list[ToolResult] = []
        for c in spec.calls:
            req = GrepRequest(workspace_id=spec.workspace_id, **c.arguments)
            while True:
                try:
                    result = await workflow.execute_activity(
                        GREP_ACTIVITY,
                        req,
                        result_type=GrepResult,
                        task_queue=host_queue_for(spec.host),
                        start_to_close_timeout=timedelta(minutes=5),
                        retry_policy=RetryPolicy(maximum_attempts=1),
                    )
                except ActivityError:
                    continue
                out.append(ToolResult(text=result.text, result=result))
                break
        return out


WORKFLOWS = [
    CallsWorkflow,
    NoopWorkflow,
    PlainRgWorkflow,
    CancelOneWorkflow,
    NexusFloodWorkflow,
    HostileGrepWorkflow,
]
