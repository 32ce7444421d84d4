"""An OpenAI Agents SDK agent workflow, written as a user would: fs-search's tools in one line."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from agents import Agent, Runner
from pydantic import BaseModel
from temporalio import workflow

from fs_search.workflows import FsSearchTools
from fs_search.workflows.openai_agents import function_tools, instructions


class AgentRun(BaseModel):
    workspace_id: str
    prompt: str
    timeout_ms: int = 30_000
    host: str | None = None
    schedule_to_start_s: float = 10.0
    endpoint: str | None = None


class AgentOutcome(BaseModel):
    """What the agent offered, what the model was sent back for each call, and its answer."""

    tools: list[dict[str, Any]]
    instructions: str
    tool_outputs: list[str]
    final_output: str


@workflow.defn
class OpenAISearchAgent:
    """An agent over a workspace: tools and instructions from the worker's catalogue."""

    @workflow.run
    async def run(self, job: AgentRun) -> AgentOutcome:
        tools = FsSearchTools(
            job.workspace_id,
            timeout_ms=job.timeout_ms,
            schedule_to_start_timeout=timedelta(seconds=job.schedule_to_start_s),
            host=job.host,
            endpoint=job.endpoint,
        )
        catalogue = await tools.catalogue()
        agent = Agent(
            name="searcher",
            instructions=instructions(catalogue),
            tools=function_tools(tools, catalogue),
        )
        result = await Runner.run(agent, job.prompt)
        # What the next model turn is sent: the tool outputs as the model reads them.
        outputs = [
            item["output"]
            for item in result.to_input_list()
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]
        return AgentOutcome(
            tools=[
                {"name": t.name, "description": t.description, "schema": t.params_json_schema}
                for t in agent.tools
                if hasattr(t, "params_json_schema")
            ],
            instructions=str(agent.instructions),
            tool_outputs=[str(o) for o in outputs],
            final_output=str(result.final_output),
        )
