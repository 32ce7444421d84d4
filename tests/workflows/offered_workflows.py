"""A workflow that dispatches calls through ``FsSearchTools.call`` against a catalogue: the one
it fetched first, one it was given, or none."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel, Field
from temporalio import workflow

from fs_search.workflows import FsSearchTools, ToolResult, ToolsResult


class OfferedCalls(BaseModel):
    workspace_id: str
    calls: list[tuple[str, dict[str, Any]]]
    # Fetch the worker's catalogue before the calls (FsSearchTools remembers it).
    fetch: bool = False
    # Pass this catalogue to every call.
    catalogue: ToolsResult | None = None


class OfferedOutcome(BaseModel):
    fetched: ToolsResult | None = None
    results: list[ToolResult] = Field(default_factory=list)


@workflow.defn
class OfferedCallsWorkflow:
    """Runs each call through ``FsSearchTools.call`` with the spec's catalogue, if any."""

    @workflow.run
    async def run(self, spec: OfferedCalls) -> OfferedOutcome:
        tools = FsSearchTools(spec.workspace_id, schedule_to_start_timeout=timedelta(seconds=5))
        out = OfferedOutcome(fetched=await tools.catalogue() if spec.fetch else None)
        for name, args in spec.calls:
            out.results.append(await tools.call(name, args, catalogue=spec.catalogue))
        return out
