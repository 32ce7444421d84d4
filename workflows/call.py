"""FsSearchCallWorkflow: one tool call, as the command line runs it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from fs_search.activities.models import DEFAULT_TIMEOUT_MS, ToolResult
    from fs_search.workflows.tools import DEFAULT_SCHEDULE_TO_START, FsSearchTools


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


@workflow.defn(name="fs_search.Call")
class FsSearchCallWorkflow:
    """Runs one glob/grep call on the workspace's queue and returns its ToolResult."""

    @workflow.run
    async def run(self, call: CallInput) -> ToolResult:
        """Dispatch the call by name, exactly as an agent workflow would."""
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
        return await tools.call(call.tool, call.arguments)
