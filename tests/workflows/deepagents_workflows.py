"""A Deep Agent workflow, written as a user would: fs-search's glob and grep in place of Deep
Agents' own (a tool passed by the same name replaces the built-in one)."""

from __future__ import annotations

from datetime import timedelta

from langchain_core.messages import ToolMessage
from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from temporalio.deepagents import create_temporal_deep_agent

from fs_search.workflows import FsSearchTools
from fs_search.workflows.langchain import instructions, structured_tools


class DeepRun(BaseModel):
    workspace_id: str
    prompt: str
    schedule_to_start_s: float = 10.0


class DeepReply(BaseModel):
    answer: str
    tool_outputs: list[str]
    statuses: list[str]


@workflow.defn
class DeepSearchAgent:
    @workflow.run
    async def run(self, job: DeepRun) -> DeepReply:
        tools = FsSearchTools(
            job.workspace_id,
            schedule_to_start_timeout=timedelta(seconds=job.schedule_to_start_s),
        )
        catalogue = await tools.catalogue()
        agent = create_temporal_deep_agent(
            "scripted",
            tools=structured_tools(tools, catalogue),
            system_prompt=instructions(catalogue),
            activity_options={"start_to_close_timeout": timedelta(seconds=60)},
        )
        out = await agent.ainvoke({"messages": [{"role": "user", "content": job.prompt}]})
        messages = out["messages"]
        results = [m for m in messages if isinstance(m, ToolMessage)]
        return DeepReply(
            answer=str(messages[-1].content),
            tool_outputs=[str(m.content) for m in results],
            statuses=[m.status for m in results],
        )
