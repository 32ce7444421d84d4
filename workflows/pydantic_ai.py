"""fs-search's tools for a pydantic-ai agent made durable with Temporal.

One line of glue in the agent's workflow::

    result = await agent.run(prompt, toolsets=[toolset(tools, catalogue)])

``toolset`` is a ``FunctionToolset`` with one async tool per catalogue entry (``glob``,
``grep``, ``read_spill`` when offered), the catalogue's prompt segments as its instructions,
and every tool marked ``metadata={"temporal": False}``: pydantic-ai's Temporal integration
(the ``TemporalDurability`` capability, or the deprecated ``TemporalAgent``) then runs the
tool *in the workflow* instead of in a tool activity of its own, and the tool calls
``FsSearchTools.call`` with the catalogue (so only the tools it offers are dispatched,
whatever ``tools`` fetched itself): the search is our activity on the workspace's queue
(``fs-search/<workspace_id>``), with FsSearchTools' options. The model reads the call's
``text``; a failed call, or arguments that are not a JSON object the tool accepts, reads
``Error: <message>`` (the run goes on); cancelling the workflow cancels the activity, and
pydantic-ai waits for the cancelled tool, so rg is dead when the workflow closes.

Because no tool of the set is an activity of the agent's, it may be passed per run
(pydantic-ai refuses per-run toolsets with activity-backed tools) and the worker registers
nothing for it: the agent's own registrations (``PydanticAIPlugin`` with
``__pydantic_ai_agents__``, or ``AgentPlugin(agent)``) and FsSearchPlugin on the client.

Needs the ``pydantic-ai`` extra (``pip install "fs-search-temporal[pydantic-ai]"``).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Literal

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from fs_search.workflows._adapter_kit import missing_extra

try:
    from pydantic_ai import FunctionToolset, RunContext, Tool, ToolFailed, ToolsetTool
    from pydantic_ai.toolsets import AbstractToolset, CombinedToolset
except ModuleNotFoundError as e:
    raise missing_extra(e, adapter=__name__, extra="pydantic-ai") from e

with workflow.unsafe.imports_passed_through():
    from fs_search.workflows import ToolResult, ToolSpec, ToolsResult
    from fs_search.workflows import _adapter_kit as kit
    from fs_search.workflows._adapter_kit import call_text, offered_specs
    from fs_search.workflows._arguments import object_arguments, parse_arguments
    from fs_search.workflows._tools import FsSearchTools

# pydantic-ai's Temporal integration reads this key of a tool's metadata: False runs the
# (async) tool in workflow code rather than in an activity of the agent's.
IN_WORKFLOW = {"temporal": False}


def toolset(
    tools: FsSearchTools, catalogue: ToolsResult, *, id: str = "fs_search"
) -> AbstractToolset[Any]:
    """The catalogue's tools as a pydantic-ai toolset, its prompt segments as instructions.

    A ``FunctionToolset`` (id ``id``). Names, descriptions and JSON schemas are the
    catalogue's, unchanged (so the worker's over-cap mode shows in glob's description).
    Arguments are checked by FsSearchTools (an invalid one is ``Error:`` text, not a
    pydantic-ai retry), and so are arguments that are not a JSON object at all (not JSON,
    an array, a number too long to read, nesting too deep): never an exception in workflow
    code. A worker without rg offers no tools: the toolset is empty (a ``CombinedToolset``
    of none, which pydantic-ai accepts per run where it refuses an empty
    ``FunctionToolset``) and a workflow warning says why.

    Raises:
        ApplicationError: non-retryable SEARCH_FAILED naming the workspace when no worker
            answered the catalogue (nothing serves the workspace): the workflow fails with
            the cause instead of running an agent without its tools.
    """
    specs = offered_specs(tools, catalogue)
    if not specs:
        return CombinedToolset([])
    return _Toolset(
        [_tool(tools, catalogue, spec) for spec in specs],
        id=id,
        instructions=instructions(catalogue) or None,
    )


def instructions(catalogue: ToolsResult) -> str:
    """The catalogue's system prompt segments, one paragraph each."""
    return kit.instructions(catalogue)


class _Arguments:
    """The argument validator of every tool here: the model's raw arguments to a dict.

    pydantic-ai validates a call's arguments with its tool's validator before calling the
    tool: ``validate_json`` for the JSON text a model sent, ``validate_python`` for a dict.
    ``Tool.from_schema``'s own validator accepts any JSON value and fails on text that is
    not JSON (a retry prompt, then a failed run), and the tool is then called with
    ``**value``, a TypeError for anything but an object. This one decodes as
    ``parse_arguments`` does and returns the object's fields; anything else raises
    ``ToolFailed``, which pydantic-ai sends the model as the tool's return, our ``Error:``
    text, without using up a retry. The fields are then checked by ``FsSearchTools.call``.
    """

    def validate_json(
        self,
        input: str | bytes | bytearray,
        *,
        allow_partial: bool | Literal["off", "on", "trailing-strings"] = False,
        **kwargs: Any,
    ) -> dict[str, Any]:
        return _fields(parse_arguments(input))

    def validate_python(
        self,
        input: Any,
        *,
        allow_partial: bool | Literal["off", "on", "trailing-strings"] = False,
        **kwargs: Any,
    ) -> dict[str, Any]:
        return _fields(object_arguments(input))


def _fields(parsed: dict[str, Any] | ToolResult) -> dict[str, Any]:
    if isinstance(parsed, ToolResult):
        raise ToolFailed(parsed.text)
    return parsed


_ARGUMENTS = _Arguments()


class _Toolset(FunctionToolset[Any]):
    """A ``FunctionToolset`` whose tools take any arguments through ``_Arguments``."""

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools = await super().get_tools(ctx)
        return {
            name: dataclasses.replace(tool, args_validator=_ARGUMENTS)
            for name, tool in tools.items()
        }


def _tool(tools: FsSearchTools, catalogue: ToolsResult, spec: ToolSpec) -> Tool[Any]:
    name = spec.name

    async def call(**arguments: Any) -> str:
        return await call_text(tools, name, arguments, catalogue=catalogue)

    tool: Tool[Any] = Tool.from_schema(
        call, name=name, description=spec.description, json_schema=copy.deepcopy(spec.input_schema)
    )
    tool.metadata = dict(IN_WORKFLOW)
    return tool


__all__ = ["instructions", "toolset"]
