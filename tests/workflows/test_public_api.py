"""The package fronts: every name in __all__ resolves, and the workflow front stays light."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

FRONTS = ["fs_search.activities", "fs_search.workflows", "fs_search.worker"]


@pytest.mark.parametrize("package", FRONTS)
def test_every_public_name_resolves(package):
    """Each name a front lists in __all__ can be imported from it."""
    module = importlib.import_module(package)
    assert len(set(module.__all__)) == len(module.__all__)
    for name in module.__all__:
        assert getattr(module, name) is not None, name


def test_a_user_imports_the_plugin_and_tools_from_the_front():
    """`from fs_search.workflows import FsSearchPlugin, FsSearchTools` is the real thing."""
    from fs_search.workflows import FsSearchPlugin, FsSearchTools, ToolResult, task_queue_for
    from fs_search.workflows.plugin import FsSearchPlugin as FromModule
    from fs_search.workflows.tools import FsSearchTools as ToolsFromModule

    assert FsSearchPlugin is FromModule and FsSearchTools is ToolsFromModule
    assert ToolResult.failure.__name__ == "failure"
    assert task_queue_for("ws-1") == "fs-search/ws-1"


def test_unknown_names_are_attribute_errors():
    """The lazy fronts do not swallow typos."""
    for package in FRONTS:
        with pytest.raises(AttributeError):
            _ = importlib.import_module(package).NoSuchName


def test_workflow_front_loads_no_worker_side_code():
    """Importing fs_search.workflows (as workflow code does) loads neither the plugin nor the
    activities' machinery, so Temporal's sandbox re-imports stay cheap and deterministic."""
    heavy = [
        "fs_search.workflows.plugin",
        "fs_search.activities.storage",
        "fs_search.activities.search",
        "fs_search.activities.rg._executor",
        "fs_search.worker",
        "opentelemetry.sdk",
        "aioboto3",
    ]
    code = f"import sys, fs_search.workflows\nprint([m for m in {heavy!r} if m in sys.modules])\n"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"
