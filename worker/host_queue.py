"""One queue for a whole host: ``fs-search-host/<host-id>`` (SPEC §7, host-routed queues).

Per-workspace queues cost the Temporal server a long poll and a few loaded partitions each,
so they stop at about a thousand workspaces per namespace. A host-routed worker polls one
queue; every request on it names its workspace (``workspace_id``) and :class:`HostRouter`
hands it to that workspace's own :class:`SearchActivities` — the same confinement (its held
root), spills keyed by it, its telemetry, and its key in the executor's fair gate, so a
flooding workspace waits its turn behind a quiet one on the same queue.

A request naming a workspace this host has not attached fails at once, non-retryable
SEARCH_FAILED naming the workspace and the host: retrying on the same host queue could only
reach this same host.
"""

from __future__ import annotations

from collections.abc import Callable

from temporalio import activity

from fs_search.activities.contract import (
    GLOB_ACTIVITY,
    GREP_ACTIVITY,
    READ_SPILL_ACTIVITY,
    TOOLS_ACTIVITY,
    ErrorCode,
    GlobRequest,
    GlobResult,
    GrepRequest,
    GrepResult,
    ReadSpillRequest,
    ReadSpillResult,
    ToolsRequest,
    ToolsResult,
    host_queue_for,
)
from fs_search.activities.errors import SearchError, contract, invalid_argument
from fs_search.activities.search import SearchActivities

Lookup = Callable[[str], SearchActivities | None]


class HostRouter:
    """The four activities of a host queue, each dispatched to the named workspace.

    Args:
        host_id: this host (named in errors).
        lookup: the attached workspace of an id, or None.
    """

    def __init__(self, host_id: str, lookup: Lookup) -> None:
        self.host_id = host_id
        self.queue = host_queue_for(host_id)
        self._lookup = lookup

    def all(self) -> list[object]:
        """Every activity, for ``Worker(activities=...)``."""
        return [self.glob, self.grep, self.tools, self.read_spill]

    @activity.defn(name=GLOB_ACTIVITY)
    async def glob(self, req: GlobRequest) -> GlobResult:
        """glob in the workspace the request names."""
        return await (await self._workspace(req.workspace_id)).glob(req)

    @activity.defn(name=GREP_ACTIVITY)
    async def grep(self, req: GrepRequest) -> GrepResult:
        """grep in the workspace the request names."""
        return await (await self._workspace(req.workspace_id)).grep(req)

    @activity.defn(name=TOOLS_ACTIVITY)
    async def tools(self, req: ToolsRequest | None = None) -> ToolsResult:
        """The catalogue of the workspace the request names."""
        workspace_id = req.workspace_id if req is not None else None
        return await (await self._workspace(workspace_id)).tools(req)

    @activity.defn(name=READ_SPILL_ACTIVITY)
    async def read_spill(self, req: ReadSpillRequest) -> ReadSpillResult:
        """A page of a spill artifact of the workspace the request names."""
        return await (await self._workspace(req.workspace_id)).read_spill(req)

    async def _workspace(self, workspace_id: str | None) -> SearchActivities:
        return await contract(self._find(workspace_id))

    async def _find(self, workspace_id: str | None) -> SearchActivities:
        if workspace_id is None:
            raise invalid_argument(
                f"a call on host queue {self.queue!r} must name its workspace (workspace_id)"
            )
        found = self._lookup(workspace_id)
        if found is None:
            raise SearchError(
                ErrorCode.SEARCH_FAILED,
                f"workspace {workspace_id[:200]!r} is not served on host {self.host_id!r} "
                f"(task queue {self.queue!r}): it is not attached here; check which host "
                "holds it",
            )
        return found
