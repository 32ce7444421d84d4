"""A Strands agent workflow, written as a user would: fs-search's tools in two lines."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel
from temporalio import workflow
from temporalio.strands_agents import TemporalAgent

from fs_search.workflows import FsSearchTools
from fs_search.workflows.strands import agent_tools, instructions


class StrandsRun(BaseModel):
    workspace_id: str
    prompt: str
    model: str
    schedule_to_start_s: float = 10.0


class StrandsReply(BaseModel):
    """The agent's answer, and the text of every tool result the model was sent back."""

    answer: str
    tool_outputs: list[str]
    statuses: list[str]


@workflow.defn
class StrandsSearchAgent:
    """A TemporalAgent over a workspace: tools and instructions from the worker's catalogue,
    its model calls activities, its tools run here."""

    @workflow.run
    async def run(self, job: StrandsRun) -> StrandsReply:
        tools = FsSearchTools(
            job.workspace_id,
            schedule_to_start_timeout=timedelta(seconds=job.schedule_to_start_s),
        )
        catalogue = await tools.catalogue()
        agent = TemporalAgent(
            model=job.model,
            start_to_close_timeout=timedelta(seconds=60),
            system_prompt=instructions(catalogue),
            tools=agent_tools(tools, catalogue),
        )
        result = await agent.invoke_async(job.prompt)
        outputs, statuses = [], []
        for message in agent.messages:
            for block in message["content"]:
                if "toolResult" in block:
                    sent = block["toolResult"]
                    outputs.append("".join(c.get("text", "") for c in sent["content"]))
                    statuses.append(sent["status"])
        return StrandsReply(answer=str(result).strip(), tool_outputs=outputs, statuses=statuses)
