"""The workflow side of fs-search: what agent workflows and their callers import.

``FsSearchTools`` schedules glob/grep/read_spill on a workspace's worker from workflow code
(or, with ``endpoint=``, calls them through the Nexus service ``FsSearchService`` from another
namespace: its operations take ``GlobCall``, ``GrepCall``, ``ReadSpillCall`` and
``ToolsCall``; ``DEFAULT_ENDPOINT`` is the endpoint ``fs-search dev`` creates);
``FsSearchClient`` makes the same calls from any client, one standalone activity each;
``FsSearchPlugin`` goes on the client (workers built from it inherit it). The request and
result models are the contract shared with the activities; ``parse_arguments`` decodes a
model's JSON arguments as ``FsSearchTools.call`` expects them.

Importing this package is safe inside Temporal's workflow sandbox: it loads only the
workflow-side helper and the pydantic models. ``FsSearchPlugin`` (converter, external
storage, tracing: OpenTelemetry and friends) and ``FsSearchClient`` are loaded on first use,
outside workflow code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from fs_search.activities import (
        ErrorCode,
        GlobRequest,
        GlobResult,
        GrepMatch,
        GrepRequest,
        GrepResult,
        ReadSpillRequest,
        ReadSpillResult,
        SpillRef,
        ToolError,
        ToolResult,
        ToolSpec,
        ToolsResult,
        WorkspaceRef,
        host_queue_for,
        task_queue_for,
    )
    from fs_search.workflows._arguments import parse_arguments
    from fs_search.workflows._service import (
        DEFAULT_ENDPOINT,
        FsSearchService,
        GlobCall,
        GrepCall,
        ReadSpillCall,
        ToolsCall,
    )
    from fs_search.workflows._tools import FsSearchTools

if TYPE_CHECKING:
    from fs_search.workflows._one_off import FsSearchClient
    from fs_search.workflows._plugin import FsSearchPlugin


def __getattr__(name: str) -> Any:
    # The plugin pulls in OpenTelemetry and the storage drivers: load it only when asked for,
    # so workflow code importing this package stays light in the sandbox.
    if name == "FsSearchPlugin":
        from fs_search.workflows._plugin import FsSearchPlugin

        return FsSearchPlugin
    if name == "FsSearchClient":
        from fs_search.workflows._one_off import FsSearchClient

        return FsSearchClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_ENDPOINT",
    "ErrorCode",
    "FsSearchClient",
    "FsSearchPlugin",
    "FsSearchService",
    "FsSearchTools",
    "GlobCall",
    "GlobRequest",
    "GlobResult",
    "GrepCall",
    "GrepMatch",
    "GrepRequest",
    "GrepResult",
    "ReadSpillCall",
    "ReadSpillRequest",
    "ReadSpillResult",
    "SpillRef",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "ToolsCall",
    "ToolsResult",
    "WorkspaceRef",
    "host_queue_for",
    "parse_arguments",
    "task_queue_for",
]
