"""fs-search inside a Strands agent made durable by ``temporalio.strands_agents``.

Real dev server, our real search activities on the workspace's queue, real rg. Strands has no
test model: ``ScriptedModel`` below subclasses its ``Model`` and plays scripted turns (Bedrock
stream events). Under Temporal the agent is a ``TemporalAgent(model=<name>)`` in the workflow
and the plugin's ``invoke_model`` activity runs the model registered under that name on the
agent's worker; the turn is found from the messages (how many assistant turns they hold):
replay- and retry-safe.
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
from strands.models import Model
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.strands_agents import StrandsPlugin
from temporalio.worker import Replayer, Worker

from fs_search.worker import new_worker
from fs_search.worker.testing import search_worker, time_skipping_env
from fs_search.workflows import FsSearchTools, task_queue_for
from fs_search.workflows.strands import FsSearchAgentTool, agent_tools, instructions
from tests.helpers import sparse_file, write_tree
from tests.workflows.agent_frameworks import (
    assert_grep_turn,
    assert_unserved,
    cancel_while_rg_runs,
    scheduled_activities,
)
from tests.workflows.canned import catalogue as canned_catalogue
from tests.workflows.strands_workflows import StrandsReply, StrandsRun, StrandsSearchAgent

MODEL_ACTIVITY = "invoke_model"
MODEL = "scripted"


@dataclass
class Turn:
    """A tool call (name and input) or, with ``name`` None, the answer ``text``."""

    name: str | None = None
    input: Any = None
    text: str = ""


@dataclass
class Seen:
    """What the model was sent on one call."""

    messages: list[Any]
    tool_specs: list[Any]
    system_prompt: str | None


@dataclass
class ScriptedModel(Model):
    """Plays ``turns``: turn n answers messages holding n assistant turns."""

    turns: list[Turn]
    seen: list[Seen] = field(default_factory=list)

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def stream(  # type: ignore[override]
        self,
        messages: Any,
        tool_specs: Any = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[Any, None]:
        self.seen.append(Seen(messages, list(tool_specs or []), system_prompt))
        turn = self.turns[sum(1 for m in messages if m["role"] == "assistant")]
        yield {"messageStart": {"role": "assistant"}}
        if turn.name is None:
            yield {"contentBlockDelta": {"delta": {"text": turn.text}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
            return
        use = {"toolUseId": f"call-{len(self.seen)}", "name": turn.name}
        yield {"contentBlockStart": {"start": {"toolUse": use}}}
        yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(turn.input)}}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "tool_use"}}


def call(name: str, args: Any) -> Turn:
    return Turn(name=name, input=args)


def answer(text: str) -> Turn:
    return Turn(text=text)


def _agent_worker(client: Client, queue: str, model: ScriptedModel) -> Worker:
    return Worker(
        client,
        task_queue=queue,
        workflows=[StrandsSearchAgent],
        plugins=[StrandsPlugin(models={MODEL: lambda: model})],
    )


async def _start(client: Client, queue: str, job: StrandsRun) -> WorkflowHandle[Any, StrandsReply]:
    return await client.start_workflow(
        StrandsSearchAgent.run, job, id=f"wf-{uuid.uuid4()}", task_queue=queue
    )


async def test_a_grep_turn_reads_our_text_and_errors_go_on(
    dev_env, make_activities, tmp_path: Path
):
    """Specs carry the catalogue's names, descriptions and schemas; a grep reads our rendered
    matches, an invalid regex and an argument outside the schema read Error: text (status
    error) and the run goes on to the answer; every search is our activity on the workspace's
    queue, the model calls the plugin's activity on the agent's; the history replays."""
    ws = write_tree(tmp_path / "ws", {"a.py": "needle = 1\n", "b/c.txt": "x\n"})
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws)
    model = ScriptedModel(
        [
            call("grep", {"pattern": "needle"}),
            call("grep", {"pattern": "("}),
            call("grep", {"pattern": "x", "cwd": "/etc"}),
            answer("needle is in a.py"),
        ]
    )
    queue = f"agents-{uuid.uuid4()}"
    async with (
        new_worker(dev_env.client, acts, workspace_id=wsid),
        _agent_worker(dev_env.client, queue, model),
    ):
        handle = await _start(
            dev_env.client,
            queue,
            StrandsRun(workspace_id=wsid, prompt="where is needle?", model=MODEL),
        )
        reply = await asyncio.wait_for(handle.result(), 120)
        scheduled = await scheduled_activities(handle)
        history = await handle.fetch_history()
    assert reply.answer == "needle is in a.py"
    assert reply.statuses == ["success", "error", "error"]
    replayed = await Replayer(
        workflows=[StrandsSearchAgent],
        plugins=[StrandsPlugin(models={MODEL: lambda: model})],
        data_converter=dev_env.client.data_converter,
    ).replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None, replayed.replay_failure
    first = model.seen[0]
    out = SimpleNamespace(
        tool_outputs=reply.tool_outputs, tools=[{"name": s["name"]} for s in first.tool_specs]
    )
    assert_grep_turn(out, scheduled, task_queue_for(wsid))
    catalogue = await acts.tools()
    assert [(s["name"], s["description"], s["inputSchema"]["json"]) for s in first.tool_specs] == [
        (s.name, s.description, s.input_schema) for s in catalogue.tools
    ]
    assert [a for a in scheduled if a[0] == MODEL_ACTIVITY] == [(MODEL_ACTIVITY, queue)] * 4
    # What the model itself was sent: the prompt segments, and our text as the grep's result.
    assert first.system_prompt == "\n\n".join(catalogue.system_prompt)
    [block] = model.seen[1].messages[-1]["content"]
    assert block["toolResult"]["content"] == [{"text": "a.py:\n  Line 1: needle = 1"}]


async def test_cancelling_the_agent_workflow_kills_rg(dev_env, make_activities, tmp_path: Path):
    """Cancelling the agent's workflow mid-grep closes it as cancelled with rg dead, and the
    model is not called again."""
    ws = tmp_path / "ws"
    sparse_file(ws / "huge.bin")
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws)
    model = ScriptedModel(
        [call("grep", {"pattern": "needle", "path": "huge.bin"}), answer("called again")]
    )
    queue = f"agents-{uuid.uuid4()}"
    async with (
        new_worker(dev_env.client, acts, workspace_id=wsid),
        _agent_worker(dev_env.client, queue, model),
    ):
        handle = await _start(
            dev_env.client, queue, StrandsRun(workspace_id=wsid, prompt="search it", model=MODEL)
        )
        events = await cancel_while_rg_runs(handle, acts)
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED in events
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in events
    assert len(model.seen) == 1


async def test_a_workspace_without_a_worker_fails_the_workflow_naming_it(dev_env):
    """No worker for the workspace: agent_tools raises the non-retryable SEARCH_FAILED
    naming it, the workflow fails with that cause, and the model is never called."""
    wsid = f"nobody-{uuid.uuid4()}"
    model = ScriptedModel([answer("never asked")])
    queue = f"agents-{uuid.uuid4()}"
    async with _agent_worker(dev_env.client, queue, model):
        handle = await _start(
            dev_env.client,
            queue,
            StrandsRun(workspace_id=wsid, prompt="search", model=MODEL, schedule_to_start_s=1),
        )
        with pytest.raises(WorkflowFailureError) as info:
            await asyncio.wait_for(handle.result(), 120)
    assert_unserved(info.value, wsid)
    assert model.seen == []


async def test_odd_tool_inputs_read_error_text(dev_env, make_activities, tmp_path: Path):
    """Inputs a model may send that are not an object of the schema's fields (a list, a
    string, null for a required pattern) read Error: text; nothing fails the workflow task."""
    ws = write_tree(tmp_path / "ws", {"a.py": "x\n"})
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws)
    model = ScriptedModel(
        [
            call("grep", ["needle"]),
            call("glob", "*.py"),
            call("grep", {"pattern": None}),
            answer("done"),
        ]
    )
    queue = f"agents-{uuid.uuid4()}"
    async with (
        new_worker(dev_env.client, acts, workspace_id=wsid),
        _agent_worker(dev_env.client, queue, model),
    ):
        handle = await _start(
            dev_env.client, queue, StrandsRun(workspace_id=wsid, prompt="go", model=MODEL)
        )
        reply = await asyncio.wait_for(handle.result(), 120)
        events = [e.event_type async for e in handle.fetch_history_events()]
    assert reply.answer == "done"
    assert len(reply.tool_outputs) == 3
    assert all(o.startswith("Error: ") for o in reply.tool_outputs), reply.tool_outputs
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in events


async def test_time_skipping_env_with_the_strands_plugin(tmp_path: Path):
    """Users' offline tests: ``time_skipping_env()`` and ``search_worker`` with
    StrandsPlugin on the agent's worker."""
    ws = write_tree(tmp_path / "ws", {"app.py": "# TODO: ship it\n"})
    model = ScriptedModel(
        [call("glob", {"pattern": "*.py"}), call("grep", {"pattern": "TODO"}), answer("one TODO")]
    )
    async with time_skipping_env(spill_dir=tmp_path / "payloads") as env:
        async with (
            _agent_worker(env.client, "agents", model),
            search_worker(env.client, ws, workspace_id="ws-1"),
        ):
            reply = await env.client.execute_workflow(
                StrandsSearchAgent.run,
                StrandsRun(workspace_id="ws-1", prompt="what is left to do?", model=MODEL),
                id=f"wf-{uuid.uuid4()}",
                task_queue="agents",
            )
    assert reply == StrandsReply(
        answer="one TODO",
        tool_outputs=["app.py", "app.py:\n  Line 1: # TODO: ship it"],
        statuses=["success", "success"],
    )


def test_agent_tools_mirror_the_catalogue():
    """One Strands tool per entry, read_spill included, its spec the catalogue's name,
    description and schema verbatim (a copy: editing it leaves the catalogue alone);
    instructions are its prompt segments."""
    catalogue = canned_catalogue()
    made = agent_tools(FsSearchTools("ws"), catalogue)
    assert all(isinstance(t, FsSearchAgentTool) for t in made)
    specs = [t.tool_spec for t in made]
    assert [(s["name"], s["description"], s["inputSchema"]["json"]) for s in specs] == [
        (s.name, s.description, s.input_schema) for s in catalogue.tools
    ]
    assert [t.tool_name for t in made] == ["glob", "grep", "read_spill"]
    specs[0]["inputSchema"]["json"]["properties"].clear()
    assert made[0].tool_spec["inputSchema"]["json"] == catalogue.tools[0].input_schema
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
    assert agent_tools(FsSearchTools("ws"), no_rg) == []
    assert instructions(no_rg) == ""
    assert any("ripgrep is not available" in r.getMessage() for r in caplog.records)


def test_the_core_import_does_not_need_the_extra():
    """`import fs_search.workflows` loads no strands."""
    code = "import sys, fs_search.workflows\nprint([m for m in sys.modules if m.startswith(('strands', 'temporalio.strands_agents'))])"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"
