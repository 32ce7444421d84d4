"""pydantic-ai agent workflows, written as a user would: fs-search's tools in one line.

The model is pydantic-ai's own ``FunctionModel`` running a script: the prompt is a JSON list
of ``[tool, arguments]`` calls, made one per turn (a ``"$locator"`` argument is the spill
locator of the previous result; arguments given as a string are sent as that raw text, as a
model's JSON is); its answer is a JSON report of what it
was offered and of every tool return it was sent, so a test sees exactly what the model read.
"""

from __future__ import annotations

import json
import re
import warnings
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.durable_exec.temporal import TemporalAgent, TemporalDurability
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from temporalio import workflow

from fs_search.workflows import FsSearchTools
from fs_search.workflows.pydantic_ai import toolset


class AgentRun(BaseModel):
    workspace_id: str
    calls: list[tuple[str, dict[str, Any] | str]]
    timeout_ms: int = 30_000
    host: str | None = None
    schedule_to_start_s: float = 10.0
    endpoint: str | None = None


class AgentOutcome(BaseModel):
    """What the model was offered and sent back for each call, and its instructions."""

    tools: list[dict[str, Any]]
    instructions: str | None
    tool_outputs: list[str]


# A spill locator in a result's footer ("... saved to: s3://...").
LOCATOR = re.compile(r"to: (s3://\S+)")


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Make the prompt's calls one per turn, then report what came back.

    A ``"$locator"`` argument is replaced by the spill locator of the previous result."""
    prompt = next(
        part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if part.part_kind == "user-prompt"
    )
    calls = json.loads(str(prompt))
    returns = [
        part.model_response() if isinstance(part, RetryPromptPart) else str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart | RetryPromptPart)
    ]
    if len(returns) < len(calls):
        name, args = calls[len(returns)]
        if isinstance(args, dict) and args.get("locator") == "$locator":
            # the locator the last result saved to
            args = {**args, "locator": LOCATOR.findall(returns[-1])[-1]}
        return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"call-{len(returns)}")])
    report = AgentOutcome(
        tools=[
            {"name": t.name, "description": t.description, "schema": t.parameters_json_schema}
            for t in info.function_tools
        ],
        instructions=info.instructions,
        tool_outputs=returns,
    )
    return ModelResponse(parts=[TextPart(report.model_dump_json())])


# Agents are built outside workflow code (their activities are registered with the worker).
durable_agent = Agent(
    FunctionModel(scripted),
    name="fs_search_durable",
    capabilities=[TemporalDurability()],
)
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="`TemporalAgent` is deprecated")
    legacy_agent = TemporalAgent(Agent(FunctionModel(scripted), name="fs_search_legacy"))


def _tools(job: AgentRun) -> FsSearchTools:
    return FsSearchTools(
        job.workspace_id,
        timeout_ms=job.timeout_ms,
        schedule_to_start_timeout=timedelta(seconds=job.schedule_to_start_s),
        host=job.host,
        endpoint=job.endpoint,
    )


@workflow.defn
class DurableSearchAgent:
    """An agent with the TemporalDurability capability over a workspace."""

    __pydantic_ai_agents__ = [durable_agent]

    @workflow.run
    async def run(self, job: AgentRun) -> AgentOutcome:
        tools = _tools(job)
        catalogue = await tools.catalogue()
        result = await durable_agent.run(
            json.dumps(job.calls), toolsets=[toolset(tools, catalogue)]
        )
        return AgentOutcome.model_validate_json(result.output)


@workflow.defn
class LegacySearchAgent:
    """The same with the deprecated TemporalAgent wrapper."""

    __pydantic_ai_agents__ = [legacy_agent]

    @workflow.run
    async def run(self, job: AgentRun) -> AgentOutcome:
        tools = _tools(job)
        catalogue = await tools.catalogue()
        result = await legacy_agent.run(json.dumps(job.calls), toolsets=[toolset(tools, catalogue)])
        return AgentOutcome.model_validate_json(result.output)
