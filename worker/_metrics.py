"""fs-search's own metrics (``fs_search_…``) and the one Prometheus scrape of a worker.

:class:`WorkerMetrics` holds a ``prometheus_client`` registry with:

* what the calls record as they end (:class:`~fs_search.activities._telemetry.MetricsSink`):
  ``fs_search_calls_total{tool,outcome}``, ``fs_search_call_duration_seconds{tool,outcome}``,
  ``fs_search_rg_duration_seconds{tool}``, ``fs_search_rg_output_bytes_total{tool}`` (the raw
  rg output read), ``fs_search_spills_total{store,outcome}``;
* what a scrape reads from the running worker: searches running and waiting, the slots in
  use and their capacity, workspaces attached and refused, calls handed back, readiness and
  its checks, whether the worker is draining;
* the Temporal SDK's worker metrics (``temporal_…``, :mod:`fs_search.worker._sdk_metrics`);
* the process's CPU, memory and open files (``process_…``).

Labels stay bounded: a ``workspace`` label only on ``fs_search_calls_total`` and
``fs_search_rg_output_bytes_total``, and only for a worker of one workspace or with
``--metrics-per-workspace``; ``tool``, ``outcome`` (``ok`` or a contract error code) and
``store`` take a handful of values.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

# Every counter and histogram here starts with the process: no `_created` series beside them.
disable_created_metrics()

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Seconds. A call runs from a few milliseconds (a small grep) to its budget (30 s by default,
# at most the worker's cap).
CALL_BUCKETS: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
)


@dataclass
class Sources:
    """What a scrape reads from the running worker; each None until the worker has it.

    Attributes:
        running: rg searches running now, and those waiting for a running slot.
        held: calls taken from Temporal now (running or waiting in the worker).
        capacity: (running slots, held slots): searches at once, calls held at once.
        workspaces: (attached, refused) workspaces.
        handed_back: calls handed back to Temporal so far (a workspace at its share of the
            host queue).
        checks: readiness check -> ``"ok"`` or the reason it fails.
        draining: whether the worker is draining (SIGTERM).
    """

    running: Callable[[], tuple[int, int]] | None = None
    held: Callable[[], int] | None = None
    capacity: Callable[[], tuple[int, int]] | None = None
    workspaces: Callable[[], tuple[int, int]] | None = None
    handed_back: Callable[[], int] | None = None
    checks: Callable[[], dict[str, str]] | None = None
    draining: Callable[[], bool] | None = None


class WorkerMetrics:
    """The registry of one worker process (see the module docstring).

    Args:
        per_workspace: label the call counters with the workspace id.
        sdk: the Temporal SDK's metrics collector (None: not reported).
        version: the fs-search version, for ``fs_search_build_info``.
    """

    def __init__(
        self, *, per_workspace: bool, sdk: Collector | None = None, version: str = ""
    ) -> None:
        self.per_workspace = per_workspace
        self.registry = CollectorRegistry(auto_describe=False)
        self.sources = Sources()
        self.version = version
        self.rg_version = ""
        by_workspace = ["workspace"] if per_workspace else []
        r = self.registry
        self.calls = Counter(
            "fs_search_calls",
            "glob and grep calls that ended, by tool and outcome (ok, or the error code)",
            ["tool", "outcome", *by_workspace],
            registry=r,
        )
        self.call_seconds = Histogram(
            "fs_search_call_duration_seconds",
            "Time from a call's start in the worker to its result",
            ["tool", "outcome"],
            buckets=CALL_BUCKETS,
            registry=r,
        )
        self.rg_seconds = Histogram(
            "fs_search_rg_duration_seconds",
            "Time a call's rg ran (from its first rg's start to its last one's end)",
            ["tool"],
            buckets=CALL_BUCKETS,
            registry=r,
        )
        self.rg_bytes = Counter(
            "fs_search_rg_output_bytes",
            "Raw rg output read (stdout bytes), by tool",
            ["tool", *by_workspace],
            registry=r,
        )
        self.spills = Counter(
            "fs_search_spills",
            "Over-cap results saved to the spill store (outcome ok) or not (failed)",
            ["store", "outcome"],
            registry=r,
        )
        r.register(_Live(self))
        ProcessCollector(registry=r)
        if sdk is not None:
            r.register(sdk)
        self._render_lock = threading.Lock()

    # --- the calls' sink (activities/telemetry.MetricsSink) ----------------------------

    def call(
        self, *, tool: str, outcome: str, seconds: float, raw_bytes: int, workspace_id: str
    ) -> None:
        """One glob or grep call ended."""
        workspace = [workspace_id] if self.per_workspace else []
        self.calls.labels(tool, outcome, *workspace).inc()
        self.call_seconds.labels(tool, outcome).observe(seconds)
        if raw_bytes:
            self.rg_bytes.labels(tool, *workspace).inc(raw_bytes)

    def rg(self, *, tool: str, seconds: float) -> None:
        """A call's rg time."""
        self.rg_seconds.labels(tool).observe(seconds)

    def spill(self, *, store: str, ok: bool) -> None:
        """One spill saved or failed."""
        self.spills.labels(store, "ok" if ok else "failed").inc()

    # --- the scrape ----------------------------------------------------------------------

    def render(self) -> bytes:
        """The scrape: every family in the Prometheus text format (thread-safe)."""
        with self._render_lock:
            return generate_latest(self.registry)


class _Live(Collector):
    """The families a scrape reads from the running worker (:class:`Sources`)."""

    def __init__(self, metrics: WorkerMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Any]:
        m, s = self.metrics, self.metrics.sources
        info = GaugeMetricFamily(
            "fs_search_build_info",
            "fs-search's version and the rg it runs (always 1)",
            labels=["version", "rg"],
        )
        info.add_metric([m.version, m.rg_version], 1)
        yield info
        if s.running is not None:
            running, waiting = s.running()
            yield _gauge("fs_search_searches_running", "rg searches running now", running)
            yield _gauge(
                "fs_search_searches_waiting",
                "glob and grep calls held, waiting for a running slot",
                waiting,
            )
        if s.capacity is not None:
            running_cap, held_cap = s.capacity()
            used = GaugeMetricFamily(
                "fs_search_slots_used",
                "Slots in use: running (rg searches) and held (calls taken from Temporal)",
                labels=["slot"],
            )
            capacity = GaugeMetricFamily(
                "fs_search_slots_capacity",
                "Slots there are: running (rg searches at once), held (calls held at once)",
                labels=["slot"],
            )
            running_now = s.running()[0] if s.running is not None else 0
            used.add_metric(["running"], running_now)
            used.add_metric(["held"], s.held() if s.held is not None else 0)
            capacity.add_metric(["running"], running_cap)
            capacity.add_metric(["held"], held_cap)
            yield used
            yield capacity
        if s.workspaces is not None:
            attached, refused = s.workspaces()
            yield _gauge("fs_search_workspaces_attached", "Workspaces this worker serves", attached)
            yield _gauge(
                "fs_search_workspaces_refused",
                "Workspaces not served: another host's worker polls their queue",
                refused,
            )
        if s.handed_back is not None:
            handed = CounterMetricFamily(
                "fs_search_handed_back",
                "Host-queue calls handed back to Temporal (their workspace held its share)",
            )
            handed.add_metric([], s.handed_back())
            yield handed
        if s.checks is not None:
            checks = s.checks()
            ready = GaugeMetricFamily(
                "fs_search_ready", "1 when /readyz answers 200 (every check ok, not draining)"
            )
            ready.add_metric([], 1 if all(v == "ok" for v in checks.values()) else 0)
            yield ready
            each = GaugeMetricFamily(
                "fs_search_check_ok", "Each readiness check: 1 ok, 0 failing", labels=["check"]
            )
            for name, value in checks.items():
                each.add_metric([name], 1 if value == "ok" else 0)
            yield each
        if s.draining is not None:
            yield _gauge(
                "fs_search_draining",
                "1 from SIGTERM on: running calls finish, none is taken",
                1 if s.draining() else 0,
            )


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation)
    family.add_metric([], value)
    return family
