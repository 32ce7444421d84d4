"""A model's deeply nested tool-call arguments under OpenAIAgentsPlugin (issue 34): the Agents
SDK (0.22.3) decodes them itself before any tool runs and raises RecursionError in the
workflow. Real dev server, our real activities and rg; the model is the plugin's TestModel.

Without a guard the workflow task fails on every retry (what remains upstream); with
``workflow_failure_exception_types=[RecursionError]`` the run fails at once; with
``fs_search.workflows.openai_agents.guarded`` around the model provider the run goes on and
the model reads ``Error:`` text.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.openai_agents.testing import (
    AgentEnvironment,
    ResponseBuilders,
    TestModel,
    TestModelProvider,
)
from temporalio.worker import Worker

from fs_search.worker import new_worker
from fs_search.workflows import FsSearchPlugin
from fs_search.workflows._arguments import nested_too_deeply
from fs_search.workflows.openai_agents import guarded
from tests.helpers import write_tree
from tests.workflows.openai_agents_workflows import AgentRun, OpenAISearchAgent

DEEP = '{"pattern": ' + "[" * 5000 + "]" * 5000 + "}"


def _model() -> TestModel:
    """A grep with arguments nested 5,000 deep, then a plain grep, then an answer."""
    return TestModel.returning_responses(
        [
            ResponseBuilders.tool_call(DEEP, "grep", call_id="call-0", item_id="item-0"),
            ResponseBuilders.tool_call(
                json.dumps({"pattern": "needle"}), "grep", call_id="call-1", item_id="item-1"
            ),
            ResponseBuilders.output_message("done"),
        ]
    )


async def _start(dev_env, payload_dir, acts, wsid, agents_env, **worker_options):
    client = await Client.connect(
        dev_env.client.service_client.config.target_host,
        namespace=dev_env.client.namespace,
        plugins=[
            agents_env.openai_agents_plugin,
            FsSearchPlugin(spill_url=f"file://{payload_dir}", getenv=lambda _: None),
        ],
    )
    queue = f"agents-{uuid.uuid4()}"
    return (
        client,
        queue,
        Worker(client, task_queue=queue, workflows=[OpenAISearchAgent], **worker_options),
    )


async def _task_failures(handle) -> list[str]:
    return [
        e.workflow_task_failed_event_attributes.failure.message
        async for e in handle.fetch_history_events()
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]


@pytest.fixture
async def served(make_activities, tmp_path: Path):
    ws = write_tree(tmp_path / "ws", {"a.py": "needle = 1\n"})
    return await make_activities(ws), f"ws-{uuid.uuid4()}"


async def test_without_a_guard_the_sdk_fails_the_workflow_task_on_every_retry(
    dev_env, payload_dir, served
):
    """What remains upstream: the SDK's RecursionError fails the task again and again."""
    acts, wsid = served
    async with AgentEnvironment(model=_model()) as agents_env:
        client, queue, worker = await _start(dev_env, payload_dir, acts, wsid, agents_env)
        async with new_worker(dev_env.client, acts, workspace_id=wsid), worker:
            handle = await client.start_workflow(
                OpenAISearchAgent.run,
                AgentRun(workspace_id=wsid, prompt="find it"),
                id=f"wf-{uuid.uuid4()}",
                task_queue=queue,
            )
            deadline = time.monotonic() + 60
            while len(failures := await _task_failures(handle)) < 2:
                assert time.monotonic() < deadline, "the workflow task never failed twice"
                await asyncio.sleep(0.5)
            await handle.terminate("the test saw the task fail repeatedly")
    assert all("recursion" in f.lower() for f in failures), failures


async def test_failure_exception_types_make_the_run_fail_at_once(dev_env, payload_dir, served):
    """The documented fallback: RecursionError a workflow failure type on the agent's worker."""
    acts, wsid = served
    async with AgentEnvironment(model=_model()) as agents_env:
        client, queue, worker = await _start(
            dev_env,
            payload_dir,
            acts,
            wsid,
            agents_env,
            workflow_failure_exception_types=[RecursionError],
        )
        async with new_worker(dev_env.client, acts, workspace_id=wsid), worker:
            with pytest.raises(WorkflowFailureError) as info:
                await client.execute_workflow(
                    OpenAISearchAgent.run,
                    AgentRun(workspace_id=wsid, prompt="find it"),
                    id=f"wf-{uuid.uuid4()}",
                    task_queue=queue,
                )
    assert "recursion" in str(info.value.cause).lower(), info.value.cause


async def test_the_guard_keeps_the_run_going_with_error_text(dev_env, payload_dir, served):
    """guarded(provider): the deep call reads Error: text, the next grep is served, the run
    answers."""
    acts, wsid = served
    provider = guarded(TestModelProvider(_model()))
    async with AgentEnvironment(model_provider=provider) as agents_env:
        client, queue, worker = await _start(dev_env, payload_dir, acts, wsid, agents_env)
        async with new_worker(dev_env.client, acts, workspace_id=wsid), worker:
            out = await client.execute_workflow(
                OpenAISearchAgent.run,
                AgentRun(workspace_id=wsid, prompt="find it"),
                id=f"wf-{uuid.uuid4()}",
                task_queue=queue,
            )
    assert out.tool_outputs == [
        "Error: the arguments are nested too deeply",
        "a.py:\n  Line 1: needle = 1",
    ]
    assert out.final_output == "done"


@pytest.mark.parametrize(
    ("text", "deep"),
    [
        ('{"a": 1}', False),
        ("[" * 100 + "]" * 100, False),
        ("[" * 101 + "]" * 101, True),
        ('{"p": "' + "[" * 500 + '"}', False),  # brackets inside a string do not nest
        ('{"p": "\\"' + "[" * 500 + '"}', False),  # nor after an escaped quote
        ("[" * 200, True),  # unbalanced counts too
        (DEEP, True),
    ],
)
def test_nesting_is_measured_without_recursion(text, deep):
    assert nested_too_deeply(text) is deep
