"""The Temporal SDK's worker metrics (``temporal_…``) in the worker's one Prometheus scrape.

The SDK's core records its metrics (slots, polls, schedule-to-start and execution latency)
into a :class:`temporalio.runtime.MetricBuffer` — the SDK's supported way to hand them to
Python — which :class:`SdkMetrics` drains every second (and before each scrape) into
counters, gauges and histograms that a ``prometheus_client`` collector reports. Named as
Prometheus names them: a counter ``<name>_total``, a duration histogram ``<name>_seconds``.

Labels stay bounded: a worker serving a workspaces root (``per_workspace`` False) reports
every workspace queue ``fs-search/<id>`` as one ``task_queue="fs-search/*"`` (counters and
histograms added up, gauges summed over the queues), so ten thousand workspaces are not ten
thousand series per metric. The host queue, the Nexus queue and every other label stay as
the SDK gives them.

The OpenTelemetry export (``worker/_otel_setup.py``) drains the same buffer when it is on:
a buffer has one reader, so it reads a :meth:`SdkMetrics.tee` that receives every update too.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from temporalio.runtime import (
    BUFFERED_METRIC_KIND_COUNTER,
    BUFFERED_METRIC_KIND_GAUGE,
    BUFFERED_METRIC_KIND_HISTOGRAM,
    BufferedMetricUpdate,
    MetricBuffer,
    MetricBufferDurationFormat,
    Runtime,
    TelemetryConfig,
)

from fs_search.activities import task_queue_for

log = logging.getLogger(__name__)

# Updates the core may hold between two drains (one a second): far more than a worker of
# ten thousand idle queues records in a second.
BUFFER_SIZE = 200_000
DRAIN_INTERVAL_S = 1.0
# Seconds; the SDK's latencies run from a millisecond (a poll answered at once) to a minute
# (a long poll that found nothing).
BUCKETS: tuple[float, ...] = (
    0.001,
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
WORKSPACE_QUEUES = task_queue_for("*")  # fs-search/*: every workspace queue, as one
_WORKSPACE_PREFIX = WORKSPACE_QUEUES[:-1]
# Labels no scrape needs: the same on every series of the process.
_DROPPED = frozenset({"service_name"})

Labels = tuple[tuple[str, str], ...]


@dataclass
class _Histogram:
    counts: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS) + 1))
    total: float = 0.0


@dataclass
class _Family:
    name: str
    kind: int
    description: str
    scale: float  # multiplies each value: 0.001 for a histogram in milliseconds
    counters: dict[Labels, float] = field(default_factory=dict)
    # Gauges: the latest value of each series as the SDK labels it (summed over the workspace
    # queues when reported).
    gauges: dict[Labels, tuple[Labels, float]] = field(default_factory=dict)
    histograms: dict[Labels, _Histogram] = field(default_factory=dict)


class _Tee(MetricBuffer):
    """What the OpenTelemetry exporter drains instead of the buffer: every update
    :class:`SdkMetrics` read, kept until read (at most ``keep``: the oldest go first)."""

    def __init__(self, keep: int) -> None:
        super().__init__(1)
        self._pending: collections.deque[BufferedMetricUpdate] = collections.deque(maxlen=keep)

    def feed(self, updates: Sequence[BufferedMetricUpdate]) -> None:
        self._pending.extend(updates)

    def retrieve_updates(self) -> Sequence[BufferedMetricUpdate]:
        taken = list(self._pending)
        self._pending.clear()
        return taken


class SdkMetrics(Collector):
    """The SDK's metrics from a :class:`MetricBuffer`, as a ``prometheus_client`` collector.

    Args:
        buffer: the buffer a :class:`Runtime` records into (see :meth:`with_runtime`).
        per_workspace: keep each workspace queue's own ``task_queue`` label (a worker of one
            workspace, or ``--metrics-per-workspace``).
    """

    def __init__(self, buffer: MetricBuffer, *, per_workspace: bool) -> None:
        self.buffer = buffer
        self.per_workspace = per_workspace
        self.dropped_updates = 0
        # Whether a workspace queue still has its worker (None: all have). A gauge of one
        # that does not (a detached workspace) no longer counts.
        self.live_queue: Callable[[str], bool] | None = None
        self._families: dict[str, _Family] = {}
        self._by_id: dict[int, tuple[Any, _Family]] = {}
        self._labels: dict[int, tuple[Any, Labels, Labels]] = {}
        self._tees: list[_Tee] = []
        self._lock = threading.Lock()

    @classmethod
    def with_runtime(cls, *, per_workspace: bool) -> tuple[SdkMetrics, Runtime]:
        """A new buffer (durations in seconds) and the runtime recording into it."""
        buffer = MetricBuffer(BUFFER_SIZE, MetricBufferDurationFormat.SECONDS)
        runtime = Runtime(telemetry=TelemetryConfig(metrics=buffer))
        return cls(buffer, per_workspace=per_workspace), runtime

    def tee(self) -> MetricBuffer:
        """A buffer for another reader (the OpenTelemetry exporter) that gets every update."""
        tee = _Tee(BUFFER_SIZE)
        self._tees.append(tee)
        return tee

    def drain(self) -> int:
        """Read what the core recorded since the last drain; the number of updates."""
        try:
            updates = self.buffer.retrieve_updates()
        except RuntimeError:
            return 0  # no runtime records into the buffer yet
        for tee in self._tees:
            tee.feed(updates)
        with self._lock:
            for update in updates:
                try:
                    self._apply(update)
                except Exception as e:  # noqa: BLE001 - one odd update must not stop the rest
                    self.dropped_updates += 1
                    log.debug("Temporal metric update not recorded: %s", e)
        return len(updates)

    @contextlib.asynccontextmanager
    async def draining(self) -> AsyncIterator[SdkMetrics]:
        """Drain every :data:`DRAIN_INTERVAL_S` while open (and once at the end)."""

        async def loop() -> None:
            while True:
                self.drain()
                await asyncio.sleep(DRAIN_INTERVAL_S)

        task = asyncio.create_task(loop())
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            self.drain()

    def _family(self, update: BufferedMetricUpdate) -> _Family:
        metric = update.metric
        found = self._by_id.get(id(metric))
        if found is None or found[0] is not metric:
            # Each Temporal worker has its own metric objects: one family per name.
            name = _prometheus_name(metric.name, metric.kind, metric.unit)
            family = self._families.get(name)
            if family is None:
                family = self._families[name] = _Family(
                    name=name,
                    kind=metric.kind,
                    description=metric.description or metric.name,
                    scale=0.001 if metric.unit == "ms" else 1.0,
                )
            # The core hands the same object for the same metric: kept, so its id stays its.
            found = (metric, family)
            self._by_id[id(metric)] = found
        return found[1]

    def _labels_of(self, attributes: Any) -> tuple[Labels, Labels]:
        """(the series as the SDK labels it, as reported) for an attribute set (the core
        hands the same object for the same set: it is kept, so that its id stays its own)."""
        found = self._labels.get(id(attributes))
        if found is None or found[0] is not attributes:
            own = tuple(
                sorted((str(k), str(v)) for k, v in dict(attributes).items() if k not in _DROPPED)
            )
            found = (attributes, own, self.reported(own))
            self._labels[id(attributes)] = found
        return found[1], found[2]

    def reported(self, labels: Labels) -> Labels:
        """``labels`` as the scrape shows them (a workspace queue merged, unless per workspace)."""
        if self.per_workspace:
            return labels
        return tuple(
            (k, WORKSPACE_QUEUES if k == "task_queue" and is_workspace_queue(v) else v)
            for k, v in labels
        )

    def _apply(self, update: BufferedMetricUpdate) -> None:
        family = self._family(update)
        own, shown = self._labels_of(update.attributes)
        value = float(update.value) * family.scale
        if family.kind == BUFFERED_METRIC_KIND_COUNTER:
            family.counters[shown] = family.counters.get(shown, 0.0) + value
        elif family.kind == BUFFERED_METRIC_KIND_GAUGE:
            family.gauges[own] = (shown, value)
        elif family.kind == BUFFERED_METRIC_KIND_HISTOGRAM:
            histogram = family.histograms.get(shown)
            if histogram is None:
                histogram = family.histograms[shown] = _Histogram()
            histogram.counts[bisect.bisect_left(BUCKETS, value)] += 1
            histogram.total += value

    def collect(self) -> Iterator[Any]:
        """The families for a scrape (``prometheus_client`` calls this, in any thread)."""
        with self._lock:
            self._forget_gone_queues()
            families = [_snapshot(f) for f in self._families.values()]
        yield from (family for family in families if family is not None)

    def _forget_gone_queues(self) -> None:
        live = self.live_queue
        if live is None:
            return
        for family in self._families.values():
            gone = [
                own
                for own in family.gauges
                if any(k == "task_queue" and is_workspace_queue(v) and not live(v) for k, v in own)
            ]
            for own in gone:
                del family.gauges[own]


def _snapshot(family: _Family) -> Metric | None:
    """One family as prometheus_client reports it (None: nothing recorded yet). The SDK
    labels a metric's series differently (a request with or without a queue): each sample
    carries its own labels."""
    name = family.name
    if family.kind == BUFFERED_METRIC_KIND_COUNTER:
        if not family.counters:
            return None
        out = Metric(name, family.description, "counter")
        for labels, value in family.counters.items():
            out.add_sample(f"{name}_total", dict(labels), value)
        return out
    if family.kind == BUFFERED_METRIC_KIND_GAUGE:
        if not family.gauges:
            return None
        summed: dict[Labels, float] = collections.defaultdict(float)
        for shown, value in family.gauges.values():
            summed[shown] += value
        out = Metric(name, family.description, "gauge")
        for labels, value in summed.items():
            out.add_sample(name, dict(labels), value)
        return out
    if not family.histograms:
        return None
    out = Metric(name, family.description, "histogram")
    for labels, histogram in family.histograms.items():
        for bound, count in _cumulative(histogram.counts):
            out.add_sample(f"{name}_bucket", {**dict(labels), "le": bound}, count)
        out.add_sample(f"{name}_count", dict(labels), float(sum(histogram.counts)))
        out.add_sample(f"{name}_sum", dict(labels), histogram.total)
    return out


def _cumulative(counts: Sequence[int]) -> list[tuple[str, float]]:
    out, running = [], 0
    for bound, count in zip((*BUCKETS, float("inf")), counts, strict=True):
        running += count
        out.append(("+Inf" if bound == float("inf") else repr(bound), float(running)))
    return out


def is_workspace_queue(queue: str) -> bool:
    """Whether ``queue`` is a workspace's own queue ``fs-search/<id>``."""
    return queue.startswith(_WORKSPACE_PREFIX) and queue != WORKSPACE_QUEUES


def _prometheus_name(name: str, kind: int, unit: str | None) -> str:
    """A Prometheus name: ``_total`` on a counter, ``_seconds`` on a duration histogram."""
    if kind == BUFFERED_METRIC_KIND_COUNTER:
        # prometheus_client adds _total to a counter family's samples itself.
        return name.removesuffix("_total")
    if kind == BUFFERED_METRIC_KIND_HISTOGRAM and unit in ("s", "ms"):
        return name if name.endswith("_seconds") else f"{name}_seconds"
    return name


def sdk_families(text: str) -> Iterable[str]:
    """The ``temporal_`` family names of a scrape's text (for tests and the bench)."""
    for line in text.splitlines():
        if line.startswith("# TYPE temporal_"):
            yield line.split()[2]
