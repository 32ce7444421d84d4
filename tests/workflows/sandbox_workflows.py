"""Workflows for the plugin tests, written as a user would once the plugin is installed:
fs_search is imported at top level, not inside a sandbox passthrough block."""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RetryPolicy

from fs_search.activities._contract import ToolResult
from fs_search.workflows import FsSearchTools

# Set on every fs_search module of the host by the tests: a module without it was imported
# afresh inside the sandbox.
HOST_PROBE = "_fs_search_host_probe"


class Probe(BaseModel):
    """What a run saw: fs_search modules re-imported in its sandbox, and one call's result
    (as JSON: a re-imported ToolResult class would not be the helper's)."""

    reimported: list[str]
    result: dict[str, Any]


@workflow.defn
class TopLevelImportWorkflow:
    """Reports which fs_search modules its sandbox imported afresh, and runs one call."""

    @workflow.run
    async def run(self, workspace_id: str) -> Probe:
        reimported = sorted(
            name
            for name, module in list(sys.modules.items())
            if name.split(".")[0] == "fs_search" and not hasattr(module, HOST_PROBE)
        )
        # Refused before scheduling: no worker is needed for the workspace.
        result = await FsSearchTools(workspace_id).call("grep", {"pattern": " "})
        return Probe(reimported=reimported, result=result.model_dump(mode="json"))


class OwnPolicyCall(BaseModel):
    """One call made with a caller's own retry policy (which lists no error types)."""

    workspace_id: str
    tool: str
    arguments: dict[str, Any]
    maximum_attempts: int


@workflow.defn
class OwnRetryPolicyWorkflow:
    """Runs one call with the caller's own RetryPolicy."""

    @workflow.run
    async def run(self, call: OwnPolicyCall) -> ToolResult:
        tools = FsSearchTools(
            call.workspace_id,
            retry_policy=RetryPolicy(
                maximum_attempts=call.maximum_attempts,
                initial_interval=timedelta(milliseconds=100),
            ),
        )
        return await tools.call(call.tool, call.arguments)
