"""Workflows the tests drive: thin shells around FsSearchTools with test-sized options."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, Field
from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from fs_search.activities._catalogue import tools_and_prompts
    from fs_search.activities._contract import ToolResult, ToolsResult
    from fs_search.workflows import FsSearchTools
    from fs_search.workflows._tools import NON_RETRYABLE_ERROR_TYPES


def _every_tool() -> ToolsResult:
    specs, prompts = tools_and_prompts(
        sample_over_cap=False, glob_cap=100, grep_cap=250, line_bytes=2000, read_spill=True
    )
    return ToolsResult(
        available=True,
        tools=specs,
        system_prompt=prompts,
        sample_over_cap_glob_results=False,
        timeout_ms=30_000,
    )


# These workflows drive the activities themselves (read_spill included, whatever the
# worker's store): a catalogue that offers every tool.
EVERY_TOOL = _every_tool()


class Options(BaseModel):
    """FsSearchTools options in milliseconds (None: the helper's default)."""

    workspace_id: str
    cwd: str | None = None
    spill: bool = True
    timeout_ms: int = 30_000
    task_queue: str | None = None
    host: str | None = None
    heartbeat_ms: int | None = None
    schedule_to_start_ms: int | None = None
    start_to_close_ms: int | None = None
    queue_ms: int | None = None
    max_attempts: int | None = None
    # Call through this Nexus endpoint (the fs_search service) instead of activities.
    endpoint: str | None = None

    def tools(self) -> FsSearchTools:
        kwargs: dict[str, Any] = {}
        if self.heartbeat_ms is not None:
            kwargs["heartbeat_timeout"] = timedelta(milliseconds=self.heartbeat_ms)
        if self.schedule_to_start_ms is not None:
            kwargs["schedule_to_start_timeout"] = timedelta(milliseconds=self.schedule_to_start_ms)
        if self.start_to_close_ms is not None:
            kwargs["start_to_close_timeout"] = timedelta(milliseconds=self.start_to_close_ms)
        if self.queue_ms is not None:
            kwargs["queue_timeout"] = timedelta(milliseconds=self.queue_ms)
        if self.max_attempts is not None:
            kwargs["retry_policy"] = RetryPolicy(
                maximum_attempts=self.max_attempts,
                initial_interval=timedelta(milliseconds=100),
                non_retryable_error_types=NON_RETRYABLE_ERROR_TYPES,
            )
        return FsSearchTools(
            self.workspace_id,
            cwd=self.cwd,
            spill=self.spill,
            timeout_ms=self.timeout_ms,
            task_queue=self.task_queue,
            host=self.host,
            endpoint=self.endpoint,
            **kwargs,
        )


class Calls(BaseModel):
    options: Options
    calls: list[tuple[str, dict[str, Any]]] = Field(default_factory=list)


@workflow.defn
class CallsWorkflow:
    """Runs each call in order through FsSearchTools.call."""

    @workflow.run
    async def run(self, spec: Calls) -> list[ToolResult]:
        tools = spec.options.tools()
        return [await tools.call(name, args, catalogue=EVERY_TOOL) for name, args in spec.calls]


@workflow.defn
class ConcurrentCallsWorkflow:
    """Runs every call at once through one FsSearchTools (as an agent's parallel calls)."""

    @workflow.run
    async def run(self, spec: Calls) -> list[ToolResult]:
        tools = spec.options.tools()
        return list(
            await asyncio.gather(
                *(tools.call(name, args, catalogue=EVERY_TOOL) for name, args in spec.calls)
            )
        )


@workflow.defn
class CatalogueWorkflow:
    """Returns the catalogue the helper fetches."""

    @workflow.run
    async def run(self, options: Options) -> ToolsResult:
        return await options.tools().catalogue()


@workflow.defn
class CancelOneCallWorkflow:
    """Starts one call, cancels just that call when signalled, then returns its result."""

    def __init__(self) -> None:
        self._cancel = False

    @workflow.signal
    def cancel_call(self) -> None:
        self._cancel = True

    @workflow.run
    async def run(self, spec: Calls) -> ToolResult:
        tools = spec.options.tools()
        name, args = spec.calls[0]
        task = asyncio.ensure_future(tools.call(name, args, catalogue=EVERY_TOOL))
        await workflow.wait_condition(lambda: self._cancel or task.done())
        if not task.done():
            task.cancel()
        return await task


class MixedCalls(BaseModel):
    """Calls across workspaces: (workspace_id, tool, arguments)."""

    calls: list[tuple[str, str, dict[str, Any]]]
    timeout_ms: int = 30_000
    schedule_to_start_ms: int = 30_000
    host: str | None = None


@workflow.defn
class MixedCallsWorkflow:
    """Runs calls against several workspaces in order, one FsSearchTools per workspace."""

    @workflow.run
    async def run(self, spec: MixedCalls) -> list[ToolResult]:
        tools: dict[str, FsSearchTools] = {}
        results = []
        for workspace_id, name, args in spec.calls:
            helper = tools.setdefault(
                workspace_id,
                FsSearchTools(
                    workspace_id,
                    timeout_ms=spec.timeout_ms,
                    schedule_to_start_timeout=timedelta(milliseconds=spec.schedule_to_start_ms),
                    host=spec.host,
                ),
            )
            results.append(await helper.call(name, args, catalogue=EVERY_TOOL))
        return results


class ManyKeys(BaseModel):
    """A model's tool call whose arguments hold ``keys`` unknown names besides ``arguments``
    (built in the workflow: such an object would not fit a workflow input)."""

    options: Options
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    keys: int = 0


@workflow.defn
class ManyKeysWorkflow:
    """Dispatches one tool call whose arguments hold many unknown keys."""

    @workflow.run
    async def run(self, spec: ManyKeys) -> ToolResult:
        arguments = {**spec.arguments, **{f"unknown_{i}": i for i in range(spec.keys)}}
        return await spec.options.tools().call(spec.tool, arguments, catalogue=EVERY_TOOL)
