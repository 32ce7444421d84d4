"""Address mode: one CLI call as one standalone activity on a running worker's queue
(``FsSearchClient``; its one-call workflow where the server has none).

This is the cold command's hot path, so it loads what that call uses and no more: Temporal's
client, the contract, the workflow side, and ``FsSearchPlugin``'s converter and storage
without the plugin (``temporalio.plugin`` loads ``temporalio.worker``: no worker runs here but
on a server without standalone activities) — no embedded server, and OpenTelemetry's Temporal
interceptor only when an exporter is configured (tests/worker/cli/test_start_up.py;
``bench/cli_start.py`` times it).
"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from fs_search.worker._connect import DEFAULT_CONNECT_TIMEOUT, TemporalUnreachable, connect
from fs_search.worker._otel_setup import telemetry_from_env
from fs_search.workflows import FsSearchClient
from fs_search.workflows._converter import fs_search_converter, storage_from

if TYPE_CHECKING:
    from fs_search.activities import ToolResult

# How long Ctrl-C waits for the call's activity to close (rg stopped) before leaving.
CANCEL_WAIT = timedelta(seconds=5)


@dataclass(frozen=True)
class CallOptions:
    """One command-line call and where to run it (``address``: a running worker's server;
    None: an embedded one)."""

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
    connect_timeout: timedelta = DEFAULT_CONNECT_TIMEOUT


async def run_address_call(options: CallOptions) -> ToolResult:
    """The call on ``options.workspace_id``'s worker at ``options.address``. Ctrl-C (this
    task cancelled) cancels the activity and waits until rg is gone (at most 5 s)."""
    assert options.workspace_id is not None and options.address is not None
    telemetry = telemetry_from_env()
    # The stores as the workers name them: a large ``--no-spill`` result comes back through
    # the payload store (FsSearchPlugin's converter, as FsSearchPlugin() would build it).
    storage = storage_from(None, None, None, os.environ.get)
    interceptors = []
    if telemetry.tracer_provider is not None:  # spans only when they go somewhere
        from temporalio.contrib.opentelemetry import TracingInterceptor

        interceptors.append(TracingInterceptor())
    async with telemetry.running():
        client = await connect(
            address=options.address,
            namespace=options.namespace,
            profile=options.profile,
            data_converter=fs_search_converter(None, external_storage=storage.external_storage()),
            interceptors=interceptors,
            runtime=telemetry.runtime,
            timeout=options.connect_timeout,
        )
        searches = FsSearchClient(
            client,
            options.workspace_id,
            host=options.host,
            cwd=options.cwd,
            spill=options.spill,
            cancel_wait=CANCEL_WAIT,
        )
        return await _one_off(searches, options)


async def _one_off(searches: FsSearchClient, options: CallOptions) -> ToolResult:
    from temporalio.service import RPCError, RPCStatusCode

    try:
        return await searches.call(options.tool, options.arguments)
    except asyncio.CancelledError:
        # Ctrl-C (asyncio.run cancels this task): FsSearchClient has cancelled the call
        # and waited for it to close.
        kind = "activity" if searches.standalone else "workflow"
        print(f"fs-search: interrupted; {kind} {searches.last_id} cancelled", file=sys.stderr)
        raise
    except RPCError as e:
        if e.status == RPCStatusCode.UNAVAILABLE:
            raise TemporalUnreachable(str(e)) from e
        raise
