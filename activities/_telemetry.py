"""Spans and metrics of one search, on the OpenTelemetry API (no-ops unless an SDK is set up)."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import time
from collections.abc import Iterator
from typing import Any, Protocol

from opentelemetry import metrics, trace
from opentelemetry.trace import Span, Status, StatusCode

from fs_search.activities._contract import ErrorCode
from fs_search.activities._errors import BENIGN_CODES

INSTRUMENTATION = "fs_search"
OK = "ok"
CANCELLED = ErrorCode.SEARCH_ABORTED.value  # a cancelled call ends so for the caller
_BENIGN = frozenset(code.value for code in BENIGN_CODES)


class MetricsSink(Protocol):
    """Where the calls' measurements also go besides OpenTelemetry (the worker's Prometheus
    registry, ``worker/_metrics.py``)."""

    def call(
        self, *, tool: str, outcome: str, seconds: float, raw_bytes: int, workspace_id: str
    ) -> None:
        """One glob or grep call ended."""

    def rg(self, *, tool: str, seconds: float) -> None:
        """A call's rg ran this long (from its first rg's start to its last one's end)."""

    def spill(self, *, store: str, ok: bool) -> None:
        """A spill to ``store`` (its backend: ``file`` or ``s3``) was saved, or failed."""


def pattern_digest(text: str) -> str:
    """A short, stable stand-in for a pattern that may hold secrets."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class SearchTelemetry:
    """Tracer and instruments for the activities.

    Pattern text goes into span attributes only with ``trace_patterns`` (patterns can hold
    secrets and tracing backends are often shared widely); otherwise a hash does.

    Args:
        tracer_provider: default: the global one (a no-op until configured).
        meter_provider: default: the global one.
        trace_patterns: put pattern text in span attributes.
        workspace_id: the workspace of the calls, on every span and metric.
        sink: where the measurements also go (None: OpenTelemetry only).
    """

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        trace_patterns: bool = False,
        workspace_id: str = "unknown",
        sink: MetricsSink | None = None,
    ) -> None:
        self.tracer = trace.get_tracer(INSTRUMENTATION, tracer_provider=tracer_provider)
        meter = metrics.get_meter(INSTRUMENTATION, meter_provider=meter_provider)
        self.calls = meter.create_counter(
            "fs_search.calls", unit="{call}", description="Search calls by tool and outcome"
        )
        self.duration = meter.create_histogram(
            "fs_search.duration", unit="ms", description="Time from request to result"
        )
        self.raw_bytes = meter.create_histogram(
            "fs_search.raw_bytes", unit="By", description="Raw rg stdout read per call"
        )
        self.trace_patterns = trace_patterns
        self.workspace_id = workspace_id
        self.sink = sink

    def for_workspace(self, workspace_id: str | None) -> SearchTelemetry:
        """The same tracer and instruments, labelled with ``workspace_id`` (None: unchanged)."""
        if workspace_id is None or workspace_id == self.workspace_id:
            return self
        labelled = copy.copy(self)
        labelled.workspace_id = workspace_id
        return labelled

    def pattern_attributes(self, name: str, value: str | None) -> dict[str, Any]:
        """``fs_search.<name>`` (text, when allowed) or ``fs_search.<name>.sha256``."""
        if value is None:
            return {}
        if self.trace_patterns:
            return {f"fs_search.{name}": value[:1024]}
        return {f"fs_search.{name}.sha256": pattern_digest(value)}

    @contextlib.contextmanager
    def span(self, name: str, **attributes: Any) -> Iterator[Span]:
        """A span that records a SearchError's code (or an exception) as its error status."""
        with self.tracer.start_as_current_span(
            name,
            attributes=_clean(attributes),
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except BaseException as e:
                mark_failed(span, e)
                raise

    def record(self, *, tool: str, outcome: str, started: float, raw_bytes: int) -> None:
        """Count one call and record its duration and raw bytes."""
        workspace = {"fs_search.workspace_id": self.workspace_id}
        labels = {"fs_search.tool": tool, "fs_search.outcome": outcome, **workspace}
        seconds = time.monotonic() - started
        self.calls.add(1, labels)
        self.duration.record(seconds * 1000, labels)
        self.raw_bytes.record(raw_bytes, {"fs_search.tool": tool, **workspace})
        if self.sink is not None:
            self.sink.call(
                tool=tool,
                outcome=outcome,
                seconds=seconds,
                raw_bytes=raw_bytes,
                workspace_id=self.workspace_id,
            )

    def record_rg(self, *, tool: str, rg_started: float | None) -> None:
        """A call's rg time, from its first rg's start (None: no rg ran) to now."""
        if self.sink is not None and rg_started is not None:
            self.sink.rg(tool=tool, seconds=time.monotonic() - rg_started)

    def record_spill(self, *, store: str, ok: bool) -> None:
        """One spill saved (``ok``) or failed, to ``store``'s backend."""
        if self.sink is not None:
            self.sink.spill(store=store, ok=ok)


def outcome_of(error: BaseException | None) -> str:
    """``ok``, the contract code of a failure, or SEARCH_ABORTED for a cancellation."""
    if error is None:
        return OK
    code = getattr(error, "code", None) or getattr(error, "type", None)
    if code:
        return str(getattr(code, "value", code))
    if isinstance(error, BaseException) and type(error).__name__ == "CancelledError":
        return CANCELLED
    return ErrorCode.SEARCH_FAILED.value


def mark_failed(span: Span, error: BaseException) -> None:
    """Set the span's outcome attribute from a failure, and its error status unless the
    model's own input caused it (a benign code: the worker did nothing wrong)."""
    outcome = outcome_of(error)
    span.set_attribute("fs_search.outcome", outcome)
    span.set_attribute("fs_search.error_code", outcome)
    if outcome not in _BENIGN:
        span.set_status(Status(StatusCode.ERROR, outcome))


def _clean(attributes: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attributes.items() if v is not None}
