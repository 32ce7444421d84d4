"""FsSearchService: fs-search as a Nexus service, for callers in other namespaces
(docs/serving-other-namespaces.md).

A workflow in any namespace of the cluster calls glob/grep through an endpoint (e.g.
``fs-search``) whose target is the search namespace's handler queue. Each operation takes the
activity's request plus where to run it — ``workspace_id`` and, for a host-routed workspace,
``host`` — and returns the activity's own result model. The handler
(:mod:`fs_search.worker._service_handler`) backs every operation with a standalone activity on
the workspace's (or host's) queue, so retries, heartbeats, cancellation (rg killed) and the
UI's summary are the activity's own.

The scheduling fields are what ``FsSearchTools`` would have scheduled the activity with; the
handler bounds each of them (a caller in another namespace is not trusted with the search
namespace's resources: :class:`~fs_search.activities._budget.BackingOptions`) and fills a
missing one with the same default. Pure: pydantic and nexusrpc only, importable from workflow
code.
"""

from __future__ import annotations

import re

import nexusrpc
from pydantic import BaseModel, ConfigDict

from fs_search.activities import (
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


__all__ = [
    "DEFAULT_ENDPOINT",
    "SERVICE_NAME",
    "FsSearchService",
    "GlobCall",
    "GrepCall",
    "ReadSpillCall",
    "ServiceCall",
    "ToolsCall",
    "Where",
]
