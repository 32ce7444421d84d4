"""An agent-harness session agent, written as a user would: fs-search's tools in one line,
through the harness's OpenAI Agents adapter."""

from __future__ import annotations

from datetime import timedelta

from agents import Agent, Runner
from pydantic import BaseModel
from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream

from fs_search.workflows import FsSearchTools

with workflow.unsafe.imports_passed_through():
    from temporal_agent_harness.ai_sdks.openai_agents_harness import as_openai_agent_tools
    from temporal_agent_harness.harness import AgentWorkflowRunner, agent
    from temporal_agent_harness.harness.agent_protocol import (
        AgentConfig,
        MidTurn,
        TextMessage,
        ToolApprovalPolicy,
    )

    from fs_search.workflows.agent_harness import harness_tools, instructions


class SearchReply(BaseModel):
    """The model's answer, and what it was sent back for each tool call."""

    text: str
    tool_outputs: list[str]


class SearchSession(BaseModel):
    """The session's init data: which workspace its searches run on."""

    workspace_id: str
    schedule_to_start_s: float = 10.0


@agent.defn
class HarnessSearchAgent:
    """A session agent over a workspace: read-only searches run without approval."""

    @agent.init
    def __init__(self, config: AgentConfig, data: SearchSession) -> None:
        self._runner = AgentWorkflowRunner(
            config,
            stream=WorkflowStream(),
            approval_policy_default=ToolApprovalPolicy.allow_inherently_safe(),
        )
        self._fs = FsSearchTools(
            data.workspace_id,
            schedule_to_start_timeout=timedelta(seconds=data.schedule_to_start_s),
        )

    @agent.accepts(mid_turn=MidTurn.ENQUEUE)
    async def ask(self, message: TextMessage) -> SearchReply:
        """Answer a question about the workspace."""
        catalogue = await self._fs.catalogue()
        sdk_agent = Agent(
            name="searcher",
            instructions=instructions(catalogue),
            tools=as_openai_agent_tools(
                self._runner, harness_tools(self._fs, catalogue), strict_json_schema=False
            ),
        )
        result = await Runner.run(sdk_agent, message.text)
        outputs = [
            str(item["output"])
            for item in result.to_input_list()
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]
        return SearchReply(text=str(result.final_output), tool_outputs=outputs)
