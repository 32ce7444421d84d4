"""Error messages cap what they echo (issue 34): a model's argument object with 200,000
unknown keys, or a 30 KB pattern rg cannot parse, through the dev server, a real worker and
rg, gets an ``Error:`` of a few KB, never megabytes."""

from __future__ import annotations

import uuid

from temporalio.worker import Worker

from fs_search.activities._contract import MAX_PATTERN_BYTES, ErrorCode
from fs_search.worker import new_worker
from tests.helpers import write_tree
from tests.workflows_under_test import ManyKeys, ManyKeysWorkflow, Options

# What an error may take, "Error: " and all (the contract caps messages at 4 KiB).
MESSAGE_CAP = 4096 + 64


async def _call(dev_env, acts, spec: ManyKeys):
    wid = acts.telemetry.workspace_id
    queue = f"wf-{uuid.uuid4()}"
    async with (
        new_worker(dev_env.client, acts, workspace_id=wid),
        Worker(dev_env.client, task_queue=queue, workflows=[ManyKeysWorkflow]),
    ):
        return await dev_env.client.execute_workflow(
            ManyKeysWorkflow.run, spec, id=f"keys-{uuid.uuid4()}", task_queue=queue
        )


async def test_two_hundred_thousand_unknown_keys_get_a_short_error(
    dev_env, tmp_path, make_activities
):
    """INVALID_ARGUMENT naming a few of the unknown keys and how many more there are."""
    ws = write_tree(tmp_path / "ws", {"a.txt": "needle\n"})
    acts = await make_activities(ws, workspace_id=f"keys-{uuid.uuid4().hex[:8]}")
    options = Options(workspace_id=acts.telemetry.workspace_id)
    flood = ManyKeys(options=options, tool="grep", arguments={"pattern": "needle"}, keys=200_000)
    result = await _call(dev_env, acts, flood)
    assert result.is_error and result.error.code == ErrorCode.INVALID_ARGUMENT
    assert len(result.text.encode()) <= MESSAGE_CAP, len(result.text)
    assert "unknown_0, unknown_1, " in result.text and "and 199,992 more" in result.text
    assert "(allowed: pattern, path, include)" in result.text
    # The same call without them is served: the refusal is about the keys alone.
    plain = await _call(
        dev_env, acts, ManyKeys(options=options, tool="grep", arguments={"pattern": "needle"})
    )
    assert not plain.is_error and plain.result.total == 1


async def test_a_huge_pattern_rg_rejects_gets_a_short_error(dev_env, tmp_path, make_activities):
    """rg's parse error quotes the whole pattern: the model gets its start, capped."""
    ws = write_tree(tmp_path / "ws", {"a.txt": "needle\n"})
    acts = await make_activities(ws, workspace_id=f"pat-{uuid.uuid4().hex[:8]}")
    options = Options(workspace_id=acts.telemetry.workspace_id)
    pattern = "(" + "a" * (MAX_PATTERN_BYTES - 100)
    result = await _call(
        dev_env, acts, ManyKeys(options=options, tool="grep", arguments={"pattern": pattern})
    )
    assert result.is_error and result.error.code == ErrorCode.SEARCH_INVALID_PATTERN, result.text[
        :300
    ]
    assert len(result.text.encode()) <= MESSAGE_CAP, len(result.text)
    assert result.text.startswith("Error: invalid pattern")
