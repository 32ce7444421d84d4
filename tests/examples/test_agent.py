"""The example agent runs a session through a real worker and rg, offline in skipped time."""

from __future__ import annotations

from temporalio.worker import Worker

from examples.agent import AgentInput, ToolCall, start_example_agent
from examples.agent import ExampleAgentWorkflow as Agent
from fs_search.worker.testing import search_worker, time_skipping_env
from tests.helpers import write_tree


async def test_the_example_agent_runs_each_call_against_the_catalogue(tmp_path):
    """The session's calls run in order through the real worker: glob and grep answer from
    the tree; read_spill, not offered with a file:// store, is Error: text; the catalogue the
    model would be shown comes back with them, and the UI's summary names the session."""
    ws = write_tree(tmp_path / "ws", {"src/app.py": "# TODO: ship\n", "README.md": "hi\n"})
    session = AgentInput(
        workspace_id="ws-ex",
        calls=[
            ToolCall(name="glob", arguments={"pattern": "**/*.py"}),
            ToolCall(name="grep", arguments={"pattern": "TODO"}),
            ToolCall(name="read_spill", arguments={"locator": "s3://b/x.grep.txt"}),
        ],
    )
    async with time_skipping_env() as env:
        async with (
            Worker(env.client, task_queue="agents", workflows=[Agent]),
            search_worker(env.client, ws, workspace_id="ws-ex"),
        ):
            handle = await start_example_agent(
                env.client, session, id="example-agent", task_queue="agents"
            )
            out = await handle.result()
            description = await handle.describe()
    assert [tool.name for tool in out.catalogue.tools] == ["glob", "grep"]
    glob, grep, read_spill = out.results
    assert (glob.is_error, glob.text) == (False, "src/app.py")
    assert (grep.is_error, grep.text) == (False, "src/app.py:\n  Line 1: # TODO: ship")
    assert read_spill.is_error and read_spill.text.startswith("Error: ")
    assert "read_spill" in read_spill.text
    assert await description.static_summary() == "example agent: 3 tool calls on workspace ws-ex"
