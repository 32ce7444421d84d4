"""fs-search inside a pydantic-ai agent made durable with Temporal (TemporalDurability, and
the deprecated TemporalAgent).

Real dev server, our real search activities on the workspace's queue, real rg; the model is
pydantic-ai's own ``FunctionModel`` running a script of tool calls.
"""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from pydantic_ai import FunctionToolset
from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
from pydantic_ai.toolsets import CombinedToolset
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import CancelledError
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
from fs_search.workflows.pydantic_ai import instructions, toolset
from tests.helpers import sparse_file, write_tree
from tests.procs import alive, group
from tests.workflows.agent_frameworks import assert_grep_turn, scheduled_activities, wait_for_rg
from tests.workflows.pydantic_ai_workflows import (
    AgentOutcome,
    AgentRun,
    DurableSearchAgent,
    LegacySearchAgent,
)

WORKFLOWS = {"durability": DurableSearchAgent, "temporal_agent": LegacySearchAgent}


# The activities each run scheduled, by workspace id: (activity type, task queue).
SCHEDULED: dict[str, list[tuple[str, str]]] = {}


async def _agent_client(client: Client, payload_dir: Path) -> Client:
    """A client for the agent's worker: PydanticAIPlugin and FsSearchPlugin."""
    return await Client.connect(
        client.service_client.config.target_host,
        namespace=client.namespace,
        plugins=[
            PydanticAIPlugin(),
            FsSearchPlugin(spill_url=f"file://{payload_dir}", getenv=lambda _: None),
        ],
    )


async def _run(client, payload_dir, workflow, job: AgentRun, *, runner=None) -> AgentOutcome:
    queue = f"agents-{uuid.uuid4()}"
    agent_client = await _agent_client(client, payload_dir)
    kwargs = {"workflow_runner": runner} if runner else {}
    async with Worker(agent_client, task_queue=queue, workflows=[workflow], **kwargs):
        handle = await agent_client.start_workflow(
            workflow.run, job, id=f"wf-{uuid.uuid4()}", task_queue=queue
        )
        outcome = await handle.result()
        SCHEDULED[job.workspace_id] = await scheduled_activities(handle)
        return outcome


async def test_the_same_grep_turn_through_a_host_queue(
    dev_env, payload_dir, make_activities, tmp_path: Path
):
    """``FsSearchTools(wsid, host=...)`` under the toolset: the same turn, every search on the
    host queue ``fs-search-host/<host>``."""
    ws = write_tree(tmp_path / "ws", {"a.py": "needle = 1\n", "b/c.py": "x\n"})
    wsid, host = f"ws-{uuid.uuid4()}", f"h-{uuid.uuid4().hex[:8]}"
    acts = await make_activities(ws, workspace_id=wsid)
    job = AgentRun(
        workspace_id=wsid,
        host=host,
        calls=[
            ("grep", {"pattern": "needle"}),
            ("grep", {"pattern": "("}),
            ("grep", {"pattern": "x", "cwd": "/etc"}),
        ],
    )
    async with new_worker(dev_env.client, acts, workspace_id=wsid, host=host):
        out = await _run(dev_env.client, payload_dir, WORKFLOWS[next(iter(WORKFLOWS))], job)
    assert_grep_turn(out, SCHEDULED[wsid], host_queue_for(host))


@pytest.mark.parametrize("runner", ["sandboxed", "unsandboxed"])
@pytest.mark.parametrize("flavour", list(WORKFLOWS))
async def test_grep_turn_reads_our_text_and_errors_keep_the_run_going(
    dev_env, payload_dir, make_activities, tmp_path: Path, flavour: str, runner: str
):
    """A grep turn gets the rendered matches; an invalid pattern comes back as Error: text and
    the run continues; the model was offered the catalogue's tools and instructions."""
    ws = write_tree(tmp_path / "ws", {"a.py": "needle = 1\n", "b/c.py": "x\n"})
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws)
    job = AgentRun(
        workspace_id=wsid,
        calls=[
            ("grep", {"pattern": "needle"}),
            ("grep", {"pattern": "("}),
            ("grep", {"pattern": "x", "cwd": "/etc"}),
        ],
    )
    async with new_worker(dev_env.client, acts, workspace_id=wsid):
        out = await _run(
            dev_env.client,
            payload_dir,
            WORKFLOWS[flavour],
            job,
            runner=UnsandboxedWorkflowRunner() if runner == "unsandboxed" else None,
        )
    assert_grep_turn(out, SCHEDULED[wsid], task_queue_for(wsid))
    assert out.instructions is not None
    assert f"{GLOB_PROMPT_HEAD}\n\n{GREP_PROMPT}" in out.instructions


@pytest.mark.parametrize("flavour", list(WORKFLOWS))
async def test_any_arguments_are_error_text_and_the_run_goes_on(
    dev_env, payload_dir, make_activities, tmp_path: Path, flavour: str
):
    """Any arguments the model sends come back as Error: text and the run reaches its answer."""
    ws = write_tree(tmp_path / "ws", {"a.py": "needle = 1\n"})
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws)
    job = AgentRun(
        workspace_id=wsid,
        calls=[
            ("grep", "[1]"),
            ("grep", '"needle"'),
            ("grep", "null"),
            ("grep", "{not json"),
            ("grep", '{"pattern": ' + "9" * 5000 + "}"),
            ("grep", '{"pattern": ' + "[" * 100_000 + "]" * 100_000 + "}"),
            ("grep", {"pattern": "needle"}),
        ],
    )
    async with new_worker(dev_env.client, acts, workspace_id=wsid):
        out = await _run(dev_env.client, payload_dir, WORKFLOWS[flavour], job)
    *refused, found = out.tool_outputs
    assert refused == [
        "Error: the arguments must be a JSON object, not an array",
        "Error: the arguments must be a JSON object, not a string",
        "Error: the arguments must be a JSON object, not null",
        refused[3],
        "Error: the arguments hold a number with too many digits",
        "Error: the arguments are nested too deeply",
    ]
    assert refused[3].startswith("Error: the arguments are not JSON: ")
    assert found == "a.py:\n  Line 1: needle = 1"
    assert [a for a in SCHEDULED[wsid] if a[0] == "fs_search.grep"] == [
        ("fs_search.grep", task_queue_for(wsid))
    ]


async def test_over_cap_grep_carries_the_spill_locator(
    dev_env, payload_dir, make_activities, tmp_path: Path
):
    """An over-cap grep shows the model a page plus the locator of the complete result."""
    ws = write_tree(tmp_path / "ws", {"many.txt": "".join(f"hit {n}\n" for n in range(40))})
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws, grep_max_matches=10)
    job = AgentRun(workspace_id=wsid, calls=[("grep", {"pattern": "hit"})])
    async with new_worker(dev_env.client, acts, workspace_id=wsid):
        out = await _run(dev_env.client, payload_dir, DurableSearchAgent, job)
    [text] = out.tool_outputs
    assert "Line 10: hit 9" in text and "Line 11: hit 10" not in text
    locator = re.search(r"Saved .* to: (\S+)", text)
    assert locator is not None, text
    assert Path(locator[1]).read_text().count("hit ") == 40


@pytest.mark.parametrize("flavour", list(WORKFLOWS))
async def test_cancelling_the_agent_workflow_kills_rg(
    dev_env, payload_dir, make_activities, tmp_path: Path, flavour: str
):
    """Cancelling the agent's workflow mid-grep cancels the workflow and kills rg's group."""
    ws = tmp_path / "ws"
    sparse_file(ws / "huge.bin")
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws)
    queue = f"agents-{uuid.uuid4()}"
    workflow = WORKFLOWS[flavour]
    client = await _agent_client(dev_env.client, payload_dir)
    job = AgentRun(workspace_id=wsid, calls=[("grep", {"pattern": "needle", "path": "huge.bin"})])
    async with (
        new_worker(dev_env.client, acts, workspace_id=wsid),
        Worker(client, task_queue=queue, workflows=[workflow]),
    ):
        handle = await client.start_workflow(
            workflow.run, job, id=f"wf-{uuid.uuid4()}", task_queue=queue
        )
        pgid = await wait_for_rg(acts)
        assert alive(group(pgid))
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()
        assert isinstance(info.value.cause, CancelledError)
        # pydantic-ai awaits the cancelled tool: rg is dead when the workflow closes.
        assert not alive(group(pgid))


async def test_time_skipping_env_with_the_pydantic_ai_plugin(tmp_path: Path):
    """Users' offline tests: the time-skipping server with PydanticAIPlugin and FsSearchPlugin
    on its client, and search_worker over tmp_path."""
    ws = write_tree(tmp_path / "ws", {"app.py": "# TODO: ship it\n"})
    plugins = [
        PydanticAIPlugin(),
        FsSearchPlugin(spill_url=f"file://{tmp_path / 'payloads'}", getenv=lambda _: None),
    ]
    job = AgentRun(
        workspace_id="ws-1", calls=[("glob", {"pattern": "*.py"}), ("grep", {"pattern": "TODO"})]
    )
    async with time_skipping_env(plugins=plugins) as env:
        async with (
            Worker(env.client, task_queue="agents", workflows=[DurableSearchAgent]),
            search_worker(env.client, ws, workspace_id="ws-1"),
        ):
            out = await env.client.execute_workflow(
                DurableSearchAgent.run, job, id=f"wf-{uuid.uuid4()}", task_queue="agents"
            )
    assert out.tool_outputs == ["app.py", "app.py:\n  Line 1: # TODO: ship it"]
    # search_worker samples over-cap globs by default: the description says so.
    assert "sampled across the entries" in out.tools[0]["description"]


def test_toolset_mirrors_the_catalogue_and_runs_in_the_workflow():
    """One async tool per entry, read_spill included, each marked to run in workflow code; the
    catalogue's names, descriptions and schemas; its prompt segments as instructions."""
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
    made = toolset(FsSearchTools("ws"), catalogue)
    assert isinstance(made, FunctionToolset) and made.id == "fs_search"
    assert [
        (t.name, t.description, t.function_schema.json_schema, t.metadata)
        for t in made.tools.values()
    ] == [(s.name, s.description, s.input_schema, {"temporal": False}) for s in specs]
    assert all(t.function_schema.is_async for t in made.tools.values())
    assert instructions(catalogue) == "\n\n".join(prompts)
    unavailable = ToolsResult(
        available=False, reason="down", sample_over_cap_glob_results=False, timeout_ms=1
    )
    assert isinstance(toolset(FsSearchTools("ws"), unavailable), CombinedToolset)


def test_the_core_import_does_not_need_the_extra():
    """`import fs_search.workflows` loads no pydantic_ai (the extra stays optional)."""
    code = "import sys, fs_search.workflows\nprint([m for m in sys.modules if m.split('.')[0] == 'pydantic_ai'])"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


async def test_read_spill_pages_an_s3_spill(
    dev_env, payload_dir, s3, make_activities, tmp_path: Path
):
    """With spills in S3 the toolset offers read_spill; the model pages the over-cap grep's
    saved result through it, and a locator outside the store is Error: text."""
    ws = write_tree(tmp_path / "ws", {"many.txt": "".join(f"hit {n}\n" for n in range(40))})
    wsid = f"ws-{uuid.uuid4()}"
    store = S3SpillStore(s3.bucket, f"spill-{uuid.uuid4().hex[:8]}", endpoint_url=s3.endpoint_url)
    acts = await make_activities(ws, store=store, grep_max_matches=10)
    job = AgentRun(
        workspace_id=wsid,
        calls=[
            ("grep", {"pattern": "hit"}),
            ("read_spill", {"locator": "$locator", "offset": 30, "limit": 5}),
            ("read_spill", {"locator": f"s3://{s3.bucket}/elsewhere/x.txt"}),
        ],
    )
    try:
        async with new_worker(dev_env.client, acts, workspace_id=wsid):
            out = await _run(dev_env.client, payload_dir, DurableSearchAgent, job)
    finally:
        await store.close()
    assert [t["name"] for t in out.tools] == ["glob", "grep", "read_spill"]
    grep, page, outside = out.tool_outputs
    assert "s3://" in grep
    # The artifact is the whole grep (a "many.txt:" line, then 40 match lines): 5 from 30.
    assert page.startswith("  Line 30: hit 29\n") and "Line 34: hit 33\n" in page
    assert "Line 35:" not in page and "(Lines 31-35 of 41; continue with offset=35.)" in page
    assert outside.startswith("Error: ") and "outside this worker's spill store" in outside
