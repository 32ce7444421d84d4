"""fs-search's tools for a pydantic-ai agent made durable with Temporal.

One line of glue in the agent's workflow::

    result = await agent.run(prompt, toolsets=[toolset(tools, catalogue)])

``toolset`` is a ``FunctionToolset`` with one async tool per catalogue entry (``glob``,
``grep``, ``read_spill`` when offered), the catalogue's prompt segments as its instructions,
and every tool marked ``metadata={"temporal": False}``: pydantic-ai's Temporal integration
(the ``TemporalDurability`` capability, or the deprecated ``TemporalAgent``) then runs the
tool *in the workflow* instead of in a tool activity of its own, and the tool calls
``FsSearchTools.call``: the search is our activity on the workspace's queue
(``fs-search/<workspace_id>``), with FsSearchTools' options. The model reads the call's
``text``; a failed call reads ``Error: <message>`` (the run goes on); cancelling the
workflow cancels the activity, and pydantic-ai waits for the cancelled tool, so rg is dead
when the workflow closes.

Because no tool of the set is an activity of the agent's, it may be passed per run
(pydantic-ai refuses per-run toolsets with activity-backed tools) and the worker registers
nothing for it: the agent's own registrations (``PydanticAIPlugin`` with
``__pydantic_ai_agents__``, or ``AgentPlugin(agent)``) and FsSearchPlugin on the client.

Needs the ``pydantic-ai`` extra (``pip install "fs-search[pydantic-ai]"``).
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic_ai import FunctionToolset, Tool
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from fs_search.activities.models import ToolSpec, ToolsResult
    from fs_search.workflows.tools import FsSearchTools

# pydantic-ai's Temporal integration reads this key of a tool's metadata: False runs the
# (async) tool in workflow code rather than in an activity of the agent's.
IN_WORKFLOW = {"temporal": False}


def toolset(
    tools: FsSearchTools, catalogue: ToolsResult, *, id: str = "fs_search"
) -> FunctionToolset[Any]:
    """The catalogue's tools as a pydantic-ai toolset, its prompt segments as instructions.

    Names, descriptions and JSON schemas are the catalogue's, unchanged (so the worker's
    over-cap mode shows in glob's description). Arguments are checked by FsSearchTools (an
    invalid one is ``Error:`` text, not a pydantic-ai retry). An unavailable catalogue gives
    an empty toolset.
    """
    return FunctionToolset(
        [_tool(tools, spec) for spec in catalogue.tools],
        id=id,
        instructions=instructions(catalogue) or None,
    )


def instructions(catalogue: ToolsResult) -> str:
    """The catalogue's system prompt segments, one paragraph each."""
    return "\n\n".join(catalogue.system_prompt)


def _tool(tools: FsSearchTools, spec: ToolSpec) -> Tool[Any]:
    name = spec.name

    async def call(**arguments: Any) -> str:
        # Runs in workflow code: FsSearchTools schedules the search on the workspace's
        # queue and turns every failure into Error: text (a cancelled workflow re-raises).
        return (await tools.call(name, arguments)).text

    tool: Tool[Any] = Tool.from_schema(
        call, name=name, description=spec.description, json_schema=copy.deepcopy(spec.input_schema)
    )
    tool.metadata = dict(IN_WORKFLOW)
    return tool


__all__ = ["instructions", "toolset"]
