"""FsSearchTools: what agent workflows call to run glob/grep on a workspace's worker.

Two routes, the same results: activities on the workspace's queue in this namespace (the
default), or, with ``endpoint``, operations of the Nexus service ``fs_search`` served from
the search namespace (docs/serving-other-namespaces.md), each backed there by the same
activity.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from enum import Enum
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    NexusOperationError,
    TimeoutError,
    TimeoutType,
)

with workflow.unsafe.imports_passed_through():
    from fs_search.activities import (
        DEFAULT_HEARTBEAT_TIMEOUT,
        DEFAULT_MAX_ATTEMPTS,
        DEFAULT_QUEUE_TIMEOUT,
        DEFAULT_SCHEDULE_TO_START,
        DEFAULT_TIMEOUT_MS,
        GLOB_ACTIVITY,
        GREP_ACTIVITY,
        MAX_ATTEMPTS,
        MAX_READ_SPILL_LINES,
        NEXUS_MARGIN,
        NON_RETRYABLE_ERROR_TYPES,
        READ_SPILL_ACTIVITY,
        TOOL_ARGUMENTS,
        TOOLS_ACTIVITY,
        Again,
        ArgumentProblem,
        BackingOptions,
        CheckQueue,
        ErrorCode,
        GlobArguments,
        GlobRequest,
        GlobResult,
        GrepArguments,
        GrepRequest,
        GrepResult,
        ReadSpillArguments,
        ReadSpillRequest,
        ReadSpillResult,
        ToolResult,
        ToolsRequest,
        ToolsResult,
        Unserved,
        after_check,
        after_failure,
        failure_cause,
        host_queue_for,
        priority_for,
        results,
        start_to_close_for,
        summary_of,
        task_queue_for,
        with_contract_codes,
    )
    from fs_search.workflows._arguments import object_arguments
    from fs_search.workflows._liveness import QUEUE_LIVENESS_ACTIVITY, QueueLiveness, unserved
    from fs_search.workflows._service import (
        CALL_OF_ACTIVITY,
        OPERATION_OF_ACTIVITY,
        FsSearchService,
    )

_R = TypeVar("_R")

# What ``call`` dispatches when no catalogue is known: every worker offers these two
# (read_spill only with a store the model cannot read itself).
ALWAYS_OFFERED = ("glob", "grep")
DEFAULT_RETRY_POLICY = RetryPolicy(
    maximum_attempts=DEFAULT_MAX_ATTEMPTS, non_retryable_error_types=NON_RETRYABLE_ERROR_TYPES
)
# The scheduling defaults and the start-to-close formula are the budget model's
# (activities/_budget.py), shared with the worker and the Nexus handler.
LIVENESS_TIMEOUT = timedelta(seconds=15)
# A call's attempts (the hand-back rule, what each failure leads to, its priority and
# retry codes) are decided by one pure policy for every route: activities/_attempts.py.


class FsSearchTools:
    """glob/grep/read_spill as tool calls from workflow code, with model-ready results.

    Args:
        workspace_id: the workspace whose worker runs the searches (queue
            ``fs-search/<workspace_id>``).
        cwd: the agent session's working directory (absolute, or relative to the
            workspace root); never taken from the model.
        timeout_ms: each call's budget, enforced inside the activity.
        spill: save over-cap results in full (False: return every entry inline, for
            callers that do not show the result to a model).
        host: the host serving the workspace on its host queue (``fs-search-host/<host>``,
            a worker run with ``--queues host|both``); every request then names the
            workspace. None (default): the workspace's own queue.
        task_queue: overrides the queue.
        queue_timeout: how long a call may wait for a busy worker before it runs (default
            5 min): the worker holds calls beyond the searches it runs and starts them in
            turn, heartbeating ``phase: "queued"``; past it the call is SEARCH_ABORTED.
        start_to_close_timeout: default ``queue_timeout`` + ``timeout_ms`` + 5 s.
        heartbeat_timeout: default 5 s.
        schedule_to_start_timeout: default 8 s: a call no worker took by then is checked
            (``fs_search.queue_liveness``, one ``DescribeTaskQueue``): no live poller on
            the queue is SEARCH_FAILED naming the workspace; a live one means the worker
            is full, and the call is scheduled again within ``queue_timeout``.
        retry_policy: default 3 attempts. The contract codes and PayloadsTooLarge are never
            retried: they are added to a policy given here.
        cancellation_type: default WAIT_CANCELLATION_COMPLETED (rg is dead when the
            cancel returns).
        endpoint: call through this Nexus endpoint (e.g. ``"fs-search"``) instead of
            scheduling activities here: for a workflow in another namespace than the search
            workers'. The same results, codes and catalogue; this namespace needs no
            fs-search worker, no activity registration and no access to the spill store.
            The handler runs each call as the same activity on the workspace's (or host's)
            queue, with the options above (bounded there); ``task_queue`` cannot be
            combined with it (the handler routes by workspace and host). The operation is
            cancelled with the matching Nexus cancellation type (default: wait until rg is
            gone).
    """

    def __init__(
        self,
        workspace_id: str,
        *,
        cwd: str | None = None,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        spill: bool = True,
        host: str | None = None,
        task_queue: str | None = None,
        start_to_close_timeout: timedelta | None = None,
        heartbeat_timeout: timedelta | None = DEFAULT_HEARTBEAT_TIMEOUT,
        schedule_to_start_timeout: timedelta | None = DEFAULT_SCHEDULE_TO_START,
        queue_timeout: timedelta = DEFAULT_QUEUE_TIMEOUT,
        retry_policy: RetryPolicy | None = None,
        cancellation_type: workflow.ActivityCancellationType = (
            workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
        ),
        endpoint: str | None = None,
    ) -> None:
        if endpoint is not None and task_queue is not None:
            raise ValueError(
                "FsSearchTools(endpoint=..., task_queue=...): the Nexus handler routes a call "
                "by workspace_id and host; give one of endpoint and task_queue"
            )
        self.workspace_id = workspace_id
        self.endpoint = endpoint
        self.cwd = cwd
        self.timeout_ms = timeout_ms
        self.spill = spill
        self.host = host
        self.task_queue = task_queue or (
            host_queue_for(host) if host is not None else task_queue_for(workspace_id)
        )
        self.queue_timeout = max(queue_timeout, timedelta(0))
        self.start_to_close_timeout = start_to_close_timeout
        self.heartbeat_timeout = heartbeat_timeout
        self.schedule_to_start_timeout = schedule_to_start_timeout
        self.retry_policy = retry_policy or DEFAULT_RETRY_POLICY
        self.cancellation_type = cancellation_type
        # The last available catalogue ``catalogue()`` fetched: what ``call`` dispatches.
        self._catalogue: ToolsResult | None = None

    def activity_config(
        self,
        summary: str | None = None,
        *,
        queue_left: timedelta | None = None,
        handed_back: bool = False,
    ) -> workflow.ActivityConfig:
        """The options every call is scheduled with (``queue_left``: what remains of the
        queueing budget, default all of it; ``handed_back``: a host queue handed the call
        back, and it is scheduled again behind others' calls: ``priority_for``)."""
        left = self.queue_timeout if queue_left is None else max(queue_left, timedelta(0))
        start_to_close = self.start_to_close_timeout or start_to_close_for(left, self.timeout_ms)
        config = workflow.ActivityConfig(
            task_queue=self.task_queue,
            start_to_close_timeout=start_to_close,
            heartbeat_timeout=self.heartbeat_timeout,
            schedule_to_start_timeout=self.schedule_to_start_timeout,
            retry_policy=with_contract_codes(self.retry_policy),
            cancellation_type=self.cancellation_type,
        )
        if summary:
            config["summary"] = summary
        priority = priority_for(self.workspace_id, host=self.host, handed_back=handed_back)
        if priority is not None:
            config["priority"] = priority
        return config

    # --- model tool calls ------------------------------------------------------------

    async def glob(self, pattern: str, path: str | None = None) -> ToolResult:
        """Run the glob tool."""
        return await self._run(
            GLOB_ACTIVITY,
            GlobRequest,
            GlobResult,
            pattern=pattern,
            path=path,
            cwd=self.cwd,
            spill=self.spill,
            timeout_ms=self.timeout_ms,
        )

    async def grep(
        self, pattern: str, path: str | None = None, include: str | None = None
    ) -> ToolResult:
        """Run the grep tool."""
        return await self._run(
            GREP_ACTIVITY,
            GrepRequest,
            GrepResult,
            pattern=pattern,
            path=path,
            include=include,
            cwd=self.cwd,
            spill=self.spill,
            timeout_ms=self.timeout_ms,
        )

    async def read_spill(
        self, locator: str, offset: int = 0, limit: int = MAX_READ_SPILL_LINES
    ) -> ToolResult:
        """Read a page of a spill artifact (the third tool when spills live in S3)."""
        return await self._run(
            READ_SPILL_ACTIVITY,
            ReadSpillRequest,
            ReadSpillResult,
            locator=locator,
            offset=offset,
            limit=limit,
        )

    async def call(
        self, name: str, arguments: object, *, catalogue: ToolsResult | None = None
    ) -> ToolResult:
        """Dispatch a model's tool call by name, if the worker's catalogue offers the tool.

        The offered tools are ``catalogue``'s if given, else those of the last catalogue
        this instance fetched with ``catalogue()``; with neither (or only an unavailable
        one), glob and grep are dispatched and read_spill is refused. A tool not offered is
        ``Error:`` text naming it: read_spill is offered only with a spill store the model
        cannot read itself (S3), and with a ``file://`` store the model reads spill files
        with its own read tool. ``glob()``, ``grep()`` and ``read_spill()`` called directly
        are not checked against the catalogue.

        ``arguments`` are the model's, decoded from JSON (``parse_arguments``): anything but
        an object (a mapping with string keys; None counts as ``{}``) is ``Error:`` text.
        They are validated by the tool's model (``GlobArguments``, ...): only its schema's
        fields, typed as the schema says, within the contract's limits. Never raises for
        any name or arguments: every refusal is INVALID_ARGUMENT text, nothing scheduled.
        """
        offered, known = self._offered(catalogue)
        model = TOOL_ARGUMENTS.get(name)
        if model is None:
            return ToolResult.failure(
                ErrorCode.INVALID_ARGUMENT,
                f"unknown tool {name!r} (offered: {', '.join(offered)})",
            )
        if name not in offered:
            if known:
                message = (
                    f"tool {name!r} is not offered by this worker (offered: {', '.join(offered)})"
                )
            else:
                message = (
                    f"tool {name!r} is dispatched only when the worker's catalogue offers it: "
                    "fetch the catalogue first (FsSearchTools.catalogue()) or pass it "
                    "(call(..., catalogue=...))"
                )
            return ToolResult.failure(ErrorCode.INVALID_ARGUMENT, message)
        fields = object_arguments({} if arguments is None else arguments)
        if isinstance(fields, ToolResult):
            return fields
        try:
            args = model.checked(fields)
        except ArgumentProblem as e:
            return ToolResult.failure(ErrorCode.INVALID_ARGUMENT, str(e))
        if isinstance(args, GlobArguments):
            return await self.glob(args.pattern, args.path)
        if isinstance(args, GrepArguments):
            return await self.grep(args.pattern, args.path, args.include)
        if isinstance(args, ReadSpillArguments):
            return await self.read_spill(args.locator, args.offset, args.limit)
        raise TypeError(f"no dispatch for tool {name!r}")  # TOOL_ARGUMENTS holds only these

    async def catalogue(self) -> ToolsResult:
        """The worker's tool definitions and prompt segments (``available: false`` on failure).

        When no worker answered (nothing serves the workspace: SEARCH_FAILED naming it, found
        as for any call, after ``schedule_to_start_timeout`` and one liveness check), the
        catalogue's ``error`` holds the failure's code and ``reason`` its message; the
        framework adapters raise it. A worker that answers without rg gives
        ``available: false`` with its reason and no ``error``.

        An available catalogue is remembered: ``call`` then dispatches the tools it offers.
        """
        which = ToolsRequest(workspace_id=self.workspace_id) if self.host is not None else None
        summary = "fs_search tools" + (f" @ {self.workspace_id}" if which is not None else "")
        fetched = await self._execute(TOOLS_ACTIVITY, which, ToolsResult, summary)
        if isinstance(fetched, ToolResult):
            failed = fetched
            return ToolsResult(
                available=False,
                reason=failed.text.removeprefix("Error: "),
                sample_over_cap_glob_results=False,
                timeout_ms=self.timeout_ms,
                error=failed.error,
            )
        if fetched.available:
            self._catalogue = fetched
        return fetched

    # --- plumbing --------------------------------------------------------------------

    def _offered(self, catalogue: ToolsResult | None) -> tuple[list[str], bool]:
        """The tool names ``call`` dispatches, and whether a catalogue said so.

        An unavailable catalogue offers nothing it knows of: it counts as none.
        """
        for known in (catalogue, self._catalogue):
            if known is not None and known.available:
                return [tool.name for tool in known.tools], True
        return list(ALWAYS_OFFERED), False

    async def _run(
        self,
        activity_name: str,
        request_type: type[GlobRequest] | type[GrepRequest] | type[ReadSpillRequest],
        result_type: type[GlobResult] | type[GrepResult] | type[ReadSpillResult],
        **fields: Any,
    ) -> ToolResult:
        # Every argument check runs here, before anything is scheduled: a request over
        # Temporal's payload limit would fail this workflow's task, not the activity.
        if self.host is not None:
            fields["workspace_id"] = self.workspace_id  # a host queue serves many
        try:
            req = request_type.checked(fields)
        except ArgumentProblem as e:
            return ToolResult.failure(ErrorCode.INVALID_ARGUMENT, str(e))
        result = await self._execute(activity_name, req, result_type, summary_of(req))
        if isinstance(result, ToolResult):
            return result
        if isinstance(result, ReadSpillResult):
            return ToolResult(text=results.read_spill_text(result), result=result)
        return ToolResult(text=result.text, result=result)

    async def _execute(
        self, activity_name: str, arg: object, result_type: type[_R], summary: str
    ) -> _R | ToolResult:
        """Schedule one call: its result, or the ``Error:`` result of its failure.

        A call no worker took within the schedule-to-start timeout is checked once: with
        a live poller on the queue (a full worker) it is scheduled again, within what is
        left of the queueing budget; with none it is SEARCH_FAILED naming the workspace. A
        call a host queue handed back (its workspace held its share: WORKSPACE_BUSY) is
        scheduled again the same way."""
        if self.endpoint is not None:
            return await self._execute_nexus(activity_name, arg, result_type, summary)
        first = workflow.now()
        handed = False  # a host queue handed the call back (then: behind others' calls)
        while True:
            left = self.queue_timeout - (workflow.now() - first)
            args = [] if arg is None else [arg]
            try:
                return await workflow.execute_activity(
                    activity_name,
                    args=args,
                    result_type=result_type,
                    **self.activity_config(summary=summary, queue_left=left, handed_back=handed),
                )
            except (ActivityError, asyncio.CancelledError) as e:
                if _workflow_cancelled():
                    raise
                step = after_failure(
                    e, waited=workflow.now() - first, queue_timeout=self.queue_timeout
                )
                liveness = QueueLiveness(queue=self.task_queue, polled=True)  # a busy queue
                if isinstance(step, CheckQueue):
                    liveness = await self._liveness()
                    step = after_check(
                        liveness.polled,
                        waited=workflow.now() - first,
                        queue_timeout=self.queue_timeout,
                    )
                if isinstance(step, Again):
                    # Handed back: its workspace holds its share of the host; off the queue a
                    # moment (a flood's calls cycling through the queue would delay everyone's).
                    handed = handed or step.handed_back
                    if step.pause:
                        await workflow.sleep(step.pause)
                    continue
                if isinstance(step, Unserved):
                    return self._unserved(liveness, workflow.now() - first)
                return map_failure(e, workspace_id=self.workspace_id, queue=self.task_queue)

    async def _execute_nexus(
        self, activity_name: str, arg: object, result_type: type[_R], summary: str
    ) -> _R | ToolResult:
        """One call as an operation of the endpoint's ``fs_search`` service.

        The caller's namespace cannot ask who polls the search namespace's queues, so the
        handler decides: a call no worker took within schedule-to-start is sent again with
        ``check_queue``, and the handler then fails it at once (SEARCH_FAILED naming the
        workspace) when nothing polls the queue, or starts it again when a worker does (a
        busy one), within what is left of the queueing budget."""
        assert self.endpoint is not None
        client = workflow.create_nexus_client(service=FsSearchService, endpoint=self.endpoint)
        operation = OPERATION_OF_ACTIVITY[activity_name]
        first = workflow.now()
        check = False
        handed = False
        while True:
            call = self._service_call(
                activity_name, arg, queue_left=self.queue_timeout - (workflow.now() - first)
            )
            call.check_queue = check
            call.handed_back = handed
            timeout_ms = getattr(call.request, "timeout_ms", None) or self.timeout_ms
            backing = BackingOptions.of(call, timeout_ms=timeout_ms)
            try:
                return await client.execute_operation(
                    operation,
                    call,
                    output_type=result_type,
                    schedule_to_close_timeout=backing.schedule_to_close + NEXUS_MARGIN,
                    cancellation_type=_nexus_cancellation(self.cancellation_type),
                    summary=summary,
                )
            except (NexusOperationError, asyncio.CancelledError) as e:
                if _workflow_cancelled():
                    raise
                waited = workflow.now() - first
                step = after_failure(e, waited=waited, queue_timeout=self.queue_timeout)
                if isinstance(step, CheckQueue):
                    # The handler checks the queue: sent again with check_queue, it fails
                    # the call at once when nothing polls it.
                    step = after_check(True, waited=waited, queue_timeout=self.queue_timeout)
                if isinstance(step, Again):
                    handed = handed or step.handed_back
                    check = step.check_queue
                    if step.pause:
                        await workflow.sleep(step.pause)
                    continue
                if isinstance(step, Unserved):
                    busy = QueueLiveness(queue=call.task_queue(), polled=True)
                    return self._unserved(busy, waited)
                return map_failure(e, workspace_id=self.workspace_id, queue=call.task_queue())

    def _service_call(
        self, activity_name: str, arg: object, *, queue_left: timedelta | None = None
    ) -> Any:
        """The ``fs_search`` service's input for a call of ``activity_name`` with ``arg``:
        the request, the workspace (and host), and this helper's activity options."""
        config = self.activity_config(queue_left=queue_left)
        left = self.queue_timeout if queue_left is None else max(queue_left, timedelta(0))
        attempts = self.retry_policy.maximum_attempts or MAX_ATTEMPTS
        fields: dict[str, Any] = {
            "workspace_id": self.workspace_id,
            "host": self.host,
            "queue_timeout_ms": _ms(left),
            # 0: no schedule-to-start timeout (None would be the handler's default).
            "schedule_to_start_ms": _ms(self.schedule_to_start_timeout) or 0,
            "start_to_close_ms": _ms(config.get("start_to_close_timeout")),
            "heartbeat_timeout_ms": _ms(self.heartbeat_timeout),
            "max_attempts": attempts,
        }
        if arg is not None:
            fields["request"] = arg
        return CALL_OF_ACTIVITY[activity_name](**fields)

    async def _liveness(self) -> QueueLiveness:
        """Who polls the queue (the plugin's local activity); unknown when it cannot say."""
        try:
            return await workflow.execute_local_activity(
                QUEUE_LIVENESS_ACTIVITY,
                self.task_queue,
                result_type=QueueLiveness,
                start_to_close_timeout=LIVENESS_TIMEOUT,
                retry_policy=RetryPolicy(maximum_attempts=1),
            )
        except (ActivityError, asyncio.CancelledError) as e:
            if _workflow_cancelled():
                raise
            cause = e.cause if isinstance(e, ActivityError) else e
            return QueueLiveness(queue=self.task_queue, polled=None, detail=str(cause))

    def _unserved(self, liveness: QueueLiveness, waited: timedelta) -> ToolResult:
        """The ``Error:`` result of a call no worker took."""
        return unserved(
            liveness,
            workspace_id=self.workspace_id,
            host=self.host,
            took=self.schedule_to_start_timeout or waited,
            queue_timeout=self.queue_timeout,
        )


def _nexus_cancellation(
    kind: workflow.ActivityCancellationType,
) -> workflow.NexusOperationCancellationType:
    """The Nexus cancellation type that keeps an activity cancellation type's promise."""
    kinds = workflow.NexusOperationCancellationType
    return {
        "TRY_CANCEL": kinds.TRY_CANCEL,
        "ABANDON": kinds.ABANDON,
        "WAIT_CANCELLATION_REQUESTED": kinds.WAIT_REQUESTED,
    }.get(kind.name if isinstance(kind, Enum) else str(kind), kinds.WAIT_COMPLETED)


def _ms(span: timedelta | None) -> int | None:
    return None if span is None else int(span.total_seconds() * 1000)


def _workflow_cancelled() -> bool:
    """Whether the whole workflow is being cancelled (then cancellation propagates)."""
    return workflow.in_workflow() and workflow.cancellation_reason() is not None


def map_failure(error: BaseException, *, workspace_id: str, queue: str) -> ToolResult:
    """Turn a failed call (after retries) into the model's ``Error: ...`` result."""
    if isinstance(error, asyncio.CancelledError):
        return ToolResult.failure(ErrorCode.SEARCH_ABORTED, "the search was cancelled")
    cause = failure_cause(error)
    if isinstance(cause, ApplicationError):
        if cause.type is not None and cause.type in ErrorCode.__members__:
            return ToolResult.failure(ErrorCode(cause.type), cause.message)
        kind = cause.type or "ApplicationError"
        return ToolResult.failure(
            ErrorCode.SEARCH_FAILED, f"the search failed ({kind}): {cause.message}"
        )
    if isinstance(cause, TimeoutError):
        if cause.type == TimeoutType.SCHEDULE_TO_START:
            return ToolResult.failure(
                ErrorCode.SEARCH_FAILED,
                f"no fs-search worker picked up the call for workspace {workspace_id!r} "
                f"(task queue {queue!r}); is the worker for that workspace running?",
            )
        kind = cause.type.name.lower().replace("_", "-") if cause.type else "activity"
        return ToolResult.failure(
            ErrorCode.SEARCH_ABORTED, f"the search was aborted: {kind} timeout"
        )
    if isinstance(cause, CancelledError):
        return ToolResult.failure(ErrorCode.SEARCH_ABORTED, "the search was cancelled")
    message = str(cause) if cause is not None else str(error)
    return ToolResult.failure(ErrorCode.SEARCH_FAILED, f"the search failed: {message}")
