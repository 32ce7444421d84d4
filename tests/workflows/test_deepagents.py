"""fs-search's glob and grep in a Deep Agent made durable by ``temporalio.deepagents``, in place
of Deep Agents' own (which read files in Python or run rg without caps, spills, heartbeats or
confinement).

Real dev server, our real search activities on the workspace's queue, real rg; the model is the
integration's own offline ``FakeModel`` (``temporalio.deepagents.testing``) behind its model
activity, recording the tools it is bound.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.deepagents import DeepAgentsPlugin
from temporalio.deepagents.testing import FakeModel
from temporalio.worker import Worker

from fs_search.worker import new_worker
from fs_search.workflows import task_queue_for
from tests.helpers import sparse_file, write_tree
from tests.workflows.agent_frameworks import (
    cancel_while_rg_runs,
    scheduled_activities,
)
from tests.workflows.deepagents_workflows import DeepRun, DeepSearchAgent


def _call(name: str, args: dict[str, Any], n: int) -> AIMessage:
    return AIMessage(
        content="", tool_calls=[{"name": name, "args": args, "id": f"c{n}", "type": "tool_call"}]
    )


class Provider:
    """Hands out the scripted replies one model call at a time (the model activity builds a
    model per call) and records the tools each call was bound."""

    def __init__(self, *replies: AIMessage | str) -> None:
        self.replies = list(replies)
        self.bound: list[list[Any]] = []

    def __call__(self, _name: str) -> FakeModel:
        provider = self

        class Recording(FakeModel):
            def bind_tools(self, tools: Any, **kwargs: Any) -> FakeModel:
                provider.bound.append(list(tools))
                return self

        return Recording([self.replies[len(self.bound)]])


def _agent_worker(client: Client, queue: str, provider: Provider) -> Worker:
    return Worker(
        client,
        task_queue=queue,
        workflows=[DeepSearchAgent],
        plugins=[DeepAgentsPlugin(model_provider=provider)],
    )


async def test_our_glob_and_grep_replace_the_deep_agents_own(
    dev_env, make_activities, tmp_path: Path
):
    """The model is bound our glob and grep (the catalogue's descriptions) in place of Deep
    Agents' built-in ones; a grep reads our rendered matches from fs-search's activity on the
    workspace's queue; an invalid regex reads Error: text with status error and the run goes
    on to the answer, as does an argument outside the schema (nothing scheduled for it)."""
    ws = write_tree(tmp_path / "ws", {"a.py": "needle = 1\n"})
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws)
    provider = Provider(
        _call("grep", {"pattern": "needle"}, 1),
        _call("grep", {"pattern": "("}, 2),
        _call("grep", {"pattern": "x", "cwd": "/etc"}, 3),
        "in a.py",
    )
    queue = f"agents-{uuid.uuid4()}"
    async with (
        new_worker(dev_env.client, acts, workspace_id=wsid),
        _agent_worker(dev_env.client, queue, provider),
    ):
        handle = await dev_env.client.start_workflow(
            DeepSearchAgent.run,
            DeepRun(workspace_id=wsid, prompt="where is needle?"),
            id=f"wf-{uuid.uuid4()}",
            task_queue=queue,
        )
        reply = await asyncio.wait_for(handle.result(), 120)
        scheduled = await scheduled_activities(handle)
    assert reply.answer == "in a.py"
    assert reply.tool_outputs[0] == "a.py:\n  Line 1: needle = 1"
    assert reply.tool_outputs[1].startswith("Error: ")
    assert reply.tool_outputs[2].startswith("Error: ") and "cwd" in reply.tool_outputs[2]
    assert reply.statuses == ["success", "error", "error"]
    catalogue = await acts.tools()
    ours = {s.name: s.description for s in catalogue.tools}
    # The model activity is handed the tools as their schemas.
    schemas = [convert_to_openai_tool(t)["function"] for t in provider.bound[0]]
    bound = {f["name"]: f.get("description") for f in schemas}
    assert [f["name"] for f in schemas].count("grep") == 1
    assert bound["glob"] == ours["glob"] and bound["grep"] == ours["grep"]
    searches = [a for a in scheduled if a[0].startswith("fs_search.")]
    assert (
        searches
        == [("fs_search.tools", task_queue_for(wsid))]
        + [("fs_search.grep", task_queue_for(wsid))] * 2
    )


async def test_cancelling_the_deep_agent_kills_rg(dev_env, make_activities, tmp_path: Path):
    """Cancelling the agent's workflow mid-grep closes it as cancelled with rg dead, and the
    model is not called again."""
    ws = tmp_path / "ws"
    sparse_file(ws / "huge.bin")
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws)
    provider = Provider(_call("grep", {"pattern": "needle", "path": "huge.bin"}, 1), "again")
    queue = f"agents-{uuid.uuid4()}"
    async with (
        new_worker(dev_env.client, acts, workspace_id=wsid),
        _agent_worker(dev_env.client, queue, provider),
    ):
        handle = await dev_env.client.start_workflow(
            DeepSearchAgent.run,
            DeepRun(workspace_id=wsid, prompt="search it"),
            id=f"wf-{uuid.uuid4()}",
            task_queue=queue,
        )
        events = await cancel_while_rg_runs(handle, acts)
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in events
    assert len(provider.bound) == 1
