"""fs-search inside an OpenAI Agents SDK agent made durable by Temporal's OpenAIAgentsPlugin.

Real dev server, our real search activities on the workspace's queue, real rg; the model is
the plugin's own ``TestModel`` answering with ``ResponseBuilders`` turns.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import CancelledError
from temporalio.openai_agents.testing import AgentEnvironment, ResponseBuilders, TestModel
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from fs_search.activities._catalogue import GLOB_PROMPT_HEAD, GREP_PROMPT, tools_and_prompts
from fs_search.activities.storage._s3 import S3SpillStore
from fs_search.worker import new_worker
from fs_search.worker.testing import search_worker, time_skipping_env
from fs_search.workflows import (
    FsSearchPlugin,
    FsSearchTools,
    ToolsResult,
    host_queue_for,
    task_queue_for,
)
from fs_search.workflows.openai_agents import function_tools, instructions
from tests.helpers import sparse_file, write_tree
from tests.procs import alive, group
from tests.workflows.agent_frameworks import (
    assert_grep_turn,
    gone_within,
    scheduled_activities,
    wait_for_rg,
)
from tests.workflows.openai_agents_workflows import AgentOutcome, AgentRun, OpenAISearchAgent

# FsSearchTools' default heartbeat timeout.
HEARTBEAT_TIMEOUT_S = 5


def _calls(*calls: tuple[str, dict | str], answer: int = 1) -> TestModel:
    """A model that makes the given tool calls, one per turn, then answers "done" (``answer``
    times: once per run it serves). String arguments are sent as they are, not as JSON."""
    turns = [
        ResponseBuilders.tool_call(
            args if isinstance(args, str) else json.dumps(args),
            name,
            call_id=f"call-{i}",
            item_id=f"item-{i}",
        )
        for i, (name, args) in enumerate(calls)
    ]
    done = [ResponseBuilders.output_message("done")] * answer
    return TestModel.returning_responses([*turns, *done])


# The activities each run scheduled, by workspace id: (activity type, task queue).
SCHEDULED: dict[str, list[tuple[str, str]]] = {}


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
            handle = await agent_client.start_workflow(
                OpenAISearchAgent.run, job, id=f"wf-{uuid.uuid4()}", task_queue=queue
            )
            outcome = await handle.result()
            SCHEDULED[job.workspace_id] = await scheduled_activities(handle)
            return outcome


@pytest.mark.parametrize("sandboxed", [True, False], ids=["sandboxed", "unsandboxed"])
async def test_grep_turn_reads_our_text_and_errors_keep_the_run_going(
    dev_env, payload_dir, make_activities, tmp_path: Path, sandboxed: bool
):
    """A grep turn gets the rendered matches; an invalid pattern comes back as Error: text and
    the run continues to the model's answer."""
    ws = write_tree(tmp_path / "ws", {"a.py": "needle = 1\n", "b/c.py": "x\n"})
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws)
    model = _calls(
        ("grep", {"pattern": "needle"}),
        ("grep", {"pattern": "("}),
        ("grep", {"pattern": "x", "cwd": "/etc"}),
    )
    async with new_worker(dev_env.client, acts, workspace_id=wsid):
        out = await _run(
            dev_env.client,
            payload_dir,
            model,
            AgentRun(workspace_id=wsid, prompt="find the needle"),
            runner=None if sandboxed else UnsandboxedWorkflowRunner(),
        )
    assert_grep_turn(out, SCHEDULED[wsid], task_queue_for(wsid))
    assert out.final_output == "done"
    assert out.instructions == f"{GLOB_PROMPT_HEAD}\n\n{GREP_PROMPT}"


async def test_the_same_grep_turn_through_a_host_queue(
    dev_env, payload_dir, make_activities, tmp_path: Path
):
    """``FsSearchTools(wsid, host=...)`` under the adapter: the same turn, every search on the
    host queue ``fs-search-host/<host>``."""
    ws = write_tree(tmp_path / "ws", {"a.py": "needle = 1\n", "b/c.py": "x\n"})
    wsid, host = f"ws-{uuid.uuid4()}", f"h-{uuid.uuid4().hex[:8]}"
    acts = await make_activities(ws, workspace_id=wsid)
    model = _calls(
        ("grep", {"pattern": "needle"}),
        ("grep", {"pattern": "("}),
        ("grep", {"pattern": "x", "cwd": "/etc"}),
    )
    async with new_worker(dev_env.client, acts, workspace_id=wsid, host=host):
        out = await _run(
            dev_env.client,
            payload_dir,
            model,
            AgentRun(workspace_id=wsid, prompt="find the needle", host=host),
        )
    assert_grep_turn(out, SCHEDULED[wsid], host_queue_for(host))


async def test_any_arguments_are_error_text_and_the_run_goes_on(
    dev_env, payload_dir, make_activities, tmp_path: Path
):
    """Any arguments the model sends come back as Error: text and the run reaches its answer."""
    ws = write_tree(tmp_path / "ws", {"a.py": "needle = 1\n"})
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws)
    model = _calls(
        ("grep", "[1]"),
        ("grep", '"needle"'),
        ("grep", "null"),
        ("grep", "{not json"),
        ("grep", '{"pattern": ' + "9" * 5000 + "}"),
        # Nested within what the Agents SDK survives: it decodes every call's arguments
        # before a tool runs, and past ~450 levels its own RecursionError fails the workflow
        # task (agents._tool_invocation, 0.22.3) before our invoker is reached.
        ("grep", '{"pattern": ' + "[" * 200 + "]" * 200 + "}"),
        ("grep", {"pattern": "needle"}),
    )
    async with new_worker(dev_env.client, acts, workspace_id=wsid):
        out = await _run(
            dev_env.client, payload_dir, model, AgentRun(workspace_id=wsid, prompt="find it")
        )
    *refused, found = out.tool_outputs
    assert [text.split(":")[0] for text in refused] == ["Error"] * 6, refused
    assert [text[:60] for text in refused[:3]] == [
        "Error: the arguments must be a JSON object, not an array",
        "Error: the arguments must be a JSON object, not a string",
        "Error: the arguments must be a JSON object, not null",
    ]
    assert "not JSON" in refused[3]
    assert "too many digits" in refused[4]
    assert "'pattern' must be a string" in refused[5]
    assert found == "a.py:\n  Line 1: needle = 1"
    assert [a for a in SCHEDULED[wsid] if a[0] == "fs_search.grep"] == [
        ("fs_search.grep", task_queue_for(wsid))
    ]
    assert out.final_output == "done"


async def test_over_cap_grep_carries_the_spill_locator(
    dev_env, payload_dir, make_activities, tmp_path: Path
):
    """An over-cap grep shows the model a page plus the locator of the complete result."""
    ws = write_tree(tmp_path / "ws", {"many.txt": "".join(f"hit {n}\n" for n in range(40))})
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws, grep_max_matches=10)
    async with new_worker(dev_env.client, acts, workspace_id=wsid):
        out = await _run(
            dev_env.client,
            payload_dir,
            _calls(("grep", {"pattern": "hit"})),
            AgentRun(workspace_id=wsid, prompt="find every hit"),
        )
    [text] = out.tool_outputs
    assert "Line 10: hit 9" in text and "Line 11: hit 10" not in text
    locator = re.search(r"Saved .* to: (\S+)", text)
    assert locator is not None, text
    assert Path(locator[1]).read_text().count("hit ") == 40


async def test_cancelling_the_agent_workflow_kills_rg(
    dev_env, payload_dir, make_activities, tmp_path: Path
):
    """Cancelling the agent's workflow mid-grep cancels the workflow and kills rg's group."""
    ws = tmp_path / "ws"
    sparse_file(ws / "huge.bin")
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws)
    queue = f"agents-{uuid.uuid4()}"
    model = _calls(("grep", {"pattern": "needle", "path": "huge.bin"}))
    async with AgentEnvironment(model=model) as agents_env:
        client = await _agent_client(dev_env.client, agents_env, payload_dir)
        async with (
            new_worker(dev_env.client, acts, workspace_id=wsid),
            Worker(client, task_queue=queue, workflows=[OpenAISearchAgent]),
        ):
            handle = await client.start_workflow(
                OpenAISearchAgent.run,
                AgentRun(workspace_id=wsid, prompt="search the huge file"),
                id=f"wf-{uuid.uuid4()}",
                task_queue=queue,
            )
            pgid = await wait_for_rg(acts)
            assert alive(group(pgid))
            await handle.cancel()
            with pytest.raises(WorkflowFailureError) as info:
                await handle.result()
            assert isinstance(info.value.cause, CancelledError)
            # The Agents SDK does not wait for a cancelled tool call: the workflow closes as
            # cancelled in the same task that requests the activity's cancellation, and the
            # worker kills rg when its next heartbeat hears of it (within the heartbeat timeout).
            events = [e async for e in handle.fetch_history_events()]
            assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED in [
                e.event_type for e in events
            ]
            await gone_within(pgid, timeout=HEARTBEAT_TIMEOUT_S + 3)


async def test_time_skipping_env_with_the_agents_plugin(tmp_path: Path):
    """Users' offline tests: the time-skipping server with OpenAIAgentsPlugin then
    FsSearchPlugin on its client, and search_worker over tmp_path."""
    ws = write_tree(tmp_path / "ws", {"app.py": "# TODO: ship it\n"})
    model = _calls(("glob", {"pattern": "*.py"}), ("grep", {"pattern": "TODO"}))
    async with AgentEnvironment(model=model) as agents_env:
        plugins = [
            agents_env.openai_agents_plugin,
            FsSearchPlugin(spill_url=f"file://{tmp_path / 'payloads'}", getenv=lambda _: None),
        ]
        async with time_skipping_env(plugins=plugins) as env:
            async with (
                Worker(env.client, task_queue="agents", workflows=[OpenAISearchAgent]),
                search_worker(env.client, ws, workspace_id="ws-1"),
            ):
                out = await env.client.execute_workflow(
                    OpenAISearchAgent.run,
                    AgentRun(workspace_id="ws-1", prompt="what is left to do?"),
                    id=f"wf-{uuid.uuid4()}",
                    task_queue="agents",
                )
    assert out.tool_outputs == ["app.py", "app.py:\n  Line 1: # TODO: ship it"]
    # search_worker samples over-cap globs by default: the description says so.
    assert "sampled across the entries" in out.tools[0]["description"]
    assert out.final_output == "done"


def test_function_tools_mirror_the_catalogue():
    """One FunctionTool per entry, read_spill included: the catalogue's names, descriptions
    and schemas unchanged (not made strict); instructions are its prompt segments."""
    specs, prompts = tools_and_prompts(
        sample_over_cap=False, glob_cap=100, grep_cap=250, line_bytes=2000, read_spill=True
    )
    catalogue = ToolsResult(
        available=True,
        tools=specs,
        system_prompt=prompts,
        sample_over_cap_glob_results=False,
        timeout_ms=30_000,
    )
    made = function_tools(FsSearchTools("ws"), catalogue)
    assert [(t.name, t.description, t.params_json_schema, t.strict_json_schema) for t in made] == [
        (s.name, s.description, s.input_schema, False) for s in specs
    ]
    assert [t.name for t in made] == ["glob", "grep", "read_spill"]
    assert instructions(catalogue) == "\n\n".join(prompts)
    unavailable = ToolsResult(
        available=False, reason="down", sample_over_cap_glob_results=False, timeout_ms=1
    )
    assert function_tools(FsSearchTools("ws"), unavailable) == []


@pytest.mark.parametrize(
    "arguments, message",
    [("{not json", "the arguments are not JSON"), ("[1]", "must be a JSON object")],
)
async def test_malformed_arguments_are_error_text(arguments, message):
    """Arguments that are not a JSON object come back as Error: text, nothing scheduled."""
    catalogue = ToolsResult(
        available=True,
        tools=tools_and_prompts(
            sample_over_cap=False, glob_cap=1, grep_cap=1, line_bytes=1, read_spill=False
        )[0],
        sample_over_cap_glob_results=False,
        timeout_ms=1,
    )
    grep = function_tools(FsSearchTools("ws"), catalogue)[1]
    text = await grep.on_invoke_tool(None, arguments)  # type: ignore[arg-type]
    assert text.startswith("Error: ") and message in text


def test_the_core_import_does_not_need_the_extra():
    """`import fs_search.workflows` loads no agents (the extra stays optional)."""
    code = "import sys, fs_search.workflows\nprint([m for m in sys.modules if m.split('.')[0] == 'agents'])"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


async def test_read_spill_is_offered_with_an_s3_store(
    dev_env, payload_dir, s3, make_activities, tmp_path: Path
):
    """With spills in S3 the catalogue offers read_spill: an over-cap grep's footer names an
    s3:// locator, and read_spill of a locator outside the store is Error: text."""
    ws = write_tree(tmp_path / "ws", {"many.txt": "".join(f"hit {n}\n" for n in range(40))})
    wsid = f"ws-{uuid.uuid4()}"
    store = S3SpillStore(s3.bucket, f"spill-{uuid.uuid4().hex[:8]}", endpoint_url=s3.endpoint_url)
    acts = await make_activities(ws, store=store, grep_max_matches=10)
    model = _calls(
        ("grep", {"pattern": "hit"}),
        ("read_spill", {"locator": f"s3://{s3.bucket}/elsewhere/x.txt"}),
    )
    try:
        async with new_worker(dev_env.client, acts, workspace_id=wsid):
            out = await _run(
                dev_env.client, payload_dir, model, AgentRun(workspace_id=wsid, prompt="hits?")
            )
    finally:
        await store.close()
    assert [t["name"] for t in out.tools] == ["glob", "grep", "read_spill"]
    grep, outside = out.tool_outputs
    assert f"s3://{s3.bucket}/" in grep
    assert outside.startswith("Error: ") and "outside this worker's spill store" in outside
    assert ("fs_search.read_spill", task_queue_for(wsid)) in SCHEDULED[wsid]
