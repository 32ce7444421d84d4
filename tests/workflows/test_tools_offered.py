"""FsSearchTools.call dispatches only the tools the worker's catalogue offers.

read_spill is offered only with a spill store the model cannot read itself (S3); with a
``file://`` store the model reads spill files with its own read tool, and a read_spill call is
``Error:`` text naming it. The catalogue is the one given to ``call``, else the last one
``catalogue()`` fetched; with neither, glob and grep run and read_spill is refused.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from temporalio.worker import Worker

from examples.agent import AgentInput, ExampleAgentWorkflow, ToolCall
from fs_search.activities._contract import ErrorCode, ReadSpillResult
from fs_search.worker.testing import canned_activities, search_worker
from fs_search.workflows import (
    FsSearchTools,
    ToolResult,
    ToolsResult,
    openai_agents,
    pydantic_ai,
    task_queue_for,
)
from tests.helpers import write_tree
from tests.workflows.agent_frameworks import scheduled_activities
from tests.workflows.canned import UNAVAILABLE, CannedTools, catalogue
from tests.workflows.offered_workflows import OfferedCalls, OfferedCallsWorkflow, OfferedOutcome

WITH_READ_SPILL = catalogue(read_spill=True)
WITHOUT_READ_SPILL = catalogue(read_spill=False)
READ_SPILL = ("read_spill", {"locator": "s3://bucket/fs-search/ws/a.grep.txt"})
NOT_OFFERED = "tool 'read_spill' is not offered by this worker (offered: glob, grep)"
FETCH_FIRST = "fetch the catalogue first (FsSearchTools.catalogue()) or pass it"


def assert_refused(result: ToolResult, message: str) -> None:
    assert result.is_error and result.error is not None
    assert result.error.code == ErrorCode.INVALID_ARGUMENT
    assert result.text.startswith("Error: ") and message in result.text, result.text


async def test_without_a_catalogue_glob_and_grep_run_and_read_spill_is_refused():
    """With no catalogue known, glob and grep are dispatched and read_spill says to fetch one."""
    tools = CannedTools("ws")
    assert (await tools.call("glob", {"pattern": "*"})).text == "ran glob"
    assert (await tools.call("grep", {"pattern": "x"})).text == "ran grep"
    refused = await tools.call(*READ_SPILL)
    assert_refused(refused, "tool 'read_spill' is dispatched only when the worker's catalogue")
    assert FETCH_FIRST in refused.text


@pytest.mark.parametrize(
    ("given", "read_spill"),
    [(WITH_READ_SPILL, "ran read_spill"), (WITHOUT_READ_SPILL, NOT_OFFERED)],
    ids=["s3-store", "file-store"],
)
async def test_a_given_catalogue_decides_read_spill(given: ToolsResult, read_spill: str):
    """A catalogue passed to call dispatches read_spill only when it offers it."""
    result = await CannedTools("ws").call(*READ_SPILL, catalogue=given)
    if result.is_error:
        assert_refused(result, read_spill)
    else:
        assert result.text == read_spill
    assert (await CannedTools("ws").call("grep", {"pattern": "x"}, catalogue=given)).text == (
        "ran grep"
    )


async def test_an_unavailable_catalogue_counts_as_none():
    """An unavailable catalogue offers nothing it knows of: glob and grep run, read_spill not."""
    tools = CannedTools("ws")
    assert (await tools.call("grep", {"pattern": "x"}, catalogue=UNAVAILABLE)).text == "ran grep"
    assert_refused(await tools.call(*READ_SPILL, catalogue=UNAVAILABLE), FETCH_FIRST)


async def test_an_unknown_tool_names_what_is_offered():
    """An unknown tool's refusal lists the tools the catalogue offers."""
    result = await CannedTools("ws").call("find", {}, catalogue=WITH_READ_SPILL)
    assert_refused(result, "unknown tool 'find' (offered: glob, grep, read_spill)")


async def test_openai_agents_tools_pass_their_catalogue():
    """The Agents SDK read_spill tool runs on a FsSearchTools that never fetched a catalogue."""
    [*_, read_spill] = openai_agents.function_tools(CannedTools("ws"), WITH_READ_SPILL)
    assert read_spill.name == "read_spill"
    text = await read_spill.on_invoke_tool(None, '{"locator": "s3://b/k"}')  # type: ignore[arg-type]
    assert text == "ran read_spill"


async def test_pydantic_ai_tools_pass_their_catalogue():
    """The pydantic-ai read_spill tool runs on a FsSearchTools that never fetched a catalogue."""
    toolset = pydantic_ai.toolset(CannedTools("ws"), WITH_READ_SPILL)
    tool = toolset.tools["read_spill"]
    assert await tool.function_schema.call({"locator": "s3://b/k"}, None) == "ran read_spill"  # type: ignore[arg-type]


# --- in a workflow, on the time-skipping server ------------------------------------------

PAGE = ReadSpillResult(
    locator=READ_SPILL[1]["locator"], text="a.py:", offset=0, next_offset=None, total_lines=1
)


async def _offered_calls(env, spec: OfferedCalls, *, offers_read_spill: bool):
    """Run OfferedCallsWorkflow against canned activities whose catalogue offers read_spill
    or not (read_spill answers either way): the outcome and the activities scheduled."""
    queue = f"wf-{uuid.uuid4()}"
    canned = canned_activities(
        tools=WITH_READ_SPILL if offers_read_spill else WITHOUT_READ_SPILL, read_spill=PAGE
    )
    async with (
        Worker(env.client, task_queue=task_queue_for(spec.workspace_id), activities=canned),
        Worker(env.client, task_queue=queue, workflows=[OfferedCallsWorkflow]),
    ):
        handle = await env.client.start_workflow(
            OfferedCallsWorkflow.run, spec, id=f"wf-{uuid.uuid4()}", task_queue=queue
        )
        out = await asyncio.wait_for(handle.result(), 60)
        return OfferedOutcome.model_validate(out), [
            a for a, _ in await scheduled_activities(handle)
        ]


async def test_call_dispatches_read_spill_when_the_fetched_catalogue_offers_it(ts_env):
    """After catalogue() fetched one offering read_spill, call dispatches it to the worker."""
    spec = OfferedCalls(workspace_id=f"ws-{uuid.uuid4()}", calls=[READ_SPILL], fetch=True)
    out, scheduled = await _offered_calls(ts_env, spec, offers_read_spill=True)
    [page] = out.results
    assert not page.is_error and page.text.startswith("a.py:")
    assert scheduled == ["fs_search.tools", "fs_search.read_spill"]


@pytest.mark.parametrize(
    ("fetch", "given", "message"),
    [
        (True, None, NOT_OFFERED),
        (False, None, FETCH_FIRST),
        (False, WITHOUT_READ_SPILL, NOT_OFFERED),
    ],
    ids=["fetched-file-store", "nothing-fetched", "given-file-store"],
)
async def test_call_refuses_read_spill_the_catalogue_does_not_offer(ts_env, fetch, given, message):
    """read_spill not offered (file store) or with no catalogue known is refused, unscheduled."""
    spec = OfferedCalls(
        workspace_id=f"ws-{uuid.uuid4()}",
        calls=[READ_SPILL, ("grep", {"pattern": "x"})],
        fetch=fetch,
        catalogue=given,
    )
    out, scheduled = await _offered_calls(ts_env, spec, offers_read_spill=False)
    refused, grep = out.results
    assert_refused(refused, message)
    assert "fs_search.read_spill" not in scheduled
    assert "fs_search.grep" in scheduled  # grep ran (and failed: none canned)
    assert grep.error is not None and "no canned result" in grep.text


async def test_a_given_catalogue_wins_over_the_fetched_one(ts_env):
    """A catalogue passed to call decides, whatever catalogue() fetched."""
    spec = OfferedCalls(
        workspace_id=f"ws-{uuid.uuid4()}",
        calls=[READ_SPILL],
        fetch=True,
        catalogue=WITHOUT_READ_SPILL,
    )
    out, scheduled = await _offered_calls(ts_env, spec, offers_read_spill=True)
    assert out.fetched is not None and "read_spill" in [t.name for t in out.fetched.tools]
    assert_refused(out.results[0], NOT_OFFERED)
    assert "fs_search.read_spill" not in scheduled


async def test_example_agent_refuses_read_spill_with_a_file_store(ts_env, tmp_path: Path):
    """The example agent passes its catalogue: with a file:// store read_spill is refused."""
    ws = write_tree(tmp_path / "ws", {"a.py": "needle = 1\n"})
    wsid, queue = f"ws-{uuid.uuid4()}", f"wf-{uuid.uuid4()}"
    async with (
        search_worker(ts_env.client, ws, workspace_id=wsid),
        Worker(ts_env.client, task_queue=queue, workflows=[ExampleAgentWorkflow]),
    ):
        out = await ts_env.client.execute_workflow(
            ExampleAgentWorkflow.run,
            AgentInput(
                workspace_id=wsid,
                calls=[
                    ToolCall(name="read_spill", arguments=READ_SPILL[1]),
                    ToolCall(name="grep", arguments={"pattern": "needle"}),
                ],
            ),
            id=f"wf-{uuid.uuid4()}",
            task_queue=queue,
        )
    assert [t.name for t in out.catalogue.tools] == ["glob", "grep"]
    refused, grep = out.results
    assert_refused(refused, NOT_OFFERED)
    assert grep.text == "a.py:\n  Line 1: needle = 1"


async def test_the_direct_methods_are_not_checked_against_a_catalogue():
    """read_spill() called directly goes straight to its argument checks, catalogue or not."""
    result = await FsSearchTools("ws").read_spill("s3://b/k", offset=-1)
    assert_refused(result, "offset must be >= 0 (got -1)")
