"""FsSearchPlugin: converter, external storage, tracing and sandbox passthrough for fs-search."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from temporalio.converter import DataConverter, ExternalStorage
from temporalio.plugin import SimplePlugin
from temporalio.worker import WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from fs_search.activities.storage import Storage
from fs_search.workflows._converter import fs_search_converter, storage_from
from fs_search.workflows._liveness import queue_liveness

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

PLUGIN_NAME = "fs_search.FsSearchPlugin"


class FsSearchPlugin(SimplePlugin):
    """Install on a client (workers built from it inherit it) to talk to fs-search.

    It makes the data converter pydantic-aware (results are readable JSON in the UI) and adds
    the external storage large ``spill: false`` results cross Temporal through, configured
    like the workers: ``FS_SEARCH_SPILL_URL`` / ``FS_SEARCH_S3_ENDPOINT_URL`` (or the
    arguments). With an ``s3://`` store that is Temporal's S3 driver on the same bucket; with
    the ``file://`` default it is a local directory, which only works where caller and worker
    share the filesystem. The caller's codec, failure converter and own external storage are
    kept; a payload converter that is not pydantic-aware cannot carry fs-search's models, so
    it is replaced by ``PydanticPayloadConverter`` (with a warning naming it). Workers built
    from the client pass ``fs_search`` through the workflow sandbox, so workflow code may
    import it at top level, without ``workflow.unsafe.imports_passed_through()``. Workers
    also get the local activity ``fs_search.queue_liveness`` (:mod:`fs_search.workflows._liveness`):
    it tells a call no worker took in time from one waiting behind a busy worker.

    Args:
        spill_url: the workers' spill store URL (default: ``FS_SEARCH_SPILL_URL``).
        s3_endpoint_url: S3 endpoint (default: ``FS_SEARCH_S3_ENDPOINT_URL``, then the
            standard AWS configuration).
        payload_threshold: payloads at least this large go to external storage (default:
            ``FS_SEARCH_PAYLOAD_THRESHOLD_BYTES``, then 256 KiB).
        external_storage: use this instead of building one (a worker passes its own
            ``Storage``, so its payload check and uploads share one driver); ``False`` for
            none.
        tracing: install ``temporalio.contrib.opentelemetry.TracingInterceptor`` so one trace
            runs from the caller's workflow through the activity into fs-search's own spans
            (a no-op until an OpenTelemetry SDK is configured). Set False if you install
            your own tracing interceptor or plugin.
        tracer: the tracer for those spans (default: the global provider's).
        getenv: environment lookup (injectable for tests).

    Raises:
        ConfigError: a URL names no store, or the threshold is not a number; the message
            names the argument (``FsSearchPlugin(spill_url='s3:/x'): ...``) or, for a value
            read from the environment, the variable (``FS_SEARCH_SPILL_URL='s3:/x': ...``).
    """

    def __init__(
        self,
        *,
        spill_url: str | None = None,
        s3_endpoint_url: str | None = None,
        payload_threshold: int | None = None,
        external_storage: ExternalStorage | Storage | bool | None = None,
        tracing: bool = True,
        tracer: Tracer | None = None,
        getenv: Callable[[str], str | None] = os.environ.get,
    ) -> None:
        if external_storage is None or external_storage is True:
            external_storage = storage_from(spill_url, s3_endpoint_url, payload_threshold, getenv)
        if isinstance(external_storage, Storage):
            external_storage = external_storage.external_storage()
        self.external_storage = external_storage or None
        interceptors = None
        if tracing:
            # Loaded only when asked for: a client without tracing (the CLI's, with no
            # exporter configured) starts without OpenTelemetry's Temporal interceptor.
            from temporalio.contrib.opentelemetry import TracingInterceptor

            interceptors = [TracingInterceptor(tracer)]
        super().__init__(
            PLUGIN_NAME,
            data_converter=self._converter,
            interceptors=interceptors,
            activities=_with_liveness,
            workflow_runner=_pass_fs_search_through,
        )

    def _converter(self, existing: DataConverter | None) -> DataConverter:
        storage = self.external_storage
        return fs_search_converter(
            existing, external_storage=storage if isinstance(storage, ExternalStorage) else None
        )


def _with_liveness(existing: Sequence[Callable[..., object]] | None) -> list[Callable[..., object]]:
    """The worker's activities plus ``fs_search.queue_liveness``, the local activity
    ``FsSearchTools`` asks when no worker took a call in time (unless already there)."""
    activities = list(existing or [])
    if queue_liveness not in activities:
        activities.append(queue_liveness)
    return activities


def _pass_fs_search_through(runner: WorkflowRunner | None) -> WorkflowRunner:
    """The worker's sandbox with ``fs_search`` passed through (imported once, from the host).

    fs-search's workflow-side modules are deterministic (pydantic models, the helper), so
    workflow code can import them at top level as it imports ``temporalio``.
    """
    if runner is None:
        runner = SandboxedWorkflowRunner()
    if isinstance(runner, SandboxedWorkflowRunner):
        return dataclasses.replace(
            runner, restrictions=runner.restrictions.with_passthrough_modules("fs_search")
        )
    return runner
