"""The framework adapters when the catalogue did not come: no worker, or a worker without rg.

One policy for all seven adapters (the adapter kit's ``offered_specs``): a workspace no worker
serves raises a non-retryable SEARCH_FAILED naming it (the workflow fails at once rather than
run an agent without tools; each adapter's own tests show what its framework does with it),
and a worker whose rg is missing offers no tools, with a workflow warning (as the seed says).
Real dev server and each framework's own test model for the end-to-end cases.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import uuid
from pathlib import Path

import pytest
from pydantic_ai import FunctionToolset
from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
from pydantic_ai.toolsets import CombinedToolset
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.openai_agents.testing import AgentEnvironment, ResponseBuilders, TestModel
from temporalio.worker import Worker

from fs_search.activities._contract import ErrorCode, ToolError, ToolsResult
from fs_search.worker import new_worker
from fs_search.workflows import FsSearchPlugin, FsSearchTools, openai_agents, pydantic_ai
from tests.helpers import write_tree
from tests.workflows import openai_agents_workflows as oa
from tests.workflows import pydantic_ai_workflows as pa
from tests.workflows.agent_frameworks import assert_unserved

# The calls below wait this long for a worker before the liveness check (default 8 s).
SCHEDULE_TO_START_S = 2.0
# No worker: the workflow fails within schedule-to-start + one DescribeTaskQueue; far below
# the 30 s the adapters took before, with room for a busy machine.
FAILS_WITHIN_S = 20


def _plugin(payload_dir: Path) -> FsSearchPlugin:
    return FsSearchPlugin(spill_url=f"file://{payload_dir}", getenv=lambda _: None)


async def _openai_agent(client: Client, payload_dir: Path, model: TestModel, job: oa.AgentRun):
    """Run the OpenAI Agents workflow to its end (its outcome, or WorkflowFailureError)."""
    queue = f"agents-{uuid.uuid4()}"
    async with AgentEnvironment(model=model) as agents_env:
        agent_client = await Client.connect(
            client.service_client.config.target_host,
            namespace=client.namespace,
            plugins=[agents_env.openai_agents_plugin, _plugin(payload_dir)],
        )
        async with Worker(agent_client, task_queue=queue, workflows=[oa.OpenAISearchAgent]):
            return await agent_client.execute_workflow(
                oa.OpenAISearchAgent.run, job, id=f"wf-{uuid.uuid4()}", task_queue=queue
            )


async def _pydantic_agent(client: Client, payload_dir: Path, job: pa.AgentRun):
    """Run the pydantic-ai workflow (TemporalDurability) to its end."""
    queue = f"agents-{uuid.uuid4()}"
    agent_client = await Client.connect(
        client.service_client.config.target_host,
        namespace=client.namespace,
        plugins=[PydanticAIPlugin(), _plugin(payload_dir)],
    )
    async with Worker(agent_client, task_queue=queue, workflows=[pa.DurableSearchAgent]):
        return await agent_client.execute_workflow(
            pa.DurableSearchAgent.run, job, id=f"wf-{uuid.uuid4()}", task_queue=queue
        )


async def test_openai_agent_with_no_worker_fails_at_once_naming_the_workspace(dev_env, payload_dir):
    """function_tools on the catalogue of a workspace no worker serves raises a non-retryable
    SEARCH_FAILED naming it: the workflow fails, the agent never runs toolless."""
    wsid = f"ws-{uuid.uuid4()}"
    model = TestModel.returning_responses(
        [ResponseBuilders.tool_call('{"pattern": "*"}', "glob", call_id="call-0")]
        + [ResponseBuilders.output_message("done")]
    )
    job = oa.AgentRun(workspace_id=wsid, prompt="list", schedule_to_start_s=SCHEDULE_TO_START_S)
    with pytest.raises(WorkflowFailureError) as info:
        await asyncio.wait_for(
            _openai_agent(dev_env.client, payload_dir, model, job), FAILS_WITHIN_S
        )
    assert_unserved(info.value, wsid)


async def test_pydantic_agent_with_no_worker_fails_at_once_naming_the_workspace(
    dev_env, payload_dir
):
    """toolset on the catalogue of a workspace no worker serves raises a non-retryable
    SEARCH_FAILED naming it (not pydantic-ai's UserError about runtime toolsets)."""
    wsid = f"ws-{uuid.uuid4()}"
    job = pa.AgentRun(
        workspace_id=wsid,
        calls=[("glob", {"pattern": "*"})],
        schedule_to_start_s=SCHEDULE_TO_START_S,
    )
    with pytest.raises(WorkflowFailureError) as info:
        await asyncio.wait_for(_pydantic_agent(dev_env.client, payload_dir, job), FAILS_WITHIN_S)
    assert_unserved(info.value, wsid)


def _rg_missing_warnings(caplog: pytest.LogCaptureFixture, wsid: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING
        and r.name.startswith("temporalio.workflow")
        and wsid in r.getMessage()
        and "ripgrep is not available on this worker" in r.getMessage()
    ]


async def test_openai_agent_without_rg_on_the_worker_gets_no_tools_and_a_warning(
    dev_env, payload_dir, make_activities, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    """The worker answers but has no rg: no tools, no instructions, the run goes on, and a
    workflow warning names the workspace and the worker's reason."""
    caplog.set_level(logging.WARNING, logger="temporalio.workflow")
    ws = write_tree(tmp_path / "ws", {"a.py": "x\n"})
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws, rg_path=str(tmp_path / "no-such-rg"))
    model = TestModel.returning_responses([ResponseBuilders.output_message("no tools")])
    async with new_worker(dev_env.client, acts, workspace_id=wsid):
        out = await asyncio.wait_for(
            _openai_agent(
                dev_env.client, payload_dir, model, oa.AgentRun(workspace_id=wsid, prompt="hi")
            ),
            60,
        )
    assert out.tools == [] and out.instructions == "" and out.final_output == "no tools"
    assert _rg_missing_warnings(caplog, wsid), [r.getMessage() for r in caplog.records]


async def test_pydantic_agent_without_rg_on_the_worker_gets_no_tools_and_a_warning(
    dev_env, payload_dir, make_activities, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    """The same under pydantic-ai: the empty toolset is accepted per run (an empty
    FunctionToolset would be refused as activity-backed), the model is offered nothing."""
    caplog.set_level(logging.WARNING, logger="temporalio.workflow")
    ws = write_tree(tmp_path / "ws", {"a.py": "x\n"})
    wsid = f"ws-{uuid.uuid4()}"
    acts = await make_activities(ws, rg_path=str(tmp_path / "no-such-rg"))
    async with new_worker(dev_env.client, acts, workspace_id=wsid):
        out = await asyncio.wait_for(
            _pydantic_agent(dev_env.client, payload_dir, pa.AgentRun(workspace_id=wsid, calls=[])),
            60,
        )
    assert out.tools == [] and out.instructions is None and out.tool_outputs == []
    assert _rg_missing_warnings(caplog, wsid), [r.getMessage() for r in caplog.records]


def _unserved_catalogue() -> ToolsResult:
    """What FsSearchTools.catalogue() returns when no worker answered."""
    return ToolsResult(
        available=False,
        reason="no fs-search worker is serving workspace 'ws': nothing polls its task queue",
        sample_over_cap_glob_results=False,
        timeout_ms=1,
        error=ToolError(name="SearchError", code=ErrorCode.SEARCH_FAILED),
    )


def _without_rg() -> ToolsResult:
    """What a worker without rg answers."""
    return ToolsResult(
        available=False,
        reason="ripgrep is not available on this worker",
        sample_over_cap_glob_results=False,
        timeout_ms=1,
        workspace_id="ws",
    )


# Every adapter's builder of tools (and LangGraph's context, built before the graph runs).
BUILDERS = [
    ("openai_agents", "function_tools"),
    ("pydantic_ai", "toolset"),
    ("google_genai", "function_tools"),
    ("google_adk", "function_tools"),
    ("strands", "agent_tools"),
    ("langchain", "structured_tools"),
    ("langchain", "search_context"),
    ("agent_harness", "harness_tools"),
]


def _builder(adapter: str, name: str):
    return getattr(importlib.import_module(f"fs_search.workflows.{adapter}"), name)


@pytest.mark.parametrize(("adapter", "name"), BUILDERS, ids=[".".join(b) for b in BUILDERS])
def test_adapters_raise_when_no_worker_answered(adapter, name):
    """Every adapter, outside a workflow too: the catalogue's failure is raised as a
    non-retryable ApplicationError of its code, with its message."""
    make = _builder(adapter, name)
    with pytest.raises(ApplicationError) as info:
        make(FsSearchTools("ws"), _unserved_catalogue())
    assert info.value.type == "SEARCH_FAILED" and info.value.non_retryable
    assert info.value.message.startswith("no fs-search worker is serving workspace 'ws'")
    assert info.value.details == ({"name": "SearchError", "code": "SEARCH_FAILED"},)


def test_a_failure_not_naming_the_workspace_is_prefixed_with_it():
    """Whatever the failure's message, the raised error names the workspace."""
    catalogue = _unserved_catalogue().model_copy(update={"reason": "the search failed: boom"})
    with pytest.raises(ApplicationError) as info:
        openai_agents.function_tools(FsSearchTools("ws-9"), catalogue)
    assert info.value.message == "fs-search's tools for workspace 'ws-9': the search failed: boom"


@pytest.mark.parametrize(("adapter", "name"), BUILDERS[2:6] + BUILDERS[7:])
def test_every_other_adapter_offers_nothing_for_a_worker_without_rg(adapter, name, caplog):
    """A worker's own unavailable catalogue: no tools, no exception, the kit's warning."""
    caplog.set_level(logging.WARNING)
    assert _builder(adapter, name)(FsSearchTools("ws"), _without_rg()) == []
    assert [r.getMessage() for r in caplog.records] == [
        "fs-search offers no tools for workspace 'ws': ripgrep is not available on this "
        "worker; the agent runs without glob and grep"
    ]


def test_openai_function_tools_omit_the_tools_of_a_worker_without_rg(caplog):
    """A worker's own unavailable catalogue gives no tools, no exception, and a warning."""
    caplog.set_level(logging.WARNING)
    assert openai_agents.function_tools(FsSearchTools("ws"), _without_rg()) == []
    assert [r.getMessage() for r in caplog.records] == [
        "fs-search offers no tools for workspace 'ws': ripgrep is not available on this "
        "worker; the agent runs without glob and grep"
    ]


def test_pydantic_toolset_of_a_worker_without_rg_is_empty_and_accepted_per_run():
    """An empty toolset that pydantic-ai's Temporal integration accepts per run (it refuses an
    empty FunctionToolset as one that would run its tools un-checkpointed)."""
    made = pydantic_ai.toolset(FsSearchTools("ws"), _without_rg())
    leaves: list = []
    made.apply(leaves.append)
    assert isinstance(made, CombinedToolset) and leaves == []
    # What rejected it before: any FunctionToolset leaf, empty or not, without the opt-out.
    assert not [leaf for leaf in leaves if isinstance(leaf, FunctionToolset)]
