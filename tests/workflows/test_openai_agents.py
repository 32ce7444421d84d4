"""fs-search inside an OpenAI Agents SDK agent made durable by Temporal's OpenAIAgentsPlugin.

Real dev server, our real search activities on the workspace's queue, real rg; the model is
the plugin's own ``TestModel`` answering with ``ResponseBuilders`` turns.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.openai_agents.testing import AgentEnvironment, ResponseBuilders, TestModel
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from fs_search.activities.catalogue import GLOB_PROMPT_HEAD, GREP_PROMPT
from fs_search.worker.app import new_worker
from fs_search.workflows import FsSearchPlugin
from tests.helpers import write_tree
from tests.workflows.openai_agents_workflows import AgentOutcome, AgentRun, OpenAISearchAgent

pytest.importorskip("agents")


def _calls(*calls: tuple[str, dict]) -> TestModel:
    """A model that makes the given tool calls, one per turn, then answers "done"."""
    turns = [
        ResponseBuilders.tool_call(json.dumps(args), name, call_id=f"call-{i}", item_id=f"item-{i}")
        for i, (name, args) in enumerate(calls)
    ]
    return TestModel.returning_responses([*turns, ResponseBuilders.output_message("done")])


async def _agent_client(client: Client, agents_env: AgentEnvironment, payload_dir: Path) -> Client:
    """A client for the agent's worker: OpenAIAgentsPlugin first (it insists on its own
    payload converter), then FsSearchPlugin (which keeps that pydantic-aware converter)."""
    return await Client.connect(
        client.service_client.config.target_host,
        namespace=client.namespace,
        plugins=[
            agents_env.openai_agents_plugin,
            FsSearchPlugin(spill_url=f"file://{payload_dir}", getenv=lambda _: None),
        ],
    )


async def _run(
    client, payload_dir: Path, model: TestModel, job: AgentRun, *, runner=None
) -> AgentOutcome:
    queue = f"agents-{uuid.uuid4()}"
    async with AgentEnvironment(model=model) as agents_env:
        agent_client = await _agent_client(client, agents_env, payload_dir)
        kwargs = {"workflow_runner": runner} if runner else {}
        async with Worker(agent_client, task_queue=queue, workflows=[OpenAISearchAgent], **kwargs):
            return await agent_client.execute_workflow(
                OpenAISearchAgent.run, job, id=f"wf-{uuid.uuid4()}", task_queue=queue
            )


@pytest.mark.parametrize("sandboxed", [True, False], ids=["sandboxed", "unsandboxed"])
async def test_grep_turn_reads_our_text_and_errors_keep_the_run_going(
    dev_env, payload_dir, make_activities, tmp_path: Path, sandboxed: bool
):
    """A grep turn gets the rendered matches; an invalid pattern comes back as Error: text and
    the run continues to the model's answer."""
    ws = write_tree(tmp_path / "ws", {"a.py": "needle = 1\n", "b/c.py": "x\n"})
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws)
    model = _calls(("grep", {"pattern": "needle"}), ("grep", {"pattern": "("}))
    async with new_worker(dev_env.client, acts, workspace_id=wsid):
        out = await _run(
            dev_env.client,
            payload_dir,
            model,
            AgentRun(workspace_id=wsid, prompt="find the needle"),
            runner=None if sandboxed else UnsandboxedWorkflowRunner(),
        )
    assert out.tool_outputs[0] == "a.py:\n  Line 1: needle = 1"
    assert out.tool_outputs[1].startswith("Error: ") and "regex" in out.tool_outputs[1]
    assert out.final_output == "done"
    assert [t["name"] for t in out.tools] == ["glob", "grep"]
    assert out.instructions == f"{GLOB_PROMPT_HEAD}\n\n{GREP_PROMPT}"
