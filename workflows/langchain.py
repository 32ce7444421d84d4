"""fs-search's tools for LangChain and LangGraph made durable by ``temporalio.langgraph``.

``LangGraphPlugin`` takes the graphs when the worker starts, while the tools belong to one run's
workspace. So the graph's tools node runs in the workflow (``metadata={"execute_in":
"workflow"}``) and builds its ``ToolNode`` from the run's context, which carries the workspace
id and the catalogue the workflow fetched::

    async def search(state: MessagesState, runtime: Runtime[SearchContext]) -> dict:
        tools, catalogue = from_context(runtime.context)
        return await ToolNode(structured_tools(tools, catalogue)).ainvoke(state)

and the model node (an activity) binds the same tools' schemas::

    tools, catalogue = from_context(runtime.context)
    model = make_model().bind_tools(structured_tools(tools, catalogue))

The workflow passes ``context=search_context(tools, catalogue)`` to ``ainvoke``; that context is
plain JSON, so it crosses into the model activity as it is.

Each tool is a ``StructuredTool`` whose name, description and ``args_schema`` (a JSON schema)
are the catalogue's, verbatim; LangChain hands the model's arguments through unvalidated and
the tool calls ``FsSearchTools.call``, so the search is our activity on the workspace's queue
(``fs-search/<workspace_id>``). The model reads the call's text in a ``ToolMessage``; a failed
call reads ``Error: <message>`` there, with status ``error``, and the run goes on. A cancelled
workflow re-raises as ``asyncio.CancelledError``, which ``ToolNode`` does not catch even with
``handle_tool_errors=True``: the workflow closes as cancelled, rg dead, the model not called
again.

When no worker serves the workspace, ``search_context`` (and ``structured_tools``) raises a
non-retryable ``ApplicationError`` (``SEARCH_FAILED`` naming the workspace), as every
adapter does: the workflow fails with the cause before the graph runs without its tools.

Needs the ``langgraph`` extra (``pip install "fs-search-temporal[langgraph]"``).
"""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any, TypedDict

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from fs_search.workflows._adapter_kit import missing_extra

try:
    import langchain_core  # noqa: F401  (named first: a missing extra reads "langchain_core")
    from langchain_core.tools import BaseTool, StructuredTool, ToolException
except ModuleNotFoundError as e:
    raise missing_extra(e, adapter=__name__, extra="langgraph") from e

with workflow.unsafe.imports_passed_through():
    from fs_search.workflows import ToolSpec, ToolsResult
    from fs_search.workflows import _adapter_kit as kit
    from fs_search.workflows._adapter_kit import call_tool, offered_specs, raise_if_unserved
    from fs_search.workflows._tools import FsSearchTools


class SearchContext(TypedDict):
    """A graph run's fs-search context (``StateGraph(..., context_schema=SearchContext)``):
    plain JSON, so it crosses into activity nodes unchanged."""

    workspace_id: str
    catalogue: dict[str, Any]
    options: dict[str, Any]


# FsSearchTools' options that travel in the context (JSON: the timeouts as seconds).
_OPTIONS = ("cwd", "timeout_ms", "spill", "host", "task_queue")
_SECONDS = ("schedule_to_start_timeout", "start_to_close_timeout", "queue_timeout")


def search_context(tools: FsSearchTools, catalogue: ToolsResult) -> SearchContext:
    """The context to run a graph with: ``tools``' workspace and options (its queue, cwd,
    budget and timeouts), and ``catalogue``, as JSON.

    Raises:
        ApplicationError: non-retryable SEARCH_FAILED naming the workspace when no worker
            answered the catalogue (nothing serves the workspace): the workflow fails with
            the cause before the graph runs.
    """
    raise_if_unserved(tools, catalogue)
    options: dict[str, Any] = {name: getattr(tools, name) for name in _OPTIONS}
    for name in _SECONDS:
        wait = getattr(tools, name)
        options[name] = None if wait is None else wait.total_seconds()
    return {
        "workspace_id": tools.workspace_id,
        "catalogue": catalogue.model_dump(mode="json"),
        "options": options,
    }


def from_context(context: SearchContext) -> tuple[FsSearchTools, ToolsResult]:
    """The ``FsSearchTools`` and catalogue a node's ``runtime.context`` carries."""
    given = context.get("options") or {}
    options: dict[str, Any] = {name: given[name] for name in _OPTIONS if name in given}
    for name in _SECONDS:
        if given.get(name) is not None:
            options[name] = timedelta(seconds=given[name])
    tools = FsSearchTools(context["workspace_id"], **options)
    return tools, ToolsResult.model_validate(context["catalogue"])


def _tool(tools: FsSearchTools, catalogue: ToolsResult, entry: ToolSpec) -> BaseTool:
    name = entry.name

    async def run(**arguments: Any) -> str:
        # A cancelled workflow re-raises (ToolNode(handle_tool_errors=True) would hand an
        # Exception to the model and go on).
        result = await call_tool(tools, name, arguments, catalogue=catalogue)
        if result.error is not None:
            raise ToolException(result.text)  # a ToolMessage with status "error"
        return result.text

    return StructuredTool(
        name=name,
        description=entry.description,
        args_schema=copy.deepcopy(entry.input_schema),
        coroutine=run,
        handle_tool_error=True,
    )


def structured_tools(tools: FsSearchTools, catalogue: ToolsResult) -> list[BaseTool]:
    """One LangChain tool per catalogue entry (``glob``, ``grep``, ``read_spill`` when
    offered), for ``ToolNode(...)`` in a workflow-side node and ``model.bind_tools(...)``.

    Each carries the catalogue's name, description and JSON schema and returns the call's
    text; a failed call is a ``ToolMessage`` of ``Error: ...`` text with status ``error``. A
    worker without rg offers no tools: the list is empty and a workflow warning says why.

    Raises:
        ApplicationError: non-retryable SEARCH_FAILED naming the workspace when no worker
            answered the catalogue (nothing serves the workspace).
    """
    return [_tool(tools, catalogue, entry) for entry in offered_specs(tools, catalogue)]


def instructions(catalogue: ToolsResult) -> str:
    """The catalogue's system prompt segments, one paragraph each, for a ``SystemMessage``."""
    return kit.instructions(catalogue)


__all__ = [
    "SearchContext",
    "from_context",
    "instructions",
    "search_context",
    "structured_tools",
]
