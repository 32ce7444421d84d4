"""fs-search's tools for Strands Agents made durable by ``temporalio.strands_agents``.

Two lines of glue in the agent's workflow::

    agent = TemporalAgent(
        model="claude",  # a factory registered in StrandsPlugin(models={...})
        system_prompt=instructions(catalogue),
        tools=agent_tools(tools, catalogue),
    )
    result = await agent.invoke_async(question)

``TemporalAgent`` runs the model calls as the plugin's ``invoke_model`` activity and the
agent loop, tools included, in the workflow. Each tool here is an ``AgentTool`` whose spec is
the catalogue's name, description and JSON schema verbatim; its ``stream`` calls
``FsSearchTools.call``, so the search is our activity on the workspace's queue
(``fs-search/<workspace_id>``) with FsSearchTools' options, and the model reads the call's
text (``Error: <message>`` on failure, with the result's status ``error``). It never raises
but for a cancelled workflow: Strands turns a tool's ``Exception`` into an error result and
calls the model again, so a cancelled search re-raises as ``asyncio.CancelledError`` (which it
does not catch); the workflow closes as cancelled, rg dead, the model not called again.

Unlike the integration's ``TemporalSandbox`` (a worker-side shell chosen by name, whatever
host polls its queue), every search here is pinned to the workspace's host, capped, confined
to the workspace and spilled when over the cap.

When no worker serves the workspace, ``agent_tools`` raises a non-retryable
``ApplicationError`` (``SEARCH_FAILED`` naming the workspace), as every adapter does: the
workflow fails with the cause instead of running the agent without its tools.

Needs the ``strands`` extra (``pip install "fs-search-temporal[strands]"``).
"""

from __future__ import annotations

import copy
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from fs_search.workflows._adapter_kit import missing_extra

try:
    import strands  # noqa: F401  (named first: a missing extra reads "strands")
    from strands.types import tools as strands_tools
    from strands.types._events import ToolResultEvent
    from strands.types.tools import AgentTool, ToolGenerator, ToolUse
except ModuleNotFoundError as e:
    raise missing_extra(e, adapter=__name__, extra="strands") from e

with workflow.unsafe.imports_passed_through():
    from fs_search.workflows import ToolSpec, ToolsResult
    from fs_search.workflows import _adapter_kit as kit
    from fs_search.workflows._adapter_kit import call_tool, offered_specs
    from fs_search.workflows._tools import FsSearchTools


class FsSearchAgentTool(AgentTool):
    """One catalogue entry as a Strands tool: its spec as the catalogue says, run in the
    workflow through ``FsSearchTools.call``."""

    def __init__(self, tools: FsSearchTools, catalogue: ToolsResult, entry: ToolSpec) -> None:
        super().__init__()
        self._tools = tools
        self._catalogue = catalogue
        self._entry = entry

    @property
    def tool_name(self) -> str:
        return self._entry.name

    @property
    def tool_spec(self) -> strands_tools.ToolSpec:
        # A copy each time: Strands and model providers may edit the spec they are given.
        return {
            "name": self._entry.name,
            "description": self._entry.description,
            "inputSchema": {"json": copy.deepcopy(self._entry.input_schema)},
        }

    @property
    def tool_type(self) -> str:
        return "fs_search"

    async def stream(
        self, tool_use: ToolUse, invocation_state: dict[str, Any], **kwargs: Any
    ) -> ToolGenerator:
        """One result: the search's text, or ``Error: ...`` with status ``error``; never
        raises but for a cancelled workflow (``asyncio.CancelledError``: Strands hands a
        tool's Exception to the model and goes on)."""
        result = await call_tool(
            self._tools, self.tool_name, tool_use.get("input"), catalogue=self._catalogue
        )
        yield ToolResultEvent(
            strands_tools.ToolResult(
                toolUseId=tool_use["toolUseId"],
                status="error" if result.error is not None else "success",
                content=[{"text": result.text}],
            )
        )


def agent_tools(tools: FsSearchTools, catalogue: ToolsResult) -> list[AgentTool]:
    """One Strands tool per catalogue entry (``glob``, ``grep``, ``read_spill`` when offered),
    for ``TemporalAgent(tools=...)``.

    Each carries the catalogue's name, description and JSON schema and returns the call's
    text, ``Error: ...`` on failure. A worker without rg offers no tools: the list is empty
    and a workflow warning says why.

    Raises:
        ApplicationError: non-retryable SEARCH_FAILED naming the workspace when no worker
            answered the catalogue (nothing serves the workspace): the workflow fails with
            the cause instead of running the agent without its tools.
    """
    entries = offered_specs(tools, catalogue)
    return [FsSearchAgentTool(tools, catalogue, entry) for entry in entries]


def instructions(catalogue: ToolsResult) -> str:
    """The catalogue's system prompt segments, one paragraph each, for
    ``TemporalAgent(system_prompt=...)``.
    """
    return kit.instructions(catalogue)


__all__ = ["FsSearchAgentTool", "agent_tools", "instructions"]
