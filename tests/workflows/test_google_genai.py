"""fs-search inside a Gemini SDK agent made durable by ``temporalio.google_genai``.

Real dev server, our real search activities on the workspace's queue, real rg; the model is
the integration's own ``GeminiTestServer`` playing scripted turns offline, its automatic
function calling loop running in the workflow.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.google_genai.testing import (
    GeminiTestServer,
    function_call_response,
    text_response,
)
from temporalio.worker import Worker

from fs_search.worker import new_worker
from fs_search.worker.testing import search_worker, time_skipping_env
from fs_search.workflows import FsSearchTools, task_queue_for
from fs_search.workflows.google_genai import function_tools, instructions
from tests.helpers import sparse_file, write_tree
from tests.workflows.agent_frameworks import (
    assert_unserved,
    cancel_while_rg_runs,
    scheduled_activities,
)
from tests.workflows.canned import catalogue as canned_catalogue
from tests.workflows.google_genai_workflows import GeminiRun, GeminiSearchAgent

MODEL_ACTIVITY = "gemini_api_client_async_request"


def _declarations(request: dict[str, Any]) -> list[dict[str, Any]]:
    """The function declarations a model request carried."""
    return [d for tool in request.get("tools", []) for d in tool.get("functionDeclarations", [])]


def _results(server: GeminiTestServer) -> list[dict[str, Any]]:
    """What each model turn after the first was sent back: one function response each."""
    return [
        part["functionResponse"]["response"]
        for request in server.requests[1:]
        for part in request["contents"][-1]["parts"]
        if "functionResponse" in part
    ]


def _as_declared(catalogue_schema: dict[str, Any]) -> dict[str, Any]:
    """A catalogue schema as the SDK declares it: its properties verbatim, an optional one
    marked by ``"default": null``, no top-level ``additionalProperties``."""
    required = catalogue_schema["required"]
    return {
        "type": "object",
        "properties": {
            name: prop if name in required else {**prop, "default": None}
            for name, prop in catalogue_schema["properties"].items()
        },
        "required": required,
    }


async def _start(
    client: Client, server: GeminiTestServer, queue: str, job: GeminiRun
) -> WorkflowHandle[Any, str]:
    return await client.start_workflow(
        GeminiSearchAgent.run, job, id=f"wf-{uuid.uuid4()}", task_queue=queue
    )


async def test_grep_then_glob_then_an_answer(dev_env, make_activities, tmp_path: Path):
    """Declarations carry the catalogue's names, descriptions and schemas; a grep reads our
    rendered matches, an invalid regex reads Error: text and the loop goes on to a glob and
    the answer; every search is our activity on the workspace's queue."""
    ws = write_tree(tmp_path / "ws", {"a.py": "needle = 1\n", "b/c.txt": "x\n"})
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws)
    server = GeminiTestServer(
        [
            function_call_response("grep", {"pattern": "needle"}),
            function_call_response("grep", {"pattern": "("}),
            function_call_response("glob", {"pattern": "*.py"}),
            text_response("needle is in a.py"),
        ]
    )
    queue = f"agents-{uuid.uuid4()}"
    async with (
        new_worker(dev_env.client, acts, workspace_id=wsid),
        Worker(
            dev_env.client,
            task_queue=queue,
            workflows=[GeminiSearchAgent],
            plugins=[server.plugin()],
        ),
    ):
        handle = await _start(
            dev_env.client, server, queue, GeminiRun(workspace_id=wsid, prompt="where is needle?")
        )
        assert await handle.result() == "needle is in a.py"
        scheduled = await scheduled_activities(handle)
    catalogue = await acts.tools()
    first = server.requests[0]
    assert [
        (d["name"], d["description"], d["parameters_json_schema"]) for d in _declarations(first)
    ] == [(s.name, s.description, _as_declared(s.input_schema)) for s in catalogue.tools]
    assert first["systemInstruction"]["parts"][0]["text"] == "\n\n".join(catalogue.system_prompt)
    grep, bad, glob = _results(server)
    assert grep == {"result": "a.py:\n  Line 1: needle = 1"}
    assert bad["result"].startswith("Error: invalid pattern") and "unclosed group" in bad["result"]
    assert glob == {"result": "a.py"}
    queue_of_ws = task_queue_for(wsid)
    assert [a for a in scheduled if a[0] != MODEL_ACTIVITY] == [
        ("fs_search.tools", queue_of_ws),
        ("fs_search.grep", queue_of_ws),
        ("fs_search.grep", queue_of_ws),
        ("fs_search.glob", queue_of_ws),
    ]
    assert [a for a in scheduled if a[0] == MODEL_ACTIVITY] == [(MODEL_ACTIVITY, queue)] * 4


async def test_cancelling_the_agent_workflow_kills_rg(dev_env, make_activities, tmp_path: Path):
    """Cancelling the agent's workflow mid-grep closes it as cancelled with rg dead, and the
    model is not called again (the SDK would hand it an exception as an error result)."""
    ws = tmp_path / "ws"
    sparse_file(ws / "huge.bin")
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws)
    server = GeminiTestServer(
        [
            function_call_response("grep", {"pattern": "needle", "path": "huge.bin"}),
            text_response("the model was called again"),
        ]
    )
    queue = f"agents-{uuid.uuid4()}"
    async with (
        new_worker(dev_env.client, acts, workspace_id=wsid),
        Worker(
            dev_env.client,
            task_queue=queue,
            workflows=[GeminiSearchAgent],
            plugins=[server.plugin()],
        ),
    ):
        handle = await _start(
            dev_env.client, server, queue, GeminiRun(workspace_id=wsid, prompt="search it")
        )
        events = await cancel_while_rg_runs(handle, acts)
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED in events
    assert len(server.requests) == 1


async def test_a_workspace_without_a_worker_fails_the_workflow_naming_it(dev_env):
    """No worker for the workspace: function_tools raises the non-retryable SEARCH_FAILED
    naming it, the workflow fails with that cause, and the model is never called."""
    wsid = f"nobody-{uuid.uuid4()}"
    server = GeminiTestServer([text_response("never asked")])
    queue = f"agents-{uuid.uuid4()}"
    async with Worker(
        dev_env.client, task_queue=queue, workflows=[GeminiSearchAgent], plugins=[server.plugin()]
    ):
        handle = await _start(
            dev_env.client,
            server,
            queue,
            GeminiRun(workspace_id=wsid, prompt="search", schedule_to_start_s=1),
        )
        with pytest.raises(WorkflowFailureError) as info:
            await asyncio.wait_for(handle.result(), 60)
    assert_unserved(info.value, wsid)
    assert server.requests == []


async def test_time_skipping_env_with_the_test_server(tmp_path: Path):
    """Users' offline tests: ``time_skipping_env()`` and ``search_worker`` with the Gemini test
    server's plugin on the agent's worker; an argument outside the schema is dropped by the
    SDK before the call."""
    ws = write_tree(tmp_path / "ws", {"app.py": "# TODO: ship it\n"})
    server = GeminiTestServer(
        [
            function_call_response("glob", {"pattern": "*.py", "cwd": "/etc"}),
            function_call_response("grep", {"pattern": "TODO"}),
            text_response("one TODO"),
        ]
    )
    async with time_skipping_env(spill_dir=tmp_path / "payloads") as env:
        async with (
            Worker(
                env.client,
                task_queue="agents",
                workflows=[GeminiSearchAgent],
                plugins=[server.plugin()],
            ),
            search_worker(env.client, ws, workspace_id="ws-1"),
        ):
            answer = await env.client.execute_workflow(
                GeminiSearchAgent.run,
                GeminiRun(workspace_id="ws-1", prompt="what is left to do?"),
                id=f"wf-{uuid.uuid4()}",
                task_queue="agents",
            )
    assert answer == "one TODO"
    assert _results(server) == [
        {"result": "app.py"},
        {"result": "app.py:\n  Line 1: # TODO: ship it"},
    ]


def test_function_tools_mirror_the_catalogue():
    """One async function per entry, read_spill included, named and documented as the
    catalogue says; instructions are its prompt segments; a worker without rg gives none."""
    catalogue = canned_catalogue()
    made = function_tools(FsSearchTools("ws"), catalogue)
    assert [(f.__name__, f.__doc__) for f in made] == [
        (s.name, s.description) for s in catalogue.tools
    ]
    assert [f.__name__ for f in made] == ["glob", "grep", "read_spill"]
    assert instructions(catalogue) == "\n\n".join(catalogue.system_prompt)
    no_rg = canned_catalogue(available=False, tools=[], system_prompt=[], reason="no rg")
    assert function_tools(FsSearchTools("ws"), no_rg) == []
    assert instructions(no_rg) == ""


def test_a_missing_extra_names_the_pip_install():
    """Without google-genai, importing the adapter says which extra to install."""
    code = (
        "import sys\nsys.modules['google.genai'] = None\n"
        "try:\n    import fs_search.workflows.google_genai\n"
        "except ModuleNotFoundError as e:\n    print(e.name, '|', e)\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("google.genai | fs_search.workflows.google_genai needs the")
    assert 'pip install "fs-search-temporal[google-genai]"' in p.stdout


def test_the_core_import_does_not_need_the_extra():
    """`import fs_search.workflows` loads no google.genai."""
    code = "import sys, fs_search.workflows\nprint([m for m in sys.modules if m.startswith('google.genai')])"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"
