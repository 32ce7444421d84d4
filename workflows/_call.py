"""FsSearchCallWorkflow: one tool call in a workflow of its own.

What the command line ran for each call before one-off calls (``FsSearchClient``: a
standalone activity each), and what ``FsSearchClient`` and the command line still run where
the server has no standalone activities.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from fs_search.activities import (
        DEFAULT_SCHEDULE_TO_START,
        DEFAULT_TIMEOUT_MS,
        ErrorCode,
        ToolResult,
        ToolsResult,
    )
    from fs_search.workflows._tools import FsSearchTools


class CallInput(BaseModel):
    """A single call: which workspace, which tool, the model-style arguments, and options."""

    workspace_id: str
    tool: str
    arguments: dict[str, Any]
    cwd: str | None = None
    spill: bool = True
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    # None: FsSearchTools' default (a call no worker took is checked after 8 s).
    schedule_to_start_ms: int | None = None
    # The host serving the workspace on its host queue (None: the workspace's own queue).
    host: str | None = None
    # True: ``tool`` names FsSearchTools' method called with ``arguments`` as keywords
    # (glob, grep, read_spill without the catalogue check, or "tools" for the catalogue),
    # as FsSearchClient calls them; False: a model's tool call, dispatched by ``call``.
    direct: bool = False


CALL_WORKFLOW = "fs_search.Call"


@workflow.defn(name=CALL_WORKFLOW)
class FsSearchCallWorkflow:
    """Runs one glob/grep call on the workspace's queue and returns its ToolResult."""

    @workflow.run
    async def run(self, call: CallInput) -> ToolResult | ToolsResult:
        """Dispatch the call by name, exactly as an agent workflow would (``direct``: call
        the method of that name; "tools" returns the catalogue)."""
        liveness = (
            DEFAULT_SCHEDULE_TO_START
            if call.schedule_to_start_ms is None
            else timedelta(milliseconds=call.schedule_to_start_ms)
        )
        tools = FsSearchTools(
            call.workspace_id,
            cwd=call.cwd,
            spill=call.spill,
            timeout_ms=call.timeout_ms,
            host=call.host,
            schedule_to_start_timeout=liveness,
        )
        if not call.direct:
            return await tools.call(call.tool, call.arguments)
        if call.tool == "tools":
            return await tools.catalogue()
        try:
            if call.tool == "glob":
                return await tools.glob(**call.arguments)
            if call.tool == "grep":
                return await tools.grep(**call.arguments)
            if call.tool == "read_spill":
                return await tools.read_spill(**call.arguments)
        except TypeError as e:  # arguments that are not the method's
            return ToolResult.failure(ErrorCode.INVALID_ARGUMENT, str(e))
        return ToolResult.failure(ErrorCode.INVALID_ARGUMENT, f"unknown tool {call.tool!r}")
