"""fs-search inside a LangGraph agent made durable by ``temporalio.langgraph``.

Real dev server, our real search activities on the workspace's queue, real rg. The model node is
an activity playing a scripted ``BaseChatModel`` (langchain_core's fake chat models cannot
bind tools); its turn is read from the messages it is sent (how many AI turns they hold), so
it is replay- and retry-safe. The tools node runs in the workflow.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.langgraph import LangGraphPlugin
from temporalio.worker import Replayer, Worker

from fs_search.worker import new_worker
from fs_search.worker.testing import search_worker, time_skipping_env
from fs_search.workflows import FsSearchTools, task_queue_for
from fs_search.workflows.langchain import (
    from_context,
    instructions,
    search_context,
    structured_tools,
)
from tests.helpers import sparse_file, write_tree
from tests.workflows.agent_frameworks import (
    assert_grep_turn,
    assert_unserved,
    cancel_while_rg_runs,
    scheduled_activities,
)
from tests.workflows.canned import catalogue as canned_catalogue
from tests.workflows.langchain_workflows import (
    GRAPH,
    MODELS,
    GraphReply,
    GraphRun,
    LangGraphSearchAgent,
    search_graph,
)

MODEL_ACTIVITY = f"{GRAPH}.agent"


@dataclass
class Script:
    """The turns a scripted model plays (a tool call, or the answer's text), and what it was
    sent: the tools bound and each call's messages."""

    turns: list[tuple[str, dict[str, Any]] | str]
    tools: list[dict[str, Any]] = field(default_factory=list)
    calls: list[list[BaseMessage]] = field(default_factory=list)


SCRIPTS: dict[str, Script] = {}


class ScriptedChat(BaseChatModel):
    """Plays ``SCRIPTS[name]``: turn n answers messages holding n AI turns."""

    name: str

    @property
    def _llm_type(self) -> str:
        return "fs-search-scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        SCRIPTS[self.name].tools = [convert_to_openai_tool(t) for t in tools]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        script = SCRIPTS[self.name]
        script.calls.append(messages)
        turn = script.turns[sum(isinstance(m, AIMessage) for m in messages)]
        if isinstance(turn, str):
            reply = AIMessage(content=turn)
        else:
            tool, args = turn
            call = {
                "name": tool,
                "args": args,
                "id": f"call-{len(script.calls)}",
                "type": "tool_call",
            }
            reply = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])


def scripted(*turns: tuple[str, dict[str, Any]] | str) -> tuple[str, Script]:
    """A new model name, registered, and the script it plays."""
    name = f"scripted-{uuid.uuid4()}"
    SCRIPTS[name] = Script(list(turns))
    MODELS[name] = lambda: ScriptedChat(name=name)
    return name, SCRIPTS[name]


def _agent_worker(client: Client, queue: str) -> Worker:
    return Worker(
        client,
        task_queue=queue,
        workflows=[LangGraphSearchAgent],
        plugins=[LangGraphPlugin(graphs={GRAPH: search_graph()})],
    )


async def _start(client: Client, queue: str, job: GraphRun) -> WorkflowHandle[Any, GraphReply]:
    return await client.start_workflow(
        LangGraphSearchAgent.run, job, id=f"wf-{uuid.uuid4()}", task_queue=queue
    )


async def test_a_grep_turn_reads_our_text_and_errors_go_on(
    dev_env, make_activities, tmp_path: Path
):
    """The model is bound the catalogue's names, descriptions and schemas; a grep reads our
    rendered matches, an invalid regex and an argument outside the schema read Error: text
    (status error) and the run goes on to the answer; every search is our activity on the
    workspace's queue, the model node the plugin's activity on the agent's; history replays."""
    ws = write_tree(tmp_path / "ws", {"a.py": "needle = 1\n", "b/c.txt": "x\n"})
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws)
    model, script = scripted(
        ("grep", {"pattern": "needle"}),
        ("grep", {"pattern": "("}),
        ("grep", {"pattern": "x", "cwd": "/etc"}),
        "needle is in a.py",
    )
    queue = f"agents-{uuid.uuid4()}"
    async with (
        new_worker(dev_env.client, acts, workspace_id=wsid),
        _agent_worker(dev_env.client, queue),
    ):
        handle = await _start(
            dev_env.client,
            queue,
            GraphRun(workspace_id=wsid, prompt="where is needle?", model=model),
        )
        reply = await asyncio.wait_for(handle.result(), 120)
        scheduled = await scheduled_activities(handle)
        history = await handle.fetch_history()
    assert reply.answer == "needle is in a.py"
    assert reply.statuses == ["success", "error", "error"]
    replayed = await Replayer(
        workflows=[LangGraphSearchAgent],
        plugins=[LangGraphPlugin(graphs={GRAPH: search_graph()})],
        data_converter=dev_env.client.data_converter,
    ).replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None, replayed.replay_failure
    out = SimpleNamespace(
        tool_outputs=reply.tool_outputs,
        tools=[{"name": t["function"]["name"]} for t in script.tools],
    )
    assert_grep_turn(out, scheduled, task_queue_for(wsid))
    catalogue = await acts.tools()
    assert [
        (t["function"]["name"], t["function"]["description"], t["function"]["parameters"])
        for t in script.tools
    ] == [(s.name, s.description, s.input_schema) for s in catalogue.tools]
    assert [a for a in scheduled if a[0] == MODEL_ACTIVITY] == [(MODEL_ACTIVITY, queue)] * 4
    # What the model itself was sent: the prompt segments first, our text as the grep's result.
    assert script.calls[0][0].content == "\n\n".join(catalogue.system_prompt)
    assert script.calls[1][-1].content == "a.py:\n  Line 1: needle = 1"


async def test_cancelling_the_agent_workflow_kills_rg(dev_env, make_activities, tmp_path: Path):
    """Cancelling the agent's workflow mid-grep closes it as cancelled with rg dead, and the
    model is not called again."""
    ws = tmp_path / "ws"
    sparse_file(ws / "huge.bin")
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws)
    model, script = scripted(("grep", {"pattern": "needle", "path": "huge.bin"}), "called again")
    queue = f"agents-{uuid.uuid4()}"
    async with (
        new_worker(dev_env.client, acts, workspace_id=wsid),
        _agent_worker(dev_env.client, queue),
    ):
        handle = await _start(
            dev_env.client, queue, GraphRun(workspace_id=wsid, prompt="search it", model=model)
        )
        events = await cancel_while_rg_runs(handle, acts)
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED in events
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in events
    assert len(script.calls) == 1


async def test_a_workspace_without_a_worker_fails_the_workflow_naming_it(dev_env):
    """No worker for the workspace: search_context raises the non-retryable SEARCH_FAILED
    naming it, the workflow fails with that cause before the graph runs, and the model is
    never called."""
    wsid = f"nobody-{uuid.uuid4()}"
    model, script = scripted("never asked")
    queue = f"agents-{uuid.uuid4()}"
    async with _agent_worker(dev_env.client, queue):
        handle = await _start(
            dev_env.client,
            queue,
            GraphRun(workspace_id=wsid, prompt="search", model=model, schedule_to_start_s=1),
        )
        with pytest.raises(WorkflowFailureError) as info:
            await asyncio.wait_for(handle.result(), 120)
    assert_unserved(info.value, wsid)
    assert script.calls == []


async def test_time_skipping_env_with_the_langgraph_plugin(tmp_path: Path):
    """Users' offline tests: ``time_skipping_env()`` and ``search_worker`` with LangGraphPlugin
    on the agent's worker."""
    ws = write_tree(tmp_path / "ws", {"app.py": "# TODO: ship it\n"})
    model, _ = scripted(("glob", {"pattern": "*.py"}), ("grep", {"pattern": "TODO"}), "one TODO")
    async with time_skipping_env(spill_dir=tmp_path / "payloads") as env:
        async with (
            _agent_worker(env.client, "agents"),
            search_worker(env.client, ws, workspace_id="ws-1"),
        ):
            reply = await env.client.execute_workflow(
                LangGraphSearchAgent.run,
                GraphRun(workspace_id="ws-1", prompt="what is left to do?", model=model),
                id=f"wf-{uuid.uuid4()}",
                task_queue="agents",
            )
    assert reply == GraphReply(
        answer="one TODO",
        tool_outputs=["app.py", "app.py:\n  Line 1: # TODO: ship it"],
        statuses=["success", "success"],
    )


def test_structured_tools_mirror_the_catalogue():
    """One tool per entry, read_spill included, with the catalogue's name, description and
    schema verbatim (a copy: editing it leaves the catalogue alone); instructions are its
    prompt segments."""
    catalogue = canned_catalogue()
    made = structured_tools(FsSearchTools("ws"), catalogue)
    assert [(t.name, t.description, t.args_schema) for t in made] == [
        (s.name, s.description, s.input_schema) for s in catalogue.tools
    ]
    assert [convert_to_openai_tool(t)["function"]["parameters"] for t in made] == [
        s.input_schema for s in catalogue.tools
    ]
    made[0].args_schema["properties"].clear()  # type: ignore[index]
    assert catalogue.tools[0].input_schema["properties"]
    assert instructions(catalogue) == "\n\n".join(catalogue.system_prompt)


def test_the_context_carries_the_workspace_options_and_catalogue():
    """search_context is JSON and from_context gives back the same queue, options and
    catalogue (a host-routed FsSearchTools stays host-routed)."""
    import json

    catalogue = canned_catalogue()
    tools = FsSearchTools("ws-9", host="node-3", cwd="src", timeout_ms=5_000)
    context = json.loads(json.dumps(search_context(tools, catalogue)))
    again, read = from_context(context)
    assert read == catalogue
    assert (again.workspace_id, again.task_queue, again.host, again.cwd, again.timeout_ms) == (
        "ws-9",
        tools.task_queue,
        "node-3",
        "src",
        5_000,
    )
    assert again.schedule_to_start_timeout == tools.schedule_to_start_timeout


def test_a_worker_without_rg_offers_no_tools_and_a_warning(caplog):
    """A worker's own unavailable catalogue: no tools, no instructions, a warning why."""
    caplog.set_level(logging.WARNING)
    no_rg = canned_catalogue(
        available=False,
        tools=[],
        system_prompt=[],
        reason="ripgrep is not available on this worker",
    )
    assert structured_tools(FsSearchTools("ws"), no_rg) == []
    assert instructions(no_rg) == ""
    assert any("ripgrep is not available" in r.getMessage() for r in caplog.records)


def test_the_core_import_does_not_need_the_extra():
    """`import fs_search.workflows` loads no langchain or langgraph."""
    code = "import sys, fs_search.workflows\nprint([m for m in sys.modules if m.startswith(('langchain', 'langgraph', 'temporalio.langgraph'))])"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"
