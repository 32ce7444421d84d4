"""fs-search's tools for an OpenAI Agents SDK agent run durably under Temporal's plugin.

One line of glue in the agent's workflow::

    agent = Agent(
        name="searcher",
        instructions=instructions(catalogue),
        tools=function_tools(tools, catalogue),
    )

Each tool is a plain ``agents.FunctionTool`` whose invoker runs *in the workflow* and calls
``FsSearchTools.call`` with the catalogue (so only the tools it offers are dispatched, whatever
``tools`` fetched itself): the search is our activity on the workspace's queue
(``fs-search/<workspace_id>``), scheduled with FsSearchTools' options, not a tool activity
on the agent's queue. The model reads the call's ``text``; a failed call, or arguments that
are not a JSON object the tool accepts, reads ``Error: <message>`` (the run goes on). Works
under ``temporalio.openai_agents.OpenAIAgentsPlugin`` with the sandboxed and the unsandboxed
workflow runner; put that plugin before FsSearchPlugin on the client (it accepts no payload
converter but its own, which FsSearchPlugin keeps).

Cancelling the workflow cancels the search, but the Agents SDK does not wait for a tool
call it cancels: the workflow closes as cancelled in the task that requests the activity's
cancellation, and the worker kills rg when its next heartbeat learns of it (within the
heartbeat timeout).

Needs the ``openai-agents`` extra (``pip install "fs-search-temporal[openai-agents]"``).
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from fs_search.workflows._extras import missing_extra

try:
    from agents import FunctionTool, RunContextWrapper
except ModuleNotFoundError as e:
    raise missing_extra(e, adapter=__name__, extra="openai-agents") from e

with workflow.unsafe.imports_passed_through():
    from fs_search.activities.contract import ToolResult, ToolSpec, ToolsResult
    from fs_search.workflows import tools as _tools
    from fs_search.workflows.tools import FsSearchTools, offered_specs, parse_arguments


def function_tools(tools: FsSearchTools, catalogue: ToolsResult) -> list[FunctionTool]:
    """One ``FunctionTool`` per catalogue entry (``glob``, ``grep``, ``read_spill`` when offered).

    Names, descriptions and JSON schemas are the catalogue's, unchanged (so the worker's
    over-cap mode shows in glob's description); the schemas are not made "strict" (an
    optional argument stays optional rather than becoming a required nullable one). A
    worker without rg offers no tools: the list is empty and a workflow warning says why.

    Raises:
        ApplicationError: non-retryable SEARCH_FAILED naming the workspace when no worker
            answered the catalogue (nothing serves the workspace): the workflow fails with
            the cause instead of running an agent without its tools.
    """
    return [_function_tool(tools, catalogue, spec) for spec in offered_specs(tools, catalogue)]


def instructions(catalogue: ToolsResult) -> str:
    """The catalogue's system prompt segments, one paragraph each, for ``Agent.instructions``."""
    return _tools.instructions(catalogue)


def _function_tool(tools: FsSearchTools, catalogue: ToolsResult, spec: ToolSpec) -> FunctionTool:
    return FunctionTool(
        name=spec.name,
        description=spec.description,
        params_json_schema=copy.deepcopy(spec.input_schema),
        on_invoke_tool=_invoker(tools, catalogue, spec.name),
        strict_json_schema=False,
    )


def _invoker(
    tools: FsSearchTools, catalogue: ToolsResult, name: str
) -> Callable[[RunContextWrapper[Any], str], Awaitable[str]]:
    async def invoke(context: RunContextWrapper[Any], arguments: str) -> str:
        # Runs in workflow code: FsSearchTools schedules the search on the workspace's
        # queue and turns every failure into Error: text (a cancelled workflow re-raises).
        # Any arguments the model sends (not JSON, not an object, a number too long to
        # read, nesting too deep) are Error: text too, never an exception that would fail
        # the workflow task on every retry.
        parsed = parse_arguments(arguments)
        if isinstance(parsed, ToolResult):
            return parsed.text
        return (await tools.call(name, parsed, catalogue=catalogue)).text

    return invoke


__all__ = ["function_tools", "instructions"]
