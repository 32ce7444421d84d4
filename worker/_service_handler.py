"""The ``fs_search`` Nexus service's handler: each operation a standalone activity
(docs/serving-other-namespaces.md).

``fs-search worker ... --nexus-queue QUEUE`` serves :class:`FsSearchServiceHandler` on
``QUEUE`` in the worker's namespace, beside whatever the worker polls (one workspace, a
workspaces root, host queues). An endpoint targets that queue; callers in other namespaces
reach the service through it (``FsSearchTools(workspace_id, endpoint="fs-search")``).

Each operation starts the fs_search activity of its name on the workspace's queue
(``fs-search/<id>``) or its host's (``fs-search-host/<host>``), as a standalone activity
carrying the operation's completion callback: the activity's result or failure is the
operation's, its retries and heartbeats are its own, a cancelled operation cancels it (rg
killed), its summary shows in the UI and, with tracing installed, its spans continue the
caller's trace. The handler itself holds nothing: any number of workers may serve one queue.

A call the caller saw wait past its schedule-to-start timeout comes back with
``check_queue``: the handler then asks who polls the queue (one ``DescribeTaskQueue``,
rate-limited and cached, :func:`~fs_search.workflows._liveness.liveness_of`) and fails the
operation at once, SEARCH_FAILED naming the workspace, when no worker does; the caller's
namespace could not have asked. Calls are never checked otherwise (no describe per search).

What a caller may ask is bounded (:class:`~fs_search.activities._budget.BackingOptions`):
only the four fs_search activities, only on fs-search queues, with timeouts and attempts
within limits; the request's own checks are the activity's. A cancel reaches only an
activity the service started (:mod:`~fs_search.worker._own_operations`), and the handler's
failures carry no stack trace (:mod:`~fs_search.worker._quiet_failures`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import nexusrpc
import nexusrpc.handler
from temporalio import nexus
from temporalio.api.nexus.v1 import EndpointSpec, EndpointTarget
from temporalio.api.operatorservice.v1 import CreateNexusEndpointRequest
from temporalio.client import Client
from temporalio.common import Priority, RetryPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import PollerBehaviorAutoscaling, Worker

from fs_search.activities import (
    GLOB_ACTIVITY,
    GREP_ACTIVITY,
    READ_SPILL_ACTIVITY,
    TOOLS_ACTIVITY,
    BackingOptions,
    ErrorCode,
    GlobResult,
    GrepResult,
    ReadSpillResult,
    ToolsRequest,
    ToolsResult,
    error_name,
    priority_for,
    summary_of,
    with_contract_codes,
)
from fs_search.worker._app import temporal_worker
from fs_search.worker._caller_share import NEXUS_SLOTS, CallerShare, busy, caller_of
from fs_search.worker._own_operations import ActivityOperation, activity_id_for
from fs_search.worker._quiet_failures import quiet_client, thin_sdk_nexus_warnings
from fs_search.workflows import FsSearchService, GlobCall, GrepCall, ReadSpillCall, ToolsCall
from fs_search.workflows._liveness import QueueLiveness, liveness_if_free, unserved

log = logging.getLogger(__name__)

NEXUS_QUEUE_ENV = "FS_SEARCH_NEXUS_QUEUE"
# The one server setting Nexus needs beside what a dev server has: an activity may carry
# the completion callback of the operation it backs.
CALLBACKS_DYNAMIC_CONFIG = "activity.enableCallbacks=true"
# At most this many polls of the handler queue at once (autoscaled from 5).
NEXUS_POLLS = 20
_R = TypeVar("_R")
Liveness = Callable[..., Awaitable[QueueLiveness | None]]


@nexusrpc.handler.service_handler(service=FsSearchService)
class FsSearchServiceHandler:
    """Starts each operation's activity on the named workspace's queue.

    Args:
        cap_ms: the serving workers' ``timeout_ms`` cap (a call's start-to-close is sized
            from it when the request asks for more); None: the request's or the default.
        liveness: who polls a queue (injectable for tests).
    """

    def __init__(
        self,
        *,
        cap_ms: int | None = None,
        liveness: Liveness = liveness_if_free,
        slots: int = NEXUS_SLOTS,
    ) -> None:
        self.cap_ms = cap_ms
        self._liveness = liveness
        # Each caller namespace's share of the starts and queue checks (_caller_share.py).
        self.callers = CallerShare(slots)

    @nexusrpc.handler.operation_handler
    def tools(self) -> nexusrpc.handler.OperationHandler[ToolsCall, ToolsResult]:
        """The catalogue of the named workspace (``fs_search.tools``)."""
        return ActivityOperation("tools", self._tools, self.callers)

    @nexusrpc.handler.operation_handler
    def glob(self) -> nexusrpc.handler.OperationHandler[GlobCall, GlobResult]:
        """glob in the named workspace (``fs_search.glob``)."""
        return ActivityOperation("glob", self._glob, self.callers)

    @nexusrpc.handler.operation_handler
    def grep(self) -> nexusrpc.handler.OperationHandler[GrepCall, GrepResult]:
        """grep in the named workspace (``fs_search.grep``)."""
        return ActivityOperation("grep", self._grep, self.callers)

    @nexusrpc.handler.operation_handler
    def read_spill(self) -> nexusrpc.handler.OperationHandler[ReadSpillCall, ReadSpillResult]:
        """A page of a spill artifact of the named workspace (``fs_search.read_spill``)."""
        return ActivityOperation("read_spill", self._read_spill, self.callers)

    async def _tools(
        self,
        ctx: nexus.TemporalStartOperationContext,
        client: nexus.TemporalNexusClient,
        call: ToolsCall,
    ) -> nexus.TemporalOperationResult[ToolsResult]:
        request = (call.request or ToolsRequest()).model_copy(
            update={"workspace_id": call.workspace_id}
        )
        return await self._start(
            ctx, client, TOOLS_ACTIVITY, call, request, ToolsResult, "fs_search tools"
        )

    async def _glob(
        self,
        ctx: nexus.TemporalStartOperationContext,
        client: nexus.TemporalNexusClient,
        call: GlobCall,
    ) -> nexus.TemporalOperationResult[GlobResult]:
        request = call.request.model_copy(update={"workspace_id": call.workspace_id})
        return await self._start(
            ctx, client, GLOB_ACTIVITY, call, request, GlobResult, _summary(call, request)
        )

    async def _grep(
        self,
        ctx: nexus.TemporalStartOperationContext,
        client: nexus.TemporalNexusClient,
        call: GrepCall,
    ) -> nexus.TemporalOperationResult[GrepResult]:
        request = call.request.model_copy(update={"workspace_id": call.workspace_id})
        return await self._start(
            ctx, client, GREP_ACTIVITY, call, request, GrepResult, _summary(call, request)
        )

    async def _read_spill(
        self,
        ctx: nexus.TemporalStartOperationContext,
        client: nexus.TemporalNexusClient,
        call: ReadSpillCall,
    ) -> nexus.TemporalOperationResult[ReadSpillResult]:
        request = call.request.model_copy(update={"workspace_id": call.workspace_id})
        return await self._start(
            ctx,
            client,
            READ_SPILL_ACTIVITY,
            call,
            request,
            ReadSpillResult,
            _summary(call, request),
        )

    async def _start(
        self,
        ctx: nexus.TemporalStartOperationContext,
        client: nexus.TemporalNexusClient,
        activity_name: str,
        call: GlobCall | GrepCall | ReadSpillCall | ToolsCall,
        request: Any,
        result_type: type[_R],
        summary: str,
    ) -> nexus.TemporalOperationResult[_R]:
        """Start the backing activity (after the queue check ``check_queue`` asks for)."""
        problem = call.problem()
        if problem:
            raise failed(ErrorCode.INVALID_ARGUMENT, problem)
        backing = BackingOptions.of(
            call, timeout_ms=getattr(request, "timeout_ms", None), cap_ms=self.cap_ms
        )
        if call.check_queue:
            caller = caller_of(ctx.inbound_links)
            # Never waited for: a check that cannot be made now (the caller's budget of checks,
            # or the process's, spent) is answered RESOURCE_EXHAUSTED, and the caller's server
            # asks again after its back-off. Started unchecked instead, a flood of checks on
            # made-up workspaces became as many activities and completion callbacks, which
            # filled the server's queues for every other caller.
            liveness = await self._liveness(
                client.client, backing.task_queue, budget=self.callers.checks(caller)
            )
            if liveness is None:
                self.callers.refused += 1
                raise busy()
            if not liveness.polled:
                result = unserved(
                    liveness,
                    workspace_id=call.workspace_id,
                    host=call.host,
                    took=backing.schedule_to_start or backing.start_to_close,
                    queue_timeout=backing.start_to_close,
                )
                assert result.error is not None
                raise failed(result.error.code, result.text.removeprefix("Error: "))
        try:
            return await client.start_activity(
                activity_name,
                request,
                # The Nexus request id: a retried start request finds the same activity.
                id=activity_id_for(activity_name.removeprefix("fs_search."), ctx.request_id),
                task_queue=backing.task_queue,
                result_type=result_type,
                start_to_close_timeout=backing.start_to_close,
                schedule_to_start_timeout=backing.schedule_to_start,
                schedule_to_close_timeout=backing.schedule_to_close,
                heartbeat_timeout=backing.heartbeat_timeout,
                # The caller's attempt policy, as FsSearchTools schedules an activity: the
                # contract's codes never retried; a call the host queue hands back
                # (WORKSPACE_BUSY) retried by the server on its first attempts, then back to
                # the caller, which starts it again behind other workspaces' calls.
                retry_policy=with_contract_codes(
                    RetryPolicy(maximum_attempts=backing.max_attempts)
                ),
                summary=summary,
                # On a host queue, the worker hands calls out round-robin by workspace.
                priority=priority_for(
                    call.workspace_id, host=call.host, handed_back=call.handed_back
                )
                or Priority.default,
            )
        except RPCError as e:
            if e.status == RPCStatusCode.UNIMPLEMENTED:
                raise failed(
                    ErrorCode.SEARCH_FAILED,
                    "the search namespace's Temporal server does not run standalone "
                    f"activities, which the fs_search service needs ({e.message})",
                ) from e
            raise


def failed(code: ErrorCode, message: str) -> nexusrpc.OperationError:
    """The operation's failure carrying a contract error: the caller's ``FsSearchTools``
    reads the ``ApplicationError`` (type = code) under it, as from an activity."""
    error = nexusrpc.OperationError(message, state=nexusrpc.OperationErrorState.FAILED)
    error.__cause__ = ApplicationError(
        message, {"name": error_name(code), "code": code.value}, type=code.value, non_retryable=True
    )
    return error


def service_worker(client: Client, queue: str, *, cap_ms: int | None = None) -> Worker:
    """A Worker serving the ``fs_search`` Nexus service on ``queue`` (no activities: each
    operation runs on the workspace's own queue)."""
    return temporal_worker(
        # Its failures reach callers of the endpoint: no stack traces (worker/_quiet_failures.py).
        quiet_client(client),
        task_queue=queue,
        activities=[],
        nexus_service_handlers=[FsSearchServiceHandler(cap_ms=cap_ms, slots=NEXUS_SLOTS)],
        max_concurrent_nexus_tasks=NEXUS_SLOTS,
        # Requests wait on the server for a poll of this queue (holding a worker of the
        # server's outbound queue, which also delivers every operation's result): under a
        # flood, more polls drain them (most answered at once, beyond their caller's share).
        nexus_task_poller_behavior=PollerBehaviorAutoscaling(
            minimum=2, initial=5, maximum=NEXUS_POLLS
        ),
    )


async def create_endpoint(
    client: Client, *, name: str, target_namespace: str, target_queue: str
) -> None:
    """Create the Nexus endpoint ``name`` targeting ``target_queue`` of ``target_namespace``
    (what ``temporal operator nexus endpoint create`` does; an operator's call)."""
    await client.operator_service.create_nexus_endpoint(
        CreateNexusEndpointRequest(
            spec=EndpointSpec(
                name=name,
                target=EndpointTarget(
                    worker=EndpointTarget.Worker(
                        namespace=target_namespace, task_queue=target_queue
                    )
                ),
            )
        )
    )


@contextlib.asynccontextmanager
async def serving_service(
    client: Client, queue: str | None, *, cap_ms: int | None = None
) -> AsyncIterator[Worker | None]:
    """Serve the ``fs_search`` Nexus service on ``queue`` while the block runs (nothing when
    ``queue`` is None or empty)."""
    if not queue:
        yield None
        return
    worker = service_worker(client, queue, cap_ms=cap_ms)
    thin_sdk_nexus_warnings()
    async with worker:
        log.info(
            "serving the fs_search Nexus service on task queue %s, namespace %s; an endpoint "
            "reaches it: temporal operator nexus endpoint create --name fs-search "
            "--target-namespace %s --target-task-queue %s",
            queue,
            client.namespace,
            client.namespace,
            queue,
        )
        yield worker


__all__ = [
    "CALLBACKS_DYNAMIC_CONFIG",
    "NEXUS_QUEUE_ENV",
    "create_endpoint",
    "FsSearchServiceHandler",
    "failed",
    "service_worker",
    "serving_service",
]


def _summary(call: Any, request: Any) -> str:
    """The UI summary the activity route gives the same call: it names the workspace only
    on a host queue (a workspace's own queue names it already)."""
    return summary_of(request if call.host is not None else call.request)
