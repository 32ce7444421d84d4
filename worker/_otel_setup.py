"""OpenTelemetry set-up from the standard environment (``OTEL_*``); nothing when unset.

``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER``: ``otlp``, ``console`` or ``none`` (the
default here: with nothing set, nothing is exported and nothing slows down).
``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_PROTOCOL`` (``grpc`` or
``http/protobuf``) and ``OTEL_SERVICE_NAME`` are read by the SDK and exporters themselves.
Temporal's own worker metrics are drained into the same meter provider.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics, trace
from temporalio.runtime import MetricBuffer, Runtime, TelemetryConfig

log = logging.getLogger(__name__)
DEFAULT_SERVICE_NAME = "fs-search"
_EXPORTERS = ("otlp", "console", "none")


class TelemetryConfigError(ValueError):
    """An OTEL_* setting this worker cannot honour."""


@dataclass
class Telemetry:
    """Configured providers (None: not exported) and the Temporal runtime feeding metrics."""

    tracer_provider: Any = None
    meter_provider: Any = None
    runtime: Runtime | None = None
    metric_buffer: MetricBuffer | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Telemetry]:
        """Drain Temporal's metrics while running; flush and shut down exporters at exit."""
        exporter = None
        if self.metric_buffer is not None and self.meter_provider is not None:
            from temporalio.contrib.opentelemetry import MetricsExporter

            exporter = MetricsExporter(self.metric_buffer, self.meter_provider)
        try:
            if exporter is not None:
                async with exporter:
                    yield self
            else:
                yield self
        finally:
            self.shutdown()

    def shutdown(self) -> None:
        """Flush pending spans and metrics."""
        for provider in (self.tracer_provider, self.meter_provider):
            if provider is not None:
                try:
                    provider.shutdown()
                except Exception as e:  # noqa: BLE001 - telemetry must not break exit
                    log.warning("telemetry shutdown failed: %s", e)


def _choice(getenv: Callable[[str], str | None], name: str) -> str:
    value = (getenv(name) or "none").strip().lower()
    if value not in _EXPORTERS:
        raise TelemetryConfigError(f"{name}={value!r}: expected one of {', '.join(_EXPORTERS)}")
    return value


def _otlp_protocol(getenv: Callable[[str], str | None], signal: str) -> str:
    specific = getenv(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL")
    return (specific or getenv("OTEL_EXPORTER_OTLP_PROTOCOL") or "grpc").strip().lower()


def telemetry_from_env(
    getenv: Callable[[str], str | None] = os.environ.get, *, install_globals: bool = True
) -> Telemetry:
    """Build providers from the standard environment; set them as the global ones.

    Raises:
        TelemetryConfigError: an exporter name is not otlp/console/none.
    """
    traces = _choice(getenv, "OTEL_TRACES_EXPORTER")
    metric_choice = _choice(getenv, "OTEL_METRICS_EXPORTER")
    if traces == "none" and metric_choice == "none":
        return Telemetry()

    from opentelemetry.sdk.resources import SERVICE_NAME, Resource

    resource = Resource.create(
        {} if getenv("OTEL_SERVICE_NAME") else {SERVICE_NAME: DEFAULT_SERVICE_NAME}
    )
    telemetry = Telemetry()
    if traces != "none":
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        telemetry.tracer_provider = TracerProvider(resource=resource)
        telemetry.tracer_provider.add_span_processor(
            BatchSpanProcessor(_span_exporter(traces, _otlp_protocol(getenv, "TRACES")))
        )
        if install_globals:
            trace.set_tracer_provider(telemetry.tracer_provider)
    if metric_choice != "none":
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        reader = PeriodicExportingMetricReader(
            _metric_exporter(metric_choice, _otlp_protocol(getenv, "METRICS"))
        )
        telemetry.meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
        if install_globals:
            metrics.set_meter_provider(telemetry.meter_provider)
        telemetry.metric_buffer = MetricBuffer(10_000)
        telemetry.runtime = Runtime(telemetry=TelemetryConfig(metrics=telemetry.metric_buffer))
    return telemetry


def _span_exporter(kind: str, protocol: str) -> Any:
    if kind == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        # stderr: stdout carries the CLI's result.
        return ConsoleSpanExporter(out=sys.stderr)
    if protocol.startswith("http"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    else:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[assignment]
            OTLPSpanExporter,
        )
    return OTLPSpanExporter()


def _metric_exporter(kind: str, protocol: str) -> Any:
    if kind == "console":
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

        return ConsoleMetricExporter(out=sys.stderr)
    if protocol.startswith("http"):
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    else:
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (  # type: ignore[assignment]
            OTLPMetricExporter,
        )
    return OTLPMetricExporter()
