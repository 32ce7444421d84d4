"""The running activity's spill key: its workspace, workflow run, activity id and tool."""

from __future__ import annotations

import dataclasses
import re
import socket

from temporalio.testing import ActivityEnvironment

from fs_search.activities._telemetry import SearchTelemetry
from fs_search.activities.storage import SpillKey
from fs_search.activities.storage._keys import spill_key
from fs_search.activities.storage._spills import UNLABELLED, spill_workspace
from tests.helpers import write_tree

# How a workspaces root names its workspaces (worker/_fleet.py).
VALID_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def test_a_workflow_activity_is_keyed_by_its_workspace_run_and_activity_id():
    """Scheduled from a workflow: the workspace, workflow id, run id, activity id and the tool."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info, workflow_id="wf", workflow_run_id="run-1", activity_id="7"
    )
    key = env.run(spill_key, "grep", "ws-1")
    assert key == SpillKey("wf", "run-1", "7", "grep", workspace="ws-1")
    assert key.relpath() == "ws-1/wf/run-1/7.grep.txt"


def test_a_retry_of_the_same_activity_gets_the_same_key():
    """Another attempt of one activity overwrites its own artifact: the key ignores attempts."""
    env = ActivityEnvironment()
    first = env.run(spill_key, "glob", "ws-1")
    env.info = dataclasses.replace(env.info, attempt=2)
    assert env.run(spill_key, "glob", "ws-1") == first
    assert env.run(spill_key, "glob", "ws-2") != first


def test_a_standalone_activity_is_keyed_by_its_activity_run():
    """Started on its own (no workflow): 'standalone', the activity run id and id."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info, workflow_id=None, workflow_run_id=None, activity_run_id="ar-9", activity_id="a"
    )
    key = env.run(spill_key, "glob", "ws-1")
    assert key == SpillKey("standalone", "ar-9", "a", "glob", workspace="ws-1")


def test_a_named_workspace_spills_under_its_id():
    """Activities built for a workspace id spill under that id."""
    assert spill_workspace("repo.main", "/anywhere") == "repo.main"


def test_an_unnamed_workspace_spills_under_its_host_and_directory(tmp_path):
    """Without an id: _unnamed-<digest>, never a valid id, one per directory and host."""
    a, b = write_tree(tmp_path, {"a/f": "", "b/f": ""}) / "a", tmp_path / "b"
    assert SearchTelemetry().workspace_id == UNLABELLED  # what telemetry says without an id
    unnamed = spill_workspace(UNLABELLED, a)
    assert re.fullmatch(r"_unnamed-[0-9a-f]{16}", unnamed) and not VALID_ID.fullmatch(unnamed)
    assert spill_workspace("", a) == unnamed == spill_workspace(UNLABELLED, tmp_path / "a/../a")
    assert spill_workspace(UNLABELLED, b) != unnamed
    assert socket.gethostname() not in unnamed and str(a) not in unnamed
