"""FsSearchClient: glob/grep/read_spill and the catalogue as one-off calls, no workflow needed.

Scripts, services, tests and the command line are not workflows; a workflow per call costs
them ~100-150 ms on a dev server for a search whose activity takes ~10 ms. Each call here is
one **standalone activity** (``Client.start_activity``) on the workspace's (or host's)
queue: the same activity, options, results and error codes as ``FsSearchTools``, its
summary in the Temporal UI, and a cancelled call (its task cancelled, e.g. Ctrl-C) cancels
the activity and waits until rg is gone.

A call no worker took within the schedule-to-start timeout is checked as ``FsSearchTools``
checks it (``DescribeTaskQueue``, once): nothing polling the queue is SEARCH_FAILED naming
the workspace; a busy worker gets the call again within the queueing budget.

Where the server has no standalone activities (older servers, ``activity.enableStandalone``
off, the time-skipping test server), calls run through the one-call workflow
``fs_search.Call`` instead (a worker for it runs in this process for each call), and a
warning says so once per server and namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from datetime import timedelta
from typing import Any, TypeVar

from temporalio.client import ActivityFailureError, Client, WorkflowFailureError
from temporalio.common import Priority, RetryPolicy
from temporalio.service import RPCError, RPCStatusCode

from fs_search.activities import (
    DEFAULT_HEARTBEAT_TIMEOUT,
    DEFAULT_QUEUE_TIMEOUT,
    DEFAULT_SCHEDULE_TO_START,
    DEFAULT_TIMEOUT_MS,
    TOOL_ARGUMENTS,
    Again,
    CheckQueue,
    ErrorCode,
    ToolResult,
    ToolsResult,
    Unserved,
    after_check,
    after_failure,
    execution_timeout,
    schedule_to_close_for,
)
from fs_search.workflows._call import CALL_WORKFLOW, CallInput, FsSearchCallWorkflow
from fs_search.workflows._liveness import QueueLiveness, liveness_of, queue_liveness
from fs_search.workflows._service import OPERATION_OF_ACTIVITY
from fs_search.workflows._tools import FsSearchTools, map_failure

log = logging.getLogger(__name__)
_R = TypeVar("_R")

# How long a cancelled call waits for its activity to close (rg gone) before it returns.
DEFAULT_CANCEL_WAIT = timedelta(seconds=5)
# Servers and namespaces already warned about: the warning is said once per process.
_WARNED: set[tuple[str, str]] = set()


class FsSearchClient(FsSearchTools):
    """glob/grep/read_spill and the catalogue from any Temporal client, one standalone
    activity per call.

    The same ``ToolResult``s as ``FsSearchTools`` (the catalogue's ``tools()`` the same
    ``ToolsResult`` as ``FsSearchTools.catalogue()``), and ``call(name, arguments)`` for a
    model's tool call. The client needs ``FsSearchPlugin`` (the pydantic converter). The
    other keyword arguments (``cwd``, ``timeout_ms``, ``spill``, ``task_queue``,
    ``start_to_close_timeout``, ``heartbeat_timeout``, ``schedule_to_start_timeout``,
    ``queue_timeout``, ``retry_policy``) are as for ``FsSearchTools``.

    Args:
        client: a client of the search workers' namespace, with ``FsSearchPlugin``.
        workspace_id: the workspace whose worker runs the searches.
        host: the host serving it on its host queue (``fs-search-host/<host>``).
        cancel_wait: how long a cancelled call waits for its activity to close (rg gone).
    """

    def __init__(
        self,
        client: Client,
        workspace_id: str,
        *,
        host: str | None = None,
        cwd: str | None = None,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        spill: bool = True,
        task_queue: str | None = None,
        start_to_close_timeout: timedelta | None = None,
        heartbeat_timeout: timedelta | None = DEFAULT_HEARTBEAT_TIMEOUT,
        schedule_to_start_timeout: timedelta | None = DEFAULT_SCHEDULE_TO_START,
        queue_timeout: timedelta = DEFAULT_QUEUE_TIMEOUT,
        retry_policy: RetryPolicy | None = None,
        cancel_wait: timedelta = DEFAULT_CANCEL_WAIT,
    ) -> None:
        super().__init__(
            workspace_id,
            cwd=cwd,
            timeout_ms=timeout_ms,
            spill=spill,
            host=host,
            task_queue=task_queue,
            start_to_close_timeout=start_to_close_timeout,
            heartbeat_timeout=heartbeat_timeout,
            schedule_to_start_timeout=schedule_to_start_timeout,
            queue_timeout=queue_timeout,
            retry_policy=retry_policy,
        )
        self.client = client
        self.cancel_wait = cancel_wait
        # The id of the latest activity (or fallback workflow) this client started.
        self.last_id: str | None = None
        # False once the server said it has no standalone activities.
        self.standalone = True

    async def tools(self) -> ToolsResult:
        """The worker's catalogue (``FsSearchTools.catalogue()``)."""
        return await self.catalogue()

    async def _execute(
        self, activity_name: str, arg: object, result_type: type[_R], summary: str
    ) -> _R | ToolResult:
        """One call as a standalone activity: its result, or the ``Error:`` result of its
        failure (a call no worker took is checked as ``FsSearchTools`` checks it)."""
        if not self.standalone:
            return await self._via_workflow(activity_name, arg, result_type)
        first = time.monotonic()
        handed = False  # a host queue handed the call back (then: behind others' calls)
        while True:
            left = self.queue_timeout - timedelta(seconds=time.monotonic() - first)
            config = self.activity_config(summary=summary, queue_left=left, handed_back=handed)
            start_to_close = config.get("start_to_close_timeout")
            assert start_to_close is not None  # activity_config always sets it
            starting = asyncio.ensure_future(
                self.client.start_activity(
                    activity_name,
                    args=[] if arg is None else [arg],
                    id=f"fs-search-{activity_name.removeprefix('fs_search.')}-{uuid.uuid4()}",
                    task_queue=self.task_queue,
                    result_type=result_type,
                    start_to_close_timeout=start_to_close,
                    schedule_to_start_timeout=self.schedule_to_start_timeout,
                    # A caller that went away (a killed shell) never leaves it pending.
                    schedule_to_close_timeout=schedule_to_close_for(start_to_close),
                    heartbeat_timeout=self.heartbeat_timeout,
                    retry_policy=config["retry_policy"],
                    summary=summary,
                    priority=config.get("priority", Priority.default),
                )
            )
            try:
                handle = await asyncio.shield(starting)
            except asyncio.CancelledError:
                # Cancelled while the start is in flight: the server may have the activity
                # already. The start finishes (one RPC), then the activity is cancelled.
                await asyncio.shield(self._cancel_starting(starting))
                raise
            except RPCError as e:
                if e.status != RPCStatusCode.UNIMPLEMENTED:
                    raise
                self._fall_back(e)
                return await self._via_workflow(activity_name, arg, result_type)
            self.last_id = handle.id
            try:
                return await handle.result()
            except asyncio.CancelledError:
                await asyncio.shield(self._cancel(handle))
                raise
            except ActivityFailureError as e:
                waited = timedelta(seconds=time.monotonic() - first)
                step = after_failure(e, waited=waited, queue_timeout=self.queue_timeout)
                liveness = QueueLiveness(queue=self.task_queue, polled=True)  # a busy queue
                if isinstance(step, CheckQueue):
                    liveness = await liveness_of(self.client, self.task_queue)
                    waited = timedelta(seconds=time.monotonic() - first)
                    step = after_check(
                        liveness.polled, waited=waited, queue_timeout=self.queue_timeout
                    )
                if isinstance(step, Again):
                    # Handed back (its workspace holds its share of the host queue): again,
                    # shortly; or not taken by a busy worker: again at once.
                    handed = handed or step.handed_back
                    if step.pause:
                        await asyncio.sleep(step.pause.total_seconds())
                    continue
                if isinstance(step, Unserved):
                    return self._unserved(liveness, waited)
                return map_failure(e.cause, workspace_id=self.workspace_id, queue=self.task_queue)

    async def _cancel_starting(self, starting: asyncio.Future[Any]) -> None:
        """Cancel an activity whose start was still in flight when the call was cancelled."""
        try:
            async with asyncio.timeout(self.cancel_wait.total_seconds()):
                handle = await starting
        except Exception as e:  # noqa: BLE001 - no activity (known) to cancel
            log.warning("the cancelled call's activity did not start in time: %r", e)
            return
        self.last_id = handle.id
        await self._cancel(handle)

    async def _cancel(self, handle: Any) -> None:
        """Cancel the call's activity and wait (at most ``cancel_wait``) until it closed:
        it closes once rg's process group is gone."""
        try:
            await handle.cancel(reason="the caller cancelled the call")
            async with asyncio.timeout(self.cancel_wait.total_seconds()):
                with contextlib.suppress(ActivityFailureError):
                    await handle.result()
        except TimeoutError:
            log.warning(
                "activity %s was asked to cancel and had not closed after %.0f s",
                handle.id,
                self.cancel_wait.total_seconds(),
            )
        except Exception as e:  # noqa: BLE001 - report and leave: the caller asked to stop
            log.warning("cancelling activity %s failed: %s", handle.id, e)
        else:
            log.info("activity %s cancelled", handle.id)

    def _fall_back(self, error: RPCError) -> None:
        """From now on, run calls through the one-call workflow; say so once per server."""
        self.standalone = False
        key = (self.client.service_client.config.target_host, self.client.namespace)
        if key in _WARNED:
            return
        _WARNED.add(key)
        log.warning(
            "the Temporal server at %s (namespace %s) does not run standalone "
            "activities (%s); one-off calls run as one-call workflows (fs_search.Call) "
            "instead, a workflow's round trips more per call",
            key[0],
            key[1],
            error.message,
        )

    async def _via_workflow(
        self, activity_name: str, arg: object, result_type: type[_R]
    ) -> _R | ToolResult:
        """The call through ``fs_search.Call``, run by a worker in this process on a private
        queue: a ``ToolResult`` (the catalogue: a ``ToolsResult``)."""
        tool = OPERATION_OF_ACTIVITY[activity_name]
        model = TOOL_ARGUMENTS.get(tool)
        arguments = {}
        if model is not None and arg is not None:
            dumped = dict(arg)  # type: ignore[call-overload]
            arguments = {name: dumped[name] for name in model.model_fields if name in dumped}
        call = CallInput(
            workspace_id=self.workspace_id,
            tool=tool,
            arguments=arguments,
            cwd=self.cwd,
            spill=self.spill,
            timeout_ms=self.timeout_ms,
            schedule_to_start_ms=(
                int(self.schedule_to_start_timeout.total_seconds() * 1000)
                if self.schedule_to_start_timeout
                else None
            ),
            host=self.host,
            direct=True,
        )
        from temporalio.worker import Worker  # the fallback's own: one-off calls need none

        from fs_search.workflows._plugin import _pass_fs_search_through

        queue = f"fs-search-client/{uuid.uuid4()}"
        answer = ToolsResult if tool == "tools" else ToolResult
        # What FsSearchPlugin gives a worker, given here too: the client may have only its
        # converter (the CLI's), and FsSearchTools asks queue_liveness about a call no
        # worker took (the plugin adds neither twice).
        async with Worker(
            self.client,
            task_queue=queue,
            workflows=[FsSearchCallWorkflow],
            activities=[queue_liveness],
            workflow_runner=_pass_fs_search_through(None),
        ):
            handle = await self.client.start_workflow(
                CALL_WORKFLOW,
                call,
                id=f"fs-search-call-{uuid.uuid4()}",
                task_queue=queue,
                execution_timeout=execution_timeout(call.timeout_ms),
                result_type=answer,
            )
            self.last_id = handle.id
            try:
                return await handle.result()  # type: ignore[no-any-return]
            except asyncio.CancelledError:
                await asyncio.shield(self._cancel_workflow(handle))
                raise
            except WorkflowFailureError as e:
                return ToolResult.failure(
                    ErrorCode.SEARCH_FAILED, f"the call's workflow {handle.id} failed: {e.cause}"
                )

    async def _cancel_workflow(self, handle: Any) -> None:
        """Cancel the fallback workflow and wait until it closed (it waits for rg)."""
        try:
            await handle.cancel()
            async with asyncio.timeout(self.cancel_wait.total_seconds()):
                with contextlib.suppress(WorkflowFailureError):
                    await handle.result()
        except Exception as e:  # noqa: BLE001 - report and leave: the caller asked to stop
            log.warning("cancelling workflow %s: %s", handle.id, e)


__all__ = ["FsSearchClient"]
