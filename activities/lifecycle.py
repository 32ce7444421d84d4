"""The running activity's identity: the key its spill artifact is saved under."""

from __future__ import annotations

from temporalio import activity

from fs_search.activities.spill import SpillKey


def spill_key(tool: str) -> SpillKey:
    """The running activity's artifact key: workflow run + activity id + tool."""
    info = activity.info()
    if info.workflow_id is not None:
        return SpillKey(
            workflow_id=info.workflow_id,
            run_id=info.workflow_run_id or "null",
            activity_id=info.activity_id,
            tool=tool,
        )
    return SpillKey(
        workflow_id="standalone",
        run_id=info.activity_run_id or "null",
        activity_id=info.activity_id,
        tool=tool,
    )
