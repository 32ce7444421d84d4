"""fs-search inside a Google ADK agent made durable by ``temporalio.google_adk``.

Real dev server, our real search activities on the workspace's queue, real rg. ADK has no
test model: ``ScriptedLlm`` below subclasses its ``BaseLlm`` and plays scripted turns. Under
Temporal the model is ``TemporalModel(<name>)`` in the workflow, and the integration's
``invoke_model`` activity builds the real model from ADK's ``LLMRegistry`` by that name on
every call, so the script is found by the model's name and the turn by the request's
history (how many model turns it holds): replay- and retry-safe, no state in an instance.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from google.adk.models import BaseLlm, LLMRegistry
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.google_adk import GoogleAdkPlugin
from temporalio.worker import Replayer, Worker

from fs_search.worker import new_worker
from fs_search.worker.testing import search_worker, time_skipping_env
from fs_search.workflows import ErrorCode, FsSearchTools, ToolError, task_queue_for
from fs_search.workflows.google_adk import FsSearchTool, function_tools, instructions
from tests.helpers import sparse_file, write_tree
from tests.workflows.agent_frameworks import (
    assert_grep_turn,
    assert_unserved,
    cancel_while_rg_runs,
    scheduled_activities,
)
from tests.workflows.argument_strategies import any_objects
from tests.workflows.canned import CannedTools
from tests.workflows.canned import catalogue as canned_catalogue
from tests.workflows.google_adk_workflows import AdkReply, AdkRun, AdkSearchAgent

MODEL_ACTIVITY = "invoke_model"


@dataclass
class Script:
    """The turns a scripted model plays, and every request it was sent."""

    turns: list[types.Part]
    requests: list[LlmRequest] = field(default_factory=list)


SCRIPTS: dict[str, Script] = {}


class ScriptedLlm(BaseLlm):
    """Plays ``SCRIPTS[model]``: turn n answers a request holding n model turns."""

    @classmethod
    def supported_models(cls) -> list[str]:
        # Narrow: ADK's registry is process-wide and the first pattern matching a name wins
        # (README's example registers "scripted-model" in the same test session).
        return [r"fs-search-scripted-[0-9a-f-]{36}"]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        script = SCRIPTS[self.model]
        script.requests.append(llm_request)
        turn = sum(1 for c in llm_request.contents if c.role == "model")
        yield LlmResponse(content=types.Content(role="model", parts=[script.turns[turn]]))


LLMRegistry.register(ScriptedLlm)


def scripted(*turns: types.Part) -> tuple[str, Script]:
    """A new model name and the script it plays."""
    name = f"fs-search-scripted-{uuid.uuid4()}"
    SCRIPTS[name] = Script(list(turns))
    return name, SCRIPTS[name]


def call(name: str, args: dict[str, Any]) -> types.Part:
    return types.Part(function_call=types.FunctionCall(name=name, args=args))


def text(answer: str) -> types.Part:
    return types.Part(text=answer)


def _declarations(request: LlmRequest) -> list[types.FunctionDeclaration]:
    return [d for tool in request.config.tools or [] for d in tool.function_declarations or []]  # type: ignore[union-attr]


def _agent_worker(client: Client, queue: str) -> Worker:
    return Worker(client, task_queue=queue, workflows=[AdkSearchAgent], plugins=[GoogleAdkPlugin()])


async def _start(client: Client, queue: str, job: AdkRun) -> WorkflowHandle[Any, AdkReply]:
    return await client.start_workflow(
        AdkSearchAgent.run, job, id=f"wf-{uuid.uuid4()}", task_queue=queue
    )


async def test_a_grep_turn_reads_our_text_and_errors_go_on(
    dev_env, make_activities, tmp_path: Path
):
    """Declarations carry the catalogue's names, descriptions and schemas; a grep reads our
    rendered matches, an invalid regex and an argument outside the schema read Error: text
    and the run goes on to the answer; every search is our activity on the workspace's
    queue, the model calls the integration's activity on the agent's."""
    ws = write_tree(tmp_path / "ws", {"a.py": "needle = 1\n", "b/c.txt": "x\n"})
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws)
    model, script = scripted(
        call("grep", {"pattern": "needle"}),
        call("grep", {"pattern": "("}),
        call("grep", {"pattern": "x", "cwd": "/etc"}),
        text("needle is in a.py"),
    )
    queue = f"agents-{uuid.uuid4()}"
    async with (
        new_worker(dev_env.client, acts, workspace_id=wsid),
        _agent_worker(dev_env.client, queue),
    ):
        handle = await _start(
            dev_env.client, queue, AdkRun(workspace_id=wsid, prompt="where is needle?", model=model)
        )
        reply = await handle.result()
        scheduled = await scheduled_activities(handle)
        history = await handle.fetch_history()
    assert reply.answer == "needle is in a.py"
    # ADK's run in the workflow replays deterministically (GoogleAdkPlugin's providers).
    replayed = await Replayer(
        workflows=[AdkSearchAgent],
        plugins=[GoogleAdkPlugin()],
        data_converter=dev_env.client.data_converter,
    ).replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None, replayed.replay_failure
    first = script.requests[0]
    out = SimpleNamespace(
        tool_outputs=reply.tool_outputs,
        tools=[{"name": d.name} for d in _declarations(first)],
    )
    assert_grep_turn(out, scheduled, task_queue_for(wsid))
    catalogue = await acts.tools()
    assert [(d.name, d.description, d.parameters_json_schema) for d in _declarations(first)] == [
        (s.name, s.description, s.input_schema) for s in catalogue.tools
    ]
    assert [a for a in scheduled if a[0] == MODEL_ACTIVITY] == [(MODEL_ACTIVITY, queue)] * 4
    # What the model itself was sent: the prompt segments, and our text as the grep's result.
    assert all(
        segment in str(first.config.system_instruction) for segment in catalogue.system_prompt
    )
    [grep] = script.requests[1].contents[-1].parts or []
    assert grep.function_response is not None
    assert grep.function_response.response == {"result": "a.py:\n  Line 1: needle = 1"}


async def test_cancelling_the_agent_workflow_kills_rg(dev_env, make_activities, tmp_path: Path):
    """Cancelling the agent's workflow mid-grep closes it as cancelled with rg dead, and the
    model is not called again."""
    ws = tmp_path / "ws"
    sparse_file(ws / "huge.bin")
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws)
    model, script = scripted(
        call("grep", {"pattern": "needle", "path": "huge.bin"}),
        text("the model was called again"),
    )
    queue = f"agents-{uuid.uuid4()}"
    async with (
        new_worker(dev_env.client, acts, workspace_id=wsid),
        _agent_worker(dev_env.client, queue),
    ):
        handle = await _start(
            dev_env.client, queue, AdkRun(workspace_id=wsid, prompt="search it", model=model)
        )
        events = await cancel_while_rg_runs(handle, acts)
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED in events
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in events
    assert len(script.requests) == 1


async def test_a_workspace_without_a_worker_fails_the_workflow_naming_it(dev_env):
    """No worker for the workspace: function_tools raises the non-retryable SEARCH_FAILED
    naming it, the workflow fails with that cause, and the model is never called."""
    wsid = f"nobody-{uuid.uuid4()}"
    model, script = scripted(text("never asked"))
    queue = f"agents-{uuid.uuid4()}"
    async with _agent_worker(dev_env.client, queue):
        handle = await _start(
            dev_env.client,
            queue,
            AdkRun(workspace_id=wsid, prompt="search", model=model, schedule_to_start_s=1),
        )
        with pytest.raises(WorkflowFailureError) as info:
            await asyncio.wait_for(handle.result(), 120)
    assert_unserved(info.value, wsid)
    assert script.requests == []


async def test_a_tool_the_agent_does_not_have_is_adks_error_for_the_model(
    dev_env, make_activities, tmp_path: Path
):
    """A call to a name that is not a tool (read_spill, not offered with a file:// store) is
    answered by ADK itself and the run goes on: nothing is scheduled for it."""
    ws = write_tree(tmp_path / "ws", {"a.py": "x\n"})
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws)
    model, script = scripted(call("read_spill", {"locator": "s3://b/k"}), text("done"))
    queue = f"agents-{uuid.uuid4()}"
    async with (
        new_worker(dev_env.client, acts, workspace_id=wsid),
        _agent_worker(dev_env.client, queue),
    ):
        handle = await _start(
            dev_env.client, queue, AdkRun(workspace_id=wsid, prompt="read", model=model)
        )
        reply = await handle.result()
        scheduled = await scheduled_activities(handle)
    assert reply.answer == "done"
    [sent] = reply.tool_outputs
    assert json.loads(sent)["error"].startswith(
        "Invoking `read_spill()` failed as no tool with that name is available"
    )
    assert [a[0] for a in scheduled if a[0].startswith("fs_search.")] == ["fs_search.tools"]


async def test_time_skipping_env_with_the_adk_plugin(tmp_path: Path):
    """Users' offline tests: ``time_skipping_env()`` and ``search_worker`` with
    GoogleAdkPlugin on the agent's worker."""
    ws = write_tree(tmp_path / "ws", {"app.py": "# TODO: ship it\n"})
    model, _ = scripted(
        call("glob", {"pattern": "*.py"}),
        call("grep", {"pattern": "TODO"}),
        text("one TODO"),
    )
    async with time_skipping_env(spill_dir=tmp_path / "payloads") as env:
        async with (
            _agent_worker(env.client, "agents"),
            search_worker(env.client, ws, workspace_id="ws-1"),
        ):
            reply = await env.client.execute_workflow(
                AdkSearchAgent.run,
                AdkRun(workspace_id="ws-1", prompt="what is left to do?", model=model),
                id=f"wf-{uuid.uuid4()}",
                task_queue="agents",
            )
    assert reply == AdkReply(
        answer="one TODO", tool_outputs=["app.py", "app.py:\n  Line 1: # TODO: ship it"]
    )


def test_function_tools_mirror_the_catalogue():
    """One ADK tool per entry, read_spill included, declared with the catalogue's name,
    description and schema verbatim (a copy: editing it leaves the catalogue alone);
    instructions are its prompt segments."""
    catalogue = canned_catalogue()
    made = function_tools(FsSearchTools("ws"), catalogue)
    assert all(isinstance(t, FsSearchTool) for t in made)
    declared = [t._get_declaration() for t in made]
    assert [(d.name, d.description, d.parameters_json_schema) for d in declared] == [
        (s.name, s.description, s.input_schema) for s in catalogue.tools
    ]
    assert [d.name for d in declared] == ["glob", "grep", "read_spill"]
    assert declared[0].parameters is None  # no schema of ADK's own beside ours
    declared[0].parameters_json_schema["properties"].clear()  # type: ignore[index]
    assert made[0]._get_declaration().parameters_json_schema == catalogue.tools[0].input_schema
    assert instructions(catalogue) == "\n\n".join(catalogue.system_prompt)


def test_a_worker_without_rg_offers_no_tools_and_a_warning(caplog):
    """A worker's own unavailable catalogue: no tools, no instructions, a warning why."""
    caplog.set_level(logging.WARNING)
    no_rg = canned_catalogue(
        available=False,
        tools=[],
        system_prompt=[],
        reason="ripgrep is not available on this worker",
    )
    assert function_tools(FsSearchTools("ws"), no_rg) == []
    assert instructions(no_rg) == ""
    assert any("ripgrep is not available" in r.getMessage() for r in caplog.records)


def test_function_tools_raise_when_no_worker_answered():
    """The adapter kit's one policy, for ADK: a catalogue no worker answered
    raises the non-retryable SEARCH_FAILED naming the workspace."""
    unserved = canned_catalogue(
        available=False,
        tools=[],
        system_prompt=[],
        reason="no fs-search worker is serving workspace 'ws': nothing polls its task queue",
        error=ToolError(name="SearchError", code=ErrorCode.SEARCH_FAILED),
    )
    with pytest.raises(ApplicationError) as info:
        function_tools(FsSearchTools("ws"), unserved)
    assert info.value.type == "SEARCH_FAILED" and info.value.non_retryable
    assert info.value.message.startswith("no fs-search worker is serving workspace 'ws'")


def test_the_core_import_does_not_need_the_extra():
    """`import fs_search.workflows` loads no google.adk."""
    code = "import sys, fs_search.workflows\nprint([m for m in sys.modules if m.startswith(('google.adk', 'temporalio.google_adk'))])"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tool=st.sampled_from(["glob", "grep", "read_spill"]), args=any_objects | st.none())
def test_google_adk_tool_answers_any_arguments(tool, args):
    """An ADK tool is handed the model's function-call arguments as they came (an object,
    or None): it answers with text, never raising."""
    tools = function_tools(CannedTools("ws"), canned_catalogue(read_spill=True))
    [adk_tool] = [t for t in tools if t.name == tool]
    text = asyncio.run(adk_tool.run_async(args=args, tool_context=None))  # type: ignore[arg-type]
    assert isinstance(text, str)
    assert text.startswith("Error: ") or text == f"ran {tool}", text
    text.encode("utf-8")  # sent back to the model through Temporal's payloads
