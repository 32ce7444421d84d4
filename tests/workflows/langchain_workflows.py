"""A LangGraph agent workflow, written as a user would: a model node (an activity), a tools node
in the workflow building its ToolNode from the run's context."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.runtime import Runtime
from pydantic import BaseModel
from temporalio import workflow
from temporalio.langgraph import graph

from fs_search.workflows import FsSearchTools
from fs_search.workflows.langchain import (
    SearchContext,
    from_context,
    instructions,
    search_context,
    structured_tools,
)

GRAPH = "fs-search-agent"

# The chat model a model node uses, by name (the tests register scripted ones).
MODELS: dict[str, Callable[[], BaseChatModel]] = {}


class AgentState(MessagesState):
    model: str


async def agent(state: AgentState, runtime: Runtime[SearchContext]) -> dict[str, Any]:
    """The model's turn (an activity): the catalogue's tools bound, its instructions first."""
    tools, catalogue = from_context(runtime.context)
    model = MODELS[state["model"]]().bind_tools(structured_tools(tools, catalogue))
    reply = await model.ainvoke([SystemMessage(instructions(catalogue)), *state["messages"]])
    return {"messages": [reply]}


async def search(state: AgentState, runtime: Runtime[SearchContext]) -> dict[str, Any]:
    """The tool calls (in the workflow): each an fs-search activity on the workspace's queue.
    The ToolNode hands any tool exception to the model, as many apps set it: a cancelled
    search must still end the run."""
    tools, catalogue = from_context(runtime.context)
    node = ToolNode(structured_tools(tools, catalogue), handle_tool_errors=True)
    return await node.ainvoke(state)


async def route(state: AgentState) -> str:
    """To the tools while the model calls some, else the end (async: a workflow runs no
    executor, and LangGraph runs a sync route function in one, as ``tools_condition``)."""
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def search_graph() -> StateGraph[Any, Any, Any, Any]:
    """A new builder each time: LangGraphPlugin wraps the nodes of the graphs it is given."""
    builder = StateGraph(AgentState, context_schema=SearchContext)
    builder.add_node(
        "agent",
        agent,
        metadata={"execute_in": "activity", "start_to_close_timeout": timedelta(seconds=60)},
    )
    builder.add_node("tools", search, metadata={"execute_in": "workflow"})
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder


class GraphRun(BaseModel):
    workspace_id: str
    prompt: str
    model: str
    schedule_to_start_s: float = 10.0


class GraphReply(BaseModel):
    """The agent's answer, and every ToolMessage's text and status."""

    answer: str
    tool_outputs: list[str]
    statuses: list[str]


@workflow.defn
class LangGraphSearchAgent:
    @workflow.run
    async def run(self, job: GraphRun) -> GraphReply:
        tools = FsSearchTools(
            job.workspace_id,
            schedule_to_start_timeout=timedelta(seconds=job.schedule_to_start_s),
        )
        catalogue = await tools.catalogue()
        out = await (
            graph(GRAPH)
            .compile()
            .ainvoke(
                {"messages": [HumanMessage(job.prompt)], "model": job.model},
                context=search_context(tools, catalogue),
            )
        )
        messages = out["messages"]
        results = [m for m in messages if isinstance(m, ToolMessage)]
        last = messages[-1]
        return GraphReply(
            answer=str(last.content) if isinstance(last, AIMessage) else "",
            tool_outputs=[str(m.content) for m in results],
            statuses=[m.status for m in results],
        )
