"""fs-search's tools as agent-harness tools, through the harness's OpenAI Agents adapter.

Real dev server, our real search activities on the workspace's queue, real rg; the model is
``temporalio.openai_agents``' ``TestModel`` (recording what it is offered); the session is
driven as the harness's clients drive it (``AgentClient``: an update per message, the turn's
events streamed back).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from agents import ModelResponse
from pydantic_ai import Tool
from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
from temporal_agent_harness.ai_sdks.pydantic_ai_harness import as_pydantic_ai_tools
from temporal_agent_harness.harness.agent_client import AgentClient, AgentTurnError
from temporal_agent_harness.harness.agent_protocol import AgentConfig, AgentEvent, AgentEventType
from temporal_agent_harness.plugin import AgentHarnessPlugin
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.openai_agents.testing import AgentEnvironment, ResponseBuilders, TestModel
from temporalio.worker import Worker

from fs_search.activities._catalogue import GLOB_PROMPT_HEAD, GREP_PROMPT
from fs_search.worker import new_worker
from fs_search.workflows import FsSearchPlugin, FsSearchTools, ToolsResult, task_queue_for
from fs_search.workflows.agent_harness import harness_tools, instructions
from tests.helpers import sparse_file, write_tree
from tests.procs import alive, group
from tests.workflows.agent_frameworks import gone_within, wait_for_rg
from tests.workflows.agent_harness_pydantic_workflows import HarnessPydanticSearchAgent
from tests.workflows.agent_harness_workflows import HarnessSearchAgent, SearchSession
from tests.workflows.canned import catalogue as canned_catalogue

# FsSearchTools' default heartbeat timeout.
HEARTBEAT_TIMEOUT_S = 5


class ScriptedModel(TestModel):
    """Makes the given tool calls, one per turn, then answers "done"; records the tools and
    instructions each request offered, and how many requests it served."""

    def __init__(self, *calls: tuple[str, dict[str, Any]]) -> None:
        turns = [
            ResponseBuilders.tool_call(
                json.dumps(args), name, call_id=f"call-{i}", item_id=f"item-{i}"
            )
            for i, (name, args) in enumerate(calls)
        ]
        script = iter([*turns, ResponseBuilders.output_message("done")])
        super().__init__(lambda: next(script))
        self.offered: list[dict[str, Any]] = []
        self.instructions: str | None = None
        self.requests = 0

    async def get_response(
        self, system_instructions, input, model_settings, tools, *args, **kwargs
    ) -> ModelResponse:  # type: ignore[override]
        self.requests += 1
        self.instructions = system_instructions
        self.offered = [
            {"name": t.name, "description": t.description, "schema": t.params_json_schema}
            for t in tools
        ]
        return await super().get_response(
            system_instructions, input, model_settings, tools, *args, **kwargs
        )


async def _client(client: Client, agents_env: AgentEnvironment, payload_dir: Path) -> Client:
    """The agent worker's client: the SDK's plugin first, FsSearchPlugin, the harness last."""
    return await Client.connect(
        client.service_client.config.target_host,
        namespace=client.namespace,
        plugins=[
            agents_env.openai_agents_plugin,
            FsSearchPlugin(spill_url=f"file://{payload_dir}", getenv=lambda _: None),
            AgentHarnessPlugin(),
        ],
    )


async def _start(client: Client, queue: str, session: SearchSession) -> AgentClient:
    wf_id = f"session-{uuid.uuid4()}"
    await client.start_workflow(
        HarnessSearchAgent.__name__, args=[AgentConfig(), session], id=wf_id, task_queue=queue
    )
    return AgentClient(client, wf_id)


async def _turn(
    client: Client, payload_dir: Path, model: ScriptedModel, session: SearchSession
) -> list[AgentEvent]:
    """One ``ask`` turn of a fresh session: the events it streamed."""
    queue = f"harness-{uuid.uuid4()}"
    async with AgentEnvironment(model=model) as agents_env:
        agent_client = await _client(client, agents_env, payload_dir)
        async with Worker(agent_client, task_queue=queue, workflows=[HarnessSearchAgent]):
            session_client = await _start(agent_client, queue, session)
            stream = await session_client.send_message(
                "ask", {"text": "find the needle"}, on_item=lambda item, _: item, timeout=90
            )
            return [item async for item in stream]  # type: ignore[misc]


def _of(events: list[AgentEvent], kind: AgentEventType) -> list[Any]:
    return [e.event for e in events if e.event.type == kind]


async def test_grep_then_glob_then_an_answer_as_harness_tools(
    dev_env, payload_dir, make_activities, tmp_path: Path
):
    """Under ``allow_inherently_safe()`` no approval is asked; each call has its tool_start /
    tool_end; the model is offered the catalogue's descriptions and reads our text, an
    invalid regex as Error: text, and the turn reaches its answer."""
    ws = write_tree(tmp_path / "ws", {"a.py": "needle = 1\n", "b/c.py": "x\n"})
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws)
    model = ScriptedModel(
        ("grep", {"pattern": "needle"}), ("grep", {"pattern": "("}), ("glob", {"pattern": "*.py"})
    )
    async with new_worker(dev_env.client, acts, workspace_id=wsid):
        events = await _turn(dev_env.client, payload_dir, model, SearchSession(workspace_id=wsid))

    assert not _of(events, AgentEventType.TOOL_APPROVAL_REQUESTED)
    starts = _of(events, AgentEventType.TOOL_START)
    ends = _of(events, AgentEventType.TOOL_END)
    assert [(s.tool_id, s.tool_name) for s in starts] == [
        ("call-0", "grep"),
        ("call-1", "grep"),
        ("call-2", "glob"),
    ]
    assert [e.tool_id for e in ends] == ["call-0", "call-1", "call-2"]
    assert starts[0].tool_input == {"pattern": "needle", "path": None, "include": None}
    [reply] = _of(events, AgentEventType.MESSAGE_HANDLER_END)
    found, bad, listed = reply.output["tool_outputs"]
    assert found == "a.py:\n  Line 1: needle = 1"
    assert bad.startswith("Error: invalid pattern") and "unclosed group" in bad
    assert listed.splitlines() == ["a.py", "b/c.py"]
    assert [e.tool_output for e in ends] == [found, bad, listed]
    assert reply.output["text"] == "done"
    assert model.requests == 4

    specs = {s.name: s for s in (await acts.tools()).tools}
    assert [t["name"] for t in model.offered] == ["glob", "grep"]
    for offered in model.offered:
        spec = specs[offered["name"]]
        assert offered["description"] == spec.description
        properties = offered["schema"]["properties"]
        assert {
            name: {k: v for k, v in p.items() if k != "title"} for name, p in properties.items()
        } == spec.input_schema["properties"]
    assert model.instructions == f"{GLOB_PROMPT_HEAD}\n\n{GREP_PROMPT}"


async def test_cancelling_the_session_kills_rg_and_asks_the_model_nothing_more(
    dev_env, payload_dir, make_activities, tmp_path: Path
):
    """Cancelling the agent's workflow mid-grep closes it as cancelled, rg's group dies, and
    the model is not called again (a cancelled search is no ``Tool failed`` result)."""
    ws = tmp_path / "ws"
    sparse_file(ws / "huge.bin")
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws)
    queue = f"harness-{uuid.uuid4()}"
    model = ScriptedModel(("grep", {"pattern": "needle", "path": "huge.bin"}))
    async with AgentEnvironment(model=model) as agents_env:
        client = await _client(dev_env.client, agents_env, payload_dir)
        async with (
            new_worker(dev_env.client, acts, workspace_id=wsid),
            Worker(client, task_queue=queue, workflows=[HarnessSearchAgent]),
        ):
            session = await _start(client, queue, SearchSession(workspace_id=wsid))
            await session.submit_message("ask", {"text": "search the huge file"})
            pgid = await wait_for_rg(acts)
            assert alive(group(pgid))
            handle = client.get_workflow_handle(session.workflow_id)
            await handle.cancel()
            await gone_within(pgid, timeout=HEARTBEAT_TIMEOUT_S + 3)
            for _ in range(100):
                described = await handle.describe()
                if described.status != WorkflowExecutionStatus.RUNNING:
                    break
                await asyncio.sleep(0.1)
            assert described.status == WorkflowExecutionStatus.CANCELED
    assert model.requests == 1


async def test_a_down_workspace_ends_the_turn_with_search_failed_naming_it(
    dev_env, payload_dir, tmp_path: Path
):
    """No worker serves the workspace: harness_tools raises the non-retryable SEARCH_FAILED
    naming it, which the harness reports as the turn's message_handler_error (the session
    stays open for the next turn); the model is never asked (a short schedule-to-start: a
    harness turn waits on updates and stream polls, where time skipping would not help)."""
    wsid = f"ws-down-{uuid.uuid4().hex[:8]}"
    model = ScriptedModel(("grep", {"pattern": "needle"}))
    items = await _turn(
        dev_env.client,
        payload_dir,
        model,
        SearchSession(workspace_id=wsid, schedule_to_start_s=1.0),
    )
    # AgentClient streams our message's message_handler_error as an AgentTurnError.
    [error] = [item for item in items if isinstance(item, AgentTurnError)]
    assert f"no fs-search worker is serving workspace {wsid!r}" in str(error), str(error)
    assert task_queue_for(wsid) in str(error)
    events = [item for item in items if not isinstance(item, AgentTurnError)]
    assert not _of(events, AgentEventType.MESSAGE_HANDLER_END)
    assert model.requests == 0


def test_through_the_pydantic_ai_adapter_the_schemas_are_the_catalogues():
    """One harness tool per entry, read_spill included; the harness's pydantic-ai adapter
    declares each with the catalogue's name, description and JSON schema."""
    catalogue = canned_catalogue()
    made = harness_tools(FsSearchTools("ws"), catalogue)
    assert [t.__name__ for t in made] == ["glob", "grep", "read_spill"]
    assert all(getattr(t, "__agent_tool__", False) for t in made)
    adapted: list[Tool[Any]] = as_pydantic_ai_tools(made)
    assert [(t.name, t.description, t.function_schema.json_schema) for t in adapted] == [
        (s.name, s.description, s.input_schema) for s in catalogue.tools
    ]
    assert instructions(catalogue) == "\n\n".join(catalogue.system_prompt)


def test_a_worker_without_rg_offers_nothing():
    unavailable = ToolsResult(
        available=False, reason="no rg", sample_over_cap_glob_results=False, timeout_ms=1
    )
    assert harness_tools(FsSearchTools("ws"), unavailable) == []


def test_the_core_import_does_not_need_the_extra():
    """`import fs_search.workflows` loads nothing of the harness."""
    code = (
        "import sys, fs_search.workflows\n"
        "print([m for m in sys.modules if m.split('.')[0] == 'temporal_agent_harness'])"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


def test_a_missing_harness_names_the_extra_to_install():
    code = (
        "import sys\n"
        "sys.modules['temporal_agent_harness'] = None\n"
        "try:\n"
        "    import fs_search.workflows.agent_harness\n"
        "except ModuleNotFoundError as e:\n"
        "    print(e.name); print(e)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    name, message = p.stdout.strip().split("\n", 1)
    assert name.startswith("temporal_agent_harness")
    assert message.startswith("fs_search.workflows.agent_harness needs the agent-harness extra")
    assert 'pip install "fs-search-temporal[agent-harness]"' in message


async def test_the_same_turn_through_the_pydantic_ai_adapter(
    dev_env, payload_dir, make_activities, tmp_path: Path
):
    """Through the harness's pydantic-ai adapter (a per-run toolset running in workflow code):
    the catalogue's schemas verbatim, no approval, tool events per call, Error: text read."""
    ws = write_tree(tmp_path / "ws", {"a.py": "needle = 1\n", "b/c.py": "x\n"})
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws)
    queue = f"harness-{uuid.uuid4()}"
    client = await Client.connect(
        dev_env.client.service_client.config.target_host,
        namespace=dev_env.client.namespace,
        plugins=[
            PydanticAIPlugin(),
            FsSearchPlugin(spill_url=f"file://{payload_dir}", getenv=lambda _: None),
            AgentHarnessPlugin(),
        ],
    )
    calls = [
        ["grep", {"pattern": "needle"}],
        ["grep", {"pattern": "("}],
        ["glob", {"pattern": "*.py"}],
    ]
    async with (
        new_worker(dev_env.client, acts, workspace_id=wsid),
        Worker(client, task_queue=queue, workflows=[HarnessPydanticSearchAgent]),
    ):
        wf_id = f"session-{uuid.uuid4()}"
        await client.start_workflow(
            HarnessPydanticSearchAgent.__name__,
            args=[AgentConfig(), SearchSession(workspace_id=wsid)],
            id=wf_id,
            task_queue=queue,
        )
        stream = await AgentClient(client, wf_id).send_message(
            "ask", {"calls": calls}, on_item=lambda item, _: item, timeout=90
        )
        events: list[AgentEvent] = [item async for item in stream]  # type: ignore[misc]

    assert not _of(events, AgentEventType.TOOL_APPROVAL_REQUESTED)
    assert [s.tool_name for s in _of(events, AgentEventType.TOOL_START)] == ["grep", "grep", "glob"]
    [reply] = _of(events, AgentEventType.MESSAGE_HANDLER_END)
    found, bad, listed = reply.output["tool_outputs"]
    assert found == "a.py:\n  Line 1: needle = 1"
    assert bad.startswith("Error: invalid pattern")
    assert listed.splitlines() == ["a.py", "b/c.py"]
    assert [e.tool_output for e in _of(events, AgentEventType.TOOL_END)] == [found, bad, listed]
    specs = (await acts.tools()).tools
    assert [(t["name"], t["description"], t["schema"]) for t in reply.output["tools"]] == [
        (s.name, s.description, s.input_schema) for s in specs
    ]
    assert reply.output["instructions"] == f"{GLOB_PROMPT_HEAD}\n\n{GREP_PROMPT}"
