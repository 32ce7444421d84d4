"""The running activity's spill key: its workflow run, activity id and tool."""

from __future__ import annotations

import dataclasses

from temporalio.testing import ActivityEnvironment

from fs_search.activities.saving import spill_key
from fs_search.activities.storage import SpillKey


def test_a_workflow_activity_is_keyed_by_its_run_and_activity_id():
    """Scheduled from a workflow: workflow id, run id, activity id and the tool."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info, workflow_id="wf", workflow_run_id="run-1", activity_id="7"
    )
    key = env.run(spill_key, "grep")
    assert key == SpillKey(workflow_id="wf", run_id="run-1", activity_id="7", tool="grep")


def test_a_retry_of_the_same_activity_gets_the_same_key():
    """Another attempt of one activity overwrites its own artifact: the key ignores attempts."""
    env = ActivityEnvironment()
    first = env.run(spill_key, "glob")
    env.info = dataclasses.replace(env.info, attempt=2)
    assert env.run(spill_key, "glob") == first


def test_a_standalone_activity_is_keyed_by_its_activity_run():
    """Started on its own (no workflow): 'standalone', the activity run id and id."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info, workflow_id=None, workflow_run_id=None, activity_run_id="ar-9", activity_id="a"
    )
    key = env.run(spill_key, "glob")
    assert key == SpillKey(workflow_id="standalone", run_id="ar-9", activity_id="a", tool="glob")
