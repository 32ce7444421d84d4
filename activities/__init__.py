"""The search activities: ripgrep-backed glob and grep for one workspace.

The contract (request and result models, error codes, activity names) and the settings
load eagerly: they are light (pydantic), and workflow code imports the models. The
activities themselves and the spill stores (subprocesses, S3 clients, OpenTelemetry) load
on first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from fs_search.activities.config import ConfigError, FsSearchConfig
from fs_search.activities.contract import (
    GLOB_ACTIVITY,
    GREP_ACTIVITY,
    READ_SPILL_ACTIVITY,
    TOOLS_ACTIVITY,
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
    task_queue_for,
)
from fs_search.activities.errors import SearchError

if TYPE_CHECKING:
    from fs_search.activities.search import SearchActivities
    from fs_search.activities.storage import (
        FileSpillStore,
        S3SpillStore,
        SpillStore,
        Storage,
        open_storage,
    )

_LAZY = {
    "SearchActivities": "fs_search.activities.search",
    "SpillStore": "fs_search.activities.storage",
    "FileSpillStore": "fs_search.activities.storage",
    "S3SpillStore": "fs_search.activities.storage",
    "Storage": "fs_search.activities.storage",
    "open_storage": "fs_search.activities.storage",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "GLOB_ACTIVITY",
    "GREP_ACTIVITY",
    "READ_SPILL_ACTIVITY",
    "TOOLS_ACTIVITY",
    "ConfigError",
    "ErrorCode",
    "FileSpillStore",
    "FsSearchConfig",
    "GlobRequest",
    "GlobResult",
    "GrepMatch",
    "GrepRequest",
    "GrepResult",
    "ReadSpillRequest",
    "ReadSpillResult",
    "S3SpillStore",
    "SearchActivities",
    "SearchError",
    "SpillRef",
    "SpillStore",
    "Storage",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "ToolsResult",
    "open_storage",
    "task_queue_for",
]
