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
    from fs_search.workflows._plugin import FsSearchPlugin as FromModule
    from fs_search.workflows._tools import FsSearchTools as ToolsFromModule

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
        "fs_search.workflows._plugin",
        "fs_search.activities.storage",
        "fs_search.activities._search",
        "fs_search.activities.rg._executor",
        "fs_search.worker",
        "opentelemetry.sdk",
        "aioboto3",
    ]
    code = f"import sys, fs_search.workflows\nprint([m for m in {heavy!r} if m in sys.modules])\n"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


def test_the_operator_imports_the_workers_parts_from_its_front():
    """`fs_search.worker` is the operator's front: the settings, the shared services, the
    factories, the real things."""
    from fs_search.activities._config import FsSearchConfig, StorageSettings
    from fs_search.worker import FsSearchConfig as Config
    from fs_search.worker import Services, build_services, new_worker
    from fs_search.worker import StorageSettings as Settings
    from fs_search.worker._app import Services as FromApp
    from fs_search.worker._app import build_services as build
    from fs_search.worker._app import new_worker as new

    assert (Config, Settings, Services) == (FsSearchConfig, StorageSettings, FromApp)
    assert (build_services, new_worker) == (build, new)


def test_the_contract_has_one_import_path():
    """The models are defined once (``fs_search.activities._contract``) and reach callers through
    ``fs_search.workflows`` only: the activities and worker fronts do not re-export them."""
    import fs_search.activities
    import fs_search.activities._contract as contract
    import fs_search.worker
    import fs_search.worker.testing
    import fs_search.workflows

    for name in fs_search.workflows.__all__:
        if name in contract.__all__:
            assert getattr(fs_search.workflows, name) is getattr(contract, name), name
    for front in (fs_search.activities, fs_search.worker, fs_search.worker.testing):
        assert not set(front.__all__) & set(contract.__all__), front.__name__


@pytest.mark.parametrize("package", FRONTS)
def test_each_package_ships_py_typed(package):
    """PEP 561: type checkers read the inline types of every package."""
    from importlib.resources import files

    assert files(package).joinpath("py.typed").is_file()


def test_the_activities_front_loads_through_the_sandbox():
    """Workflow code re-imported by a sandbox that does not pass fs_search through reads the
    activities' front inside ``imports_passed_through``: its lazy names come from the host's
    modules, never from a second copy set on the host's package (a second ErrorCode)."""
    code = """
from temporalio import workflow
from temporalio.worker.workflow_sandbox import SandboxRestrictions
from temporalio.worker.workflow_sandbox._importer import Importer
from temporalio.worker.workflow_sandbox._restrictions import RestrictionContext
import fs_search.activities
import fs_search.activities._contract as host

with Importer(SandboxRestrictions.default, RestrictionContext()).applied():
    with workflow.unsafe.imports_passed_through():
        from fs_search.activities import ErrorCode
print(ErrorCode is host.ErrorCode, fs_search.activities._contract is host)
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["True", "True"]
