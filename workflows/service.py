"""FsSearchService: fs-search as a Nexus service, for callers in other namespaces (SPEC §9).

A workflow in any namespace of the cluster calls glob/grep through an endpoint (e.g.
``fs-search``) whose target is the search namespace's handler queue. Each operation takes the
activity's request plus where to run it — ``workspace_id`` and, for a host-routed workspace,
``host`` — and returns the activity's own result model. The handler
(:mod:`fs_search.worker.service_handler`) backs every operation with a standalone activity on
the workspace's (or host's) queue, so retries, heartbeats, cancellation (rg killed) and the
UI's summary are the activity's own.

The scheduling fields are what ``FsSearchTools`` would have scheduled the activity with; the
handler bounds each of them (a caller in another namespace is not trusted with the search
namespace's resources) and fills a missing one with the same default. Pure: pydantic and
nexusrpc only, importable from workflow code.
"""

from __future__ import annotations

import re
from datetime import timedelta

import nexusrpc
from pydantic import BaseModel, ConfigDict

from fs_search.activities.contract import (
    DEFAULT_TIMEOUT_MS,
    GLOB_ACTIVITY,
    GREP_ACTIVITY,
    ID_SYNTAX,
    READ_SPILL_ACTIVITY,
    TOOLS_ACTIVITY,
    GlobRequest,
    GlobResult,
    GrepRequest,
    GrepResult,
    ReadSpillRequest,
    ReadSpillResult,
    ToolsRequest,
    ToolsResult,
    host_queue_for,
    task_queue_for,
)

SERVICE_NAME = "fs_search"
# The endpoint name `fs-search dev` creates, and FsSearchTools' default when routed by endpoint.
DEFAULT_ENDPOINT = "fs-search"

# How long a call may wait for a busy worker (in Temporal and in the worker's queue).
DEFAULT_QUEUE_TIMEOUT = timedelta(minutes=5)
# How soon a call no worker picked up is checked: a worker takes calls at once (it holds
# many more than it runs), so this is how long an unserved workspace takes to report.
DEFAULT_SCHEDULE_TO_START = timedelta(seconds=8)
# What start-to-close keeps beyond the queueing budget and the call's own budget, for the
# worker to digest, save and return the result (the worker's RESERVE_S).
RESERVE = timedelta(seconds=5)
DEFAULT_HEARTBEAT_TIMEOUT = timedelta(seconds=5)
DEFAULT_MAX_ATTEMPTS = 3

# The handler's bounds on what a caller asks for.
MAX_QUEUE_TIMEOUT = timedelta(hours=1)
MAX_CALL_TIMEOUT = timedelta(hours=1)
MIN_TIMEOUT = timedelta(seconds=1)
MAX_HEARTBEAT_TIMEOUT = timedelta(minutes=5)
MAX_ATTEMPTS = 10


# A standalone activity's whole life beyond one attempt's start-to-close: room for a retry
# after a worker died. Past it the activity is closed whatever its attempts do, so a caller
# that went away (a killed shell, a deleted workflow) never leaves it pending.
RETRY_MARGIN = timedelta(minutes=1)


def schedule_to_close_for(start_to_close: timedelta) -> timedelta:
    """A standalone activity's schedule-to-close: one attempt's start-to-close (which holds
    the queueing budget) plus :data:`RETRY_MARGIN`."""
    return start_to_close + RETRY_MARGIN


def start_to_close_for(queue_left: timedelta, timeout_ms: int) -> timedelta:
    """An attempt's start-to-close: what is left of the queueing budget (the worker holds a
    call it cannot run yet), the call's own budget, and the reserve for the result."""
    return max(queue_left, timedelta(0)) + timedelta(milliseconds=timeout_ms) + RESERVE


class Where(BaseModel):
    """Where a service call runs, and how its backing activity is scheduled.

    ``workspace_id`` names the workspace; ``host`` the host serving it on its host queue
    (``fs-search-host/<host>``), None for the workspace's own queue ``fs-search/<id>``.
    The ``*_ms`` fields and ``max_attempts`` are the caller's activity options (None: the
    default); ``check_queue`` asks the handler to check that a worker polls the queue
    before it starts the activity (the caller sets it after a call no worker took within
    the schedule-to-start timeout: the caller's namespace cannot ask); ``handed_back`` says
    a host queue handed the call back (WORKSPACE_BUSY) and it starts again at low priority.
    """

    model_config = ConfigDict(extra="ignore")
    workspace_id: str
    host: str | None = None
    queue_timeout_ms: int | None = None
    schedule_to_start_ms: int | None = None
    start_to_close_ms: int | None = None
    heartbeat_timeout_ms: int | None = None
    max_attempts: int | None = None
    check_queue: bool = False
    # The host queue handed the call back before: it is started again behind others' calls.
    handed_back: bool = False

    def task_queue(self) -> str:
        """The queue the backing activity runs on."""
        if self.host is not None:
            return host_queue_for(self.host)
        return task_queue_for(self.workspace_id)

    def problem(self) -> str | None:
        """Why this call names no queue the service serves (an id outside the syntax)."""
        for name, value in (("workspace_id", self.workspace_id), ("host", self.host)):
            if value is not None and not re.fullmatch(ID_SYNTAX, value):
                return f"{name} {value[:200]!r} is not a valid id"
        return None


class GlobCall(Where):
    """The ``glob`` operation's input."""

    request: GlobRequest


class GrepCall(Where):
    """The ``grep`` operation's input."""

    request: GrepRequest


class ReadSpillCall(Where):
    """The ``read_spill`` operation's input."""

    request: ReadSpillRequest


class ToolsCall(Where):
    """The ``tools`` operation's input (the catalogue of the workspace)."""

    request: ToolsRequest | None = None


ServiceCall = GlobCall | GrepCall | ReadSpillCall | ToolsCall


@nexusrpc.service(name=SERVICE_NAME)
class FsSearchService:
    """fs-search's Nexus service: the four activities, each on a named workspace."""

    tools: nexusrpc.Operation[ToolsCall, ToolsResult]
    glob: nexusrpc.Operation[GlobCall, GlobResult]
    grep: nexusrpc.Operation[GrepCall, GrepResult]
    read_spill: nexusrpc.Operation[ReadSpillCall, ReadSpillResult]


# The activity each operation runs, and the operation of each activity.
ACTIVITY_OF_OPERATION = {
    "tools": TOOLS_ACTIVITY,
    "glob": GLOB_ACTIVITY,
    "grep": GREP_ACTIVITY,
    "read_spill": READ_SPILL_ACTIVITY,
}
OPERATION_OF_ACTIVITY = {activity: op for op, activity in ACTIVITY_OF_OPERATION.items()}
CALL_OF_ACTIVITY: dict[str, type[ServiceCall]] = {
    TOOLS_ACTIVITY: ToolsCall,
    GLOB_ACTIVITY: GlobCall,
    GREP_ACTIVITY: GrepCall,
    READ_SPILL_ACTIVITY: ReadSpillCall,
}


class BackingOptions(BaseModel):
    """How the handler schedules a call's backing activity: the caller's options, bounded."""

    task_queue: str
    start_to_close: timedelta
    schedule_to_start: timedelta | None
    schedule_to_close: timedelta
    heartbeat_timeout: timedelta
    max_attempts: int

    @classmethod
    def of(
        cls, call: Where, *, timeout_ms: int | None, cap_ms: int | None = None
    ) -> BackingOptions:
        """The bounded options of ``call`` (``timeout_ms``: the request's budget, ``cap_ms``:
        the serving workers' cap when known)."""
        budget = timeout_ms if timeout_ms and timeout_ms > 0 else DEFAULT_TIMEOUT_MS
        if cap_ms:
            budget = min(budget, cap_ms)
        budget = min(budget, int(MAX_CALL_TIMEOUT.total_seconds() * 1000))
        queue = _bounded_ms(
            call.queue_timeout_ms, DEFAULT_QUEUE_TIMEOUT, timedelta(0), MAX_QUEUE_TIMEOUT
        )
        ceiling = start_to_close_for(MAX_QUEUE_TIMEOUT, budget)
        start_to_close = _bounded_ms(
            call.start_to_close_ms, start_to_close_for(queue, budget), MIN_TIMEOUT, ceiling
        )
        schedule_to_start: timedelta | None = None
        if call.schedule_to_start_ms is None or call.schedule_to_start_ms > 0:
            schedule_to_start = _bounded_ms(
                call.schedule_to_start_ms, DEFAULT_SCHEDULE_TO_START, MIN_TIMEOUT, MAX_QUEUE_TIMEOUT
            )
        heartbeat = _bounded_ms(
            call.heartbeat_timeout_ms,
            DEFAULT_HEARTBEAT_TIMEOUT,
            MIN_TIMEOUT,
            MAX_HEARTBEAT_TIMEOUT,
        )
        attempts = call.max_attempts or DEFAULT_MAX_ATTEMPTS
        attempts = max(1, min(attempts, MAX_ATTEMPTS))
        return cls(
            task_queue=call.task_queue(),
            start_to_close=start_to_close,
            schedule_to_start=schedule_to_start,
            schedule_to_close=schedule_to_close_for(start_to_close),
            heartbeat_timeout=heartbeat,
            max_attempts=attempts,
        )


def _bounded_ms(
    value_ms: int | None, default: timedelta, low: timedelta, high: timedelta
) -> timedelta:
    """``value_ms`` within [low, high] (bounded as an integer first: a caller's 10**30 ms
    would overflow ``timedelta``), or ``default`` when not given."""
    if value_ms is None:
        return default
    low_ms, high_ms = int(low.total_seconds() * 1000), int(high.total_seconds() * 1000)
    return timedelta(milliseconds=min(max(value_ms, low_ms), high_ms))


__all__ = [
    "DEFAULT_ENDPOINT",
    "SERVICE_NAME",
    "BackingOptions",
    "FsSearchService",
    "GlobCall",
    "GrepCall",
    "ReadSpillCall",
    "ServiceCall",
    "ToolsCall",
    "Where",
    "schedule_to_close_for",
    "start_to_close_for",
]
