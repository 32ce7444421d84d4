"""The search activities: ripgrep-backed glob and grep for one workspace.

Internal to fs-search: callers import the contract from ``fs_search.workflows``, operators
the worker's parts from ``fs_search.worker`` (which re-exports what it needs from here).
Every module here is private by name; this front is what the workflow side and the worker
read (the names below). A reader starts from :mod:`~fs_search.activities._search` (the four
activities), then ``_contract``, ``_budget`` (a call's time) and ``_attempts`` (a call's
attempts: the hand-back rule, the next step after a failure), all three pure and shared with
the workflow side, ``_errors``, ``_config``, ``_catalogue``, ``_progress``, ``_telemetry``,
``_workspace`` and ``_glob_listing``, and the rooms by stage behind their fronts: ``rg``
(run rg), ``results`` (rg's output made into results) and ``storage`` (where complete results
go).

Names load on first use: the activities and the stores bring subprocesses, S3 clients and
OpenTelemetry; the contract alone is what workflow code loads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# The names as the type checker sees them (ruff: re-exported on purpose, beyond __all__).
if TYPE_CHECKING:
    from fs_search.activities._attempts import (
        HAND_BACKS_ON_SERVER,
        HANDED_BACK_PAUSE,
        HANDED_BACK_PRIORITY,
        MAX_HANDED_BACK_PAUSE,
        MIN_HANDED_BACK_PAUSE,
        Again,
        CheckQueue,
        Failed,
        Unserved,
        after_check,
        after_failure,
        asked_pause,
        failure_cause,
        handed_back,
        not_picked_up,
        pause_after_hand_back,
        priority_for,
        retried_by_server,
        with_contract_codes,
    )
    from fs_search.activities._budget import (
        DEFAULT_HEARTBEAT_TIMEOUT,
        DEFAULT_MAX_ATTEMPTS,
        DEFAULT_QUEUE_TIMEOUT,
        DEFAULT_SCHEDULE_TO_START,
        MAX_ATTEMPTS,
        NEXUS_MARGIN,
        BackingOptions,
        drain_for,
        execution_timeout,
        queue_budget_s,
        schedule_to_close_for,
        start_to_close_for,
    )
    from fs_search.activities._config import (
        S3_ENDPOINT_URL_ENV,
        SPILL_URL_ENV,
        ConfigError,
        FsSearchConfig,
        StorageSettings,
        endpoint_url_problem,
        spill_url_problem,
    )
    from fs_search.activities._contract import (
        DEFAULT_TIMEOUT_MS,
        GLOB_ACTIVITY,
        GREP_ACTIVITY,
        HOST_QUEUE_PREFIX,
        ID_SYNTAX,
        MAX_READ_SPILL_LINES,
        NON_RETRYABLE_ERROR_TYPES,
        READ_SPILL_ACTIVITY,
        TASK_QUEUE_PREFIX,
        TOOL_ARGUMENTS,
        TOOLS_ACTIVITY,
        WORKSPACE_BUSY,
        ArgumentProblem,
        ErrorCode,
        GlobArguments,
        GlobRequest,
        GlobResult,
        GrepArguments,
        GrepMatch,
        GrepRequest,
        GrepResult,
        ReadSpillArguments,
        ReadSpillRequest,
        ReadSpillResult,
        SpillRef,
        ToolError,
        ToolResult,
        ToolSpec,
        ToolsRequest,
        ToolsResult,
        WorkspaceRef,
        error_name,
        fairness_key_for,
        host_queue_for,
        task_queue_for,
    )
    from fs_search.activities._distribution import (
        DISTRIBUTION,
        clash_warning,
        installed_version,
    )
    from fs_search.activities._errors import (
        SearchError,
        contract_errors,
        invalid_argument,
    )
    from fs_search.activities._held_root import (
        HeldRoot,
        Missing,
        Outside,
        Unresolvable,
    )
    from fs_search.activities._identity import (
        Identity,
        workspace_identity,
    )
    from fs_search.activities._progress import (
        HEARTBEAT_INTERVAL_S,
        Progress,
        heartbeating,
        time_left,
    )
    from fs_search.activities._search import (
        NICE_STEP,
        RgStatus,
        SearchActivities,
    )
    from fs_search.activities._shown import (
        escaped,
    )
    from fs_search.activities._summaries import (
        summary,
        summary_of,
    )
    from fs_search.activities._telemetry import (
        INSTRUMENTATION,
        SearchTelemetry,
    )
    from fs_search.activities._workspace import (
        Changed,
        Workspace,
        host_id_of,
        this_host,
    )
    from fs_search.activities.storage import (
        Storage,
        local_storage,
        open_storage,
        storage_for,
    )

_LAZY = {
    "Again": "fs_search.activities._attempts",
    "CheckQueue": "fs_search.activities._attempts",
    "Failed": "fs_search.activities._attempts",
    "HANDED_BACK_PAUSE": "fs_search.activities._attempts",
    "HANDED_BACK_PRIORITY": "fs_search.activities._attempts",
    "HAND_BACKS_ON_SERVER": "fs_search.activities._attempts",
    "MAX_HANDED_BACK_PAUSE": "fs_search.activities._attempts",
    "MIN_HANDED_BACK_PAUSE": "fs_search.activities._attempts",
    "Unserved": "fs_search.activities._attempts",
    "after_check": "fs_search.activities._attempts",
    "after_failure": "fs_search.activities._attempts",
    "asked_pause": "fs_search.activities._attempts",
    "failure_cause": "fs_search.activities._attempts",
    "handed_back": "fs_search.activities._attempts",
    "not_picked_up": "fs_search.activities._attempts",
    "pause_after_hand_back": "fs_search.activities._attempts",
    "priority_for": "fs_search.activities._attempts",
    "retried_by_server": "fs_search.activities._attempts",
    "with_contract_codes": "fs_search.activities._attempts",
    "BackingOptions": "fs_search.activities._budget",
    "DEFAULT_HEARTBEAT_TIMEOUT": "fs_search.activities._budget",
    "DEFAULT_MAX_ATTEMPTS": "fs_search.activities._budget",
    "DEFAULT_QUEUE_TIMEOUT": "fs_search.activities._budget",
    "DEFAULT_SCHEDULE_TO_START": "fs_search.activities._budget",
    "MAX_ATTEMPTS": "fs_search.activities._budget",
    "NEXUS_MARGIN": "fs_search.activities._budget",
    "drain_for": "fs_search.activities._budget",
    "execution_timeout": "fs_search.activities._budget",
    "queue_budget_s": "fs_search.activities._budget",
    "schedule_to_close_for": "fs_search.activities._budget",
    "start_to_close_for": "fs_search.activities._budget",
    "ConfigError": "fs_search.activities._config",
    "FsSearchConfig": "fs_search.activities._config",
    "S3_ENDPOINT_URL_ENV": "fs_search.activities._config",
    "SPILL_URL_ENV": "fs_search.activities._config",
    "StorageSettings": "fs_search.activities._config",
    "endpoint_url_problem": "fs_search.activities._config",
    "spill_url_problem": "fs_search.activities._config",
    "ArgumentProblem": "fs_search.activities._contract",
    "DEFAULT_TIMEOUT_MS": "fs_search.activities._contract",
    "ErrorCode": "fs_search.activities._contract",
    "GLOB_ACTIVITY": "fs_search.activities._contract",
    "GREP_ACTIVITY": "fs_search.activities._contract",
    "GlobArguments": "fs_search.activities._contract",
    "GlobRequest": "fs_search.activities._contract",
    "GlobResult": "fs_search.activities._contract",
    "GrepArguments": "fs_search.activities._contract",
    "GrepMatch": "fs_search.activities._contract",
    "GrepRequest": "fs_search.activities._contract",
    "GrepResult": "fs_search.activities._contract",
    "HOST_QUEUE_PREFIX": "fs_search.activities._contract",
    "ID_SYNTAX": "fs_search.activities._contract",
    "MAX_READ_SPILL_LINES": "fs_search.activities._contract",
    "NON_RETRYABLE_ERROR_TYPES": "fs_search.activities._contract",
    "READ_SPILL_ACTIVITY": "fs_search.activities._contract",
    "ReadSpillArguments": "fs_search.activities._contract",
    "ReadSpillRequest": "fs_search.activities._contract",
    "ReadSpillResult": "fs_search.activities._contract",
    "SpillRef": "fs_search.activities._contract",
    "TASK_QUEUE_PREFIX": "fs_search.activities._contract",
    "TOOLS_ACTIVITY": "fs_search.activities._contract",
    "TOOL_ARGUMENTS": "fs_search.activities._contract",
    "ToolError": "fs_search.activities._contract",
    "ToolResult": "fs_search.activities._contract",
    "ToolSpec": "fs_search.activities._contract",
    "ToolsRequest": "fs_search.activities._contract",
    "ToolsResult": "fs_search.activities._contract",
    "WORKSPACE_BUSY": "fs_search.activities._contract",
    "WorkspaceRef": "fs_search.activities._contract",
    "error_name": "fs_search.activities._contract",
    "fairness_key_for": "fs_search.activities._contract",
    "host_queue_for": "fs_search.activities._contract",
    "task_queue_for": "fs_search.activities._contract",
    "DISTRIBUTION": "fs_search.activities._distribution",
    "clash_warning": "fs_search.activities._distribution",
    "installed_version": "fs_search.activities._distribution",
    "SearchError": "fs_search.activities._errors",
    "contract_errors": "fs_search.activities._errors",
    "invalid_argument": "fs_search.activities._errors",
    "HeldRoot": "fs_search.activities._held_root",
    "Missing": "fs_search.activities._held_root",
    "Outside": "fs_search.activities._held_root",
    "Unresolvable": "fs_search.activities._held_root",
    "Identity": "fs_search.activities._identity",
    "workspace_identity": "fs_search.activities._identity",
    "HEARTBEAT_INTERVAL_S": "fs_search.activities._progress",
    "Progress": "fs_search.activities._progress",
    "heartbeating": "fs_search.activities._progress",
    "time_left": "fs_search.activities._progress",
    "NICE_STEP": "fs_search.activities._search",
    "RgStatus": "fs_search.activities._search",
    "SearchActivities": "fs_search.activities._search",
    "escaped": "fs_search.activities._shown",
    "summary": "fs_search.activities._summaries",
    "summary_of": "fs_search.activities._summaries",
    "INSTRUMENTATION": "fs_search.activities._telemetry",
    "SearchTelemetry": "fs_search.activities._telemetry",
    "Changed": "fs_search.activities._workspace",
    "Workspace": "fs_search.activities._workspace",
    "host_id_of": "fs_search.activities._workspace",
    "this_host": "fs_search.activities._workspace",
    "Storage": "fs_search.activities.storage",
    "local_storage": "fs_search.activities.storage",
    "open_storage": "fs_search.activities.storage",
    "storage_for": "fs_search.activities.storage",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        # Through ``__import__``, not importlib: in Temporal's workflow sandbox it is the
        # sandbox's import hook, which passes fs_search's host modules through; importlib
        # would load a second copy of the module (a second ErrorCode, models, ...) into the
        # sandbox's module table and set it on this (host) package.
        return getattr(__import__(_LAZY[name], fromlist=[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# What the front offers beyond the project's own layers (fs_search.worker re-exports it). The
# other names above are how workflows/ and worker/ read the activities; the contract reaches
# users through fs_search.workflows only.
__all__ = [
    "ConfigError",
    "FsSearchConfig",
    "RgStatus",
    "SearchActivities",
    "SearchError",
    "Storage",
    "StorageSettings",
    "local_storage",
    "open_storage",
    "storage_for",
]
