"""An example agent workflow: offer the catalogue, then run the model's tool calls by name.

Not part of the installed package: copy it. Run by ``tests/examples/test_agent.py``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field
from temporalio import workflow
from temporalio.client import Client, WorkflowHandle

with workflow.unsafe.imports_passed_through():
    from fs_search.workflows import FsSearchTools, ToolResult, ToolsResult


class ToolCall(BaseModel):
    """A tool call as a model emits it: a tool name and its JSON arguments."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class AgentInput(BaseModel):
    """The agent session: its workspace, working directory, and the calls to run."""

    workspace_id: str
    cwd: str | None = None
    calls: list[ToolCall] = Field(default_factory=list)


class AgentOutput(BaseModel):
    """What the model was offered and what each call returned, in order."""

    catalogue: ToolsResult
    results: list[ToolResult]


@workflow.defn(name="fs_search.ExampleAgent")
class ExampleAgentWorkflow:
    """A stand-in for an agent loop: a real one would ask a model for the next call.

    The catalogue's tools and system prompt segments are what a model would be shown;
    each call's ``text`` is what it would read back. Calls are dispatched against that
    catalogue: a tool it does not offer (read_spill with a ``file://`` store) is ``Error:``
    text.
    """

    @workflow.run
    async def run(self, session: AgentInput) -> AgentOutput:
        """Run every call of the session in order."""
        tools = FsSearchTools(session.workspace_id, cwd=session.cwd)
        catalogue = await tools.catalogue()
        results = []
        for number, call in enumerate(session.calls, start=1):
            # Shown as "current details" in the Temporal UI while the session runs.
            workflow.set_current_details(f"tool call {number} of {len(session.calls)}: {call.name}")
            results.append(await tools.call(call.name, call.arguments, catalogue=catalogue))
        workflow.set_current_details(f"done: {len(results)} tool calls")
        return AgentOutput(catalogue=catalogue, results=results)


async def start_example_agent(
    client: Client, session: AgentInput, *, id: str, task_queue: str
) -> WorkflowHandle[Any, AgentOutput]:
    """Start the example agent with a static summary for the Temporal UI."""
    return await client.start_workflow(
        ExampleAgentWorkflow.run,
        session,
        id=id,
        task_queue=task_queue,
        static_summary=(
            f"example agent: {len(session.calls)} tool calls on workspace {session.workspace_id}"
        )[:200],
    )
