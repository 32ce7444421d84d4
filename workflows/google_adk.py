"""fs-search's tools for Google ADK agents under Temporal (``temporalio.google_adk``).

Two lines of glue where the agent is built, in the workflow::

    agent = LlmAgent(
        name="searcher",
        model=TemporalModel("gemini-2.5-flash"),
        static_instruction=instructions(catalogue),
        tools=function_tools(tools, catalogue),
    )

``function_tools`` gives one ADK tool (a ``BaseTool``) per catalogue entry (``glob``,
``grep``, ``read_spill`` when offered). Its declaration is the catalogue's name, description
and JSON schema, verbatim (``parameters_json_schema``, as ADK's MCP tools declare theirs).
ADK runs tools in the workflow (``TemporalModel`` makes only the model calls activities), so
each call runs ``FsSearchTools.call`` with the model's arguments as they came: the search is
our activity on the workspace's queue (``fs-search/<workspace_id>``) with FsSearchTools'
options, and an argument outside the schema is refused there as ``Error:`` text. The model
reads the call's ``text`` as the function response's ``result``; a failed call reads
``Error: <message>`` there and the run goes on.

The tools never raise, except when the workflow is cancelled: ADK re-raises a tool's
``Exception`` out of the run, and the cancelled search's ``ActivityError`` left there leaves
the run stuck (the workflow never closes). So a cancelled search re-raises as
``asyncio.CancelledError``; the workflow closes as cancelled, rg dead (FsSearchTools waits
for the cancellation), and the model is not called again.

When no worker serves the workspace, ``function_tools`` raises a non-retryable
``ApplicationError`` (``SEARCH_FAILED`` naming the workspace), as every adapter does: the
workflow fails with the cause instead of running the agent without its tools.

Needs the ``google-adk`` extra (``pip install "fs-search-temporal[google-adk]"``).
"""

from __future__ import annotations

import copy
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from fs_search.workflows._adapter_kit import missing_extra

try:
    import google.adk  # noqa: F401  (first: a missing ADK is named as such)
    import temporalio.google_adk  # noqa: F401  (the integration these tools are shaped for)
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.tool_context import ToolContext
    from google.genai import types
except ModuleNotFoundError as e:
    raise missing_extra(e, adapter=__name__, extra="google-adk") from e

with workflow.unsafe.imports_passed_through():
    from fs_search.workflows import ToolSpec, ToolsResult
    from fs_search.workflows import _adapter_kit as kit
    from fs_search.workflows._adapter_kit import call_text, offered_specs
    from fs_search.workflows._tools import FsSearchTools


class FsSearchTool(BaseTool):
    """One catalogue entry as an ADK tool: declared as the catalogue says, run in the
    workflow through ``FsSearchTools.call``."""

    def __init__(self, tools: FsSearchTools, catalogue: ToolsResult, spec: ToolSpec) -> None:
        super().__init__(name=spec.name, description=spec.description)
        self._tools = tools
        self._catalogue = catalogue
        self._schema = spec.input_schema

    def _get_declaration(self) -> types.FunctionDeclaration:
        # ADK's hook for a tool's declaration (BaseTool's default process_llm_request
        # appends it to the request). A copy each time: ADK and toolsets may edit it.
        return types.FunctionDeclaration(
            name=self.name,
            description=self.description,
            parameters_json_schema=copy.deepcopy(self._schema),
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> str:
        """The call's text: the search's, or ``Error: ...``; never raises but for a
        cancelled workflow (``asyncio.CancelledError``: ADK re-raises a tool's Exception out
        of the run, where a cancelled workflow's ActivityError leaves the run stuck)."""
        return await call_text(self._tools, self.name, args, catalogue=self._catalogue)


def function_tools(tools: FsSearchTools, catalogue: ToolsResult) -> list[BaseTool]:
    """One ADK tool per catalogue entry (``glob``, ``grep``, ``read_spill`` when offered),
    for ``LlmAgent(tools=...)``.

    Each is declared with the catalogue's name, description and JSON schema and returns the
    call's text, ``Error: ...`` on failure. A worker without rg offers no tools: the list is
    empty and a workflow warning says why.

    Raises:
        ApplicationError: non-retryable SEARCH_FAILED naming the workspace when no worker
            answered the catalogue (nothing serves the workspace): the workflow fails with
            the cause instead of running the agent without its tools.
    """
    return [FsSearchTool(tools, catalogue, spec) for spec in offered_specs(tools, catalogue)]


def instructions(catalogue: ToolsResult) -> str:
    """The catalogue's system prompt segments, one paragraph each, for
    ``LlmAgent(static_instruction=...)`` (sent as they are; ADK's ``instruction`` would
    read ``{name}`` in them as session state).
    """
    return kit.instructions(catalogue)


__all__ = ["FsSearchTool", "function_tools", "instructions"]
