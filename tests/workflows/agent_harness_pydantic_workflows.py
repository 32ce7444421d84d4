"""An agent-harness session agent whose turns run a pydantic-ai agent, written as a user
would: fs-search's tools in one line, through the harness's pydantic-ai adapter."""

from __future__ import annotations

import json

from pydantic import BaseModel
from pydantic_ai import Agent, FunctionToolset
from pydantic_ai.durable_exec.temporal import TemporalDurability
from pydantic_ai.models.function import FunctionModel
from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream

from fs_search.workflows import FsSearchTools
from tests.workflows.agent_harness_workflows import SearchSession
from tests.workflows.pydantic_ai_workflows import AgentOutcome, scripted

with workflow.unsafe.imports_passed_through():
    from temporal_agent_harness.ai_sdks.pydantic_ai_harness import HarnessDeps, as_pydantic_ai_tools
    from temporal_agent_harness.harness import AgentWorkflowRunner, agent
    from temporal_agent_harness.harness.agent_protocol import (
        AgentConfig,
        MidTurn,
        ToolApprovalPolicy,
    )

    from fs_search.workflows.agent_harness import harness_tools, instructions


# Built outside workflow code (its activities are registered with the worker). The model makes
# the calls its prompt lists (JSON), then reports what it was offered and sent back.
pydantic_searcher = Agent(
    FunctionModel(scripted),
    name="harness_searcher",
    deps_type=HarnessDeps,
    capabilities=[TemporalDurability()],
)


class ScriptedCalls(BaseModel):
    """The tool calls the scripted model makes, in order."""

    calls: list[tuple[str, dict]]


@agent.defn
class HarnessPydanticSearchAgent:
    """The same session agent with a pydantic-ai agent running the turn."""

    __pydantic_ai_agents__ = [pydantic_searcher]

    @agent.init
    def __init__(self, config: AgentConfig, data: SearchSession) -> None:
        self._runner = AgentWorkflowRunner(
            config,
            stream=WorkflowStream(),
            approval_policy_default=ToolApprovalPolicy.allow_inherently_safe(),
        )
        self._fs = FsSearchTools(data.workspace_id)

    @agent.accepts(mid_turn=MidTurn.ENQUEUE)
    async def ask(self, message: ScriptedCalls) -> AgentOutcome:
        """Make the scripted calls on the workspace."""
        catalogue = await self._fs.catalogue()
        # A per-run toolset of tools that run in workflow code ({"temporal": False}).
        tools = FunctionToolset(
            as_pydantic_ai_tools(harness_tools(self._fs, catalogue)),
            metadata={"temporal": False},
        )
        result = await pydantic_searcher.run(
            json.dumps(message.calls),
            toolsets=[tools],
            instructions=instructions(catalogue),
            deps=HarnessDeps(runner=self._runner),
        )
        return AgentOutcome.model_validate_json(result.output)
