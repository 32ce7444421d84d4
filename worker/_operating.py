"""What a worker process gives its operators (docs/operating.md): the drain on SIGTERM, and,
with ``--http HOST:PORT``, ``/livez``, ``/readyz`` and one Prometheus scrape at ``/metrics``.

:class:`Operating` ties :mod:`~fs_search.worker._drain`, :mod:`~fs_search.worker._health`,
:mod:`~fs_search.worker._metrics`, :mod:`~fs_search.worker._sdk_metrics` and
:mod:`~fs_search.worker._http` to one worker process, in any mode: the command line builds
one, hands it what it builds (the Temporal telemetry, the services, the client, the fleet or
the one workspace) and runs the worker until :attr:`Operating.stop`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import TYPE_CHECKING

from fs_search.activities import FsSearchConfig, SearchTelemetry, task_queue_for
from fs_search.worker._drain import Drain
from fs_search.worker._health import Health

if TYPE_CHECKING:
    from temporalio.client import Client

    from fs_search.activities import SearchActivities
    from fs_search.worker._app import Services
    from fs_search.worker._fleet import Fleet
    from fs_search.worker._metrics import WorkerMetrics
    from fs_search.worker._otel_setup import Telemetry
    from fs_search.worker._sdk_metrics import SdkMetrics

log = logging.getLogger(__name__)


class Operating:
    """The drain, the probes and the metrics of one worker process.

    Args:
        config: the worker's settings (``http``, ``drain_timeout``, ``metrics_per_workspace``).
        workspaces_root: the worker serves a workspaces root (no workspace label unless
            ``metrics_per_workspace``).
        http: the address to serve (default: ``config.http``; None: no HTTP).
    """

    def __init__(
        self, config: FsSearchConfig, *, workspaces_root: bool, http: str | None = None
    ) -> None:
        self.config = config
        self.drain = Drain(timedelta(seconds=config.drain_timeout))
        self.health = Health()
        self.drain.on_drain.append(self.health.draining)
        self.http = http or config.http
        self.per_workspace = config.metrics_per_workspace or not workspaces_root
        self.metrics: WorkerMetrics | None = None
        self.sdk: SdkMetrics | None = None
        self.url: str | None = None

    @property
    def stop(self) -> asyncio.Event:
        """Set by the first SIGTERM/SIGINT: the worker drains and returns."""
        return self.drain.stop

    @property
    def drain_timeout(self) -> timedelta:
        return self.drain.timeout

    def adopt(self, telemetry: Telemetry) -> None:
        """With HTTP on: the Temporal SDK's metrics go to the scrape (and, when the
        OpenTelemetry export is on too, to it as before, through a tee of its buffer)."""
        if self.http is None:
            return
        from fs_search.worker._metrics import WorkerMetrics
        from fs_search.worker._sdk_metrics import SdkMetrics

        if telemetry.metric_buffer is not None:
            self.sdk = SdkMetrics(telemetry.metric_buffer, per_workspace=self.per_workspace)
            telemetry.metric_buffer = self.sdk.tee()
        else:
            self.sdk, telemetry.runtime = SdkMetrics.with_runtime(per_workspace=self.per_workspace)
        self.metrics = WorkerMetrics(
            per_workspace=self.per_workspace, sdk=self.sdk, version=_version()
        )
        self.metrics.sources.checks = lambda: self.health.readiness()[1]
        self.metrics.sources.draining = lambda: self.drain.draining

    def search_telemetry(self) -> SearchTelemetry:
        """The activities' telemetry: OpenTelemetry as always, and the scrape's counters."""
        return SearchTelemetry(trace_patterns=self.config.trace_patterns, sink=self.metrics)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Operating]:
        """Handle the signals, check readiness, and serve HTTP (when on) while open."""
        self.drain.install()
        async with contextlib.AsyncExitStack() as stack:
            if self.http is not None:
                from fs_search.worker._http import HttpServer, Routes, parse_address

                host, port = parse_address(self.http)
                metrics = self.metrics
                routes = Routes(
                    livez=self.health.liveness,
                    readyz=self.health.readiness,
                    metrics=metrics.render if metrics is not None else None,
                )
                server = await stack.enter_async_context(HttpServer(routes, host, port).serving())
                self.url = server.url
                log.info("serving /livez, /readyz and /metrics on %s", self.url)
                if self.sdk is not None:
                    await stack.enter_async_context(self.sdk.draining())
            await stack.enter_async_context(self.health.checking())
            yield self

    def watch_services(self, services: Services) -> None:
        """The executor, rg and storage the probes check and the scrape counts."""
        executor = services.executor
        self.health.executor = executor
        self.health.rg_path = services.rg.path
        self.health.rg_reason = services.rg.reason
        self.health.storage = services.storage
        self.drain.groups.append(lambda: executor.live_process_groups)
        if self.metrics is None:
            return
        self.metrics.rg_version = (services.rg.version or "").split(" (")[0]
        sources = self.metrics.sources
        slots = executor.running_slots
        if slots is not None:
            sources.running = lambda: (slots.running, slots.waiting())
        else:
            sources.running = lambda: (len(executor.live_process_groups), 0)
        capacity = services.capacity
        sources.capacity = lambda: (capacity.running, capacity.held)

    def watch_client(self, client: Client) -> None:
        """The client whose server the ``temporal`` check asks."""
        self.health.client = client

    def watch_workspace(self, activities: SearchActivities) -> None:
        """A worker of one workspace: its calls in flight are the held slots."""
        if self.metrics is not None:
            self.metrics.sources.held = lambda: activities.running
            self.metrics.sources.workspaces = lambda: (1, 0)

    def watch_fleet(self, fleet: Fleet) -> None:
        """A worker of a workspaces root: its held slots, workspaces and hand-backs."""
        if self.metrics is None:
            return
        sources = self.metrics.sources
        sources.held = lambda: fleet.held_slots.running
        sources.workspaces = lambda: (len(fleet.attached), len(fleet.refused))
        sources.handed_back = lambda: fleet.router.handed_back
        if self.sdk is not None:
            # A detached workspace's gauges (pollers, slots) stop counting.
            self.sdk.live_queue = lambda queue: queue[len(task_queue_for("")) :] in fleet.attached

    def ready(self) -> None:
        """The worker polls: what ``on_ready`` of the run functions calls."""
        self.health.polling()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    from fs_search.activities import DISTRIBUTION

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"
