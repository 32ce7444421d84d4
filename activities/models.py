"""The pydantic contract shared by the activities, the workflow helper and callers.

Imports only pydantic so workflow code can pass it through the sandbox. Every model that
crosses Temporal ignores unknown fields, so callers and workers of neighbouring versions
interoperate (only a model's tool arguments are refused when they hold more).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# The tool-argument contract (limits, checks, request models) lives in ``arguments``;
# it is re-exported here, so the whole contract is one import.
from fs_search.activities.arguments import (
    DEFAULT_TIMEOUT_MS,
    MAX_INCLUDE_BYTES,
    MAX_LOCATOR_BYTES,
    MAX_PATH_BYTES,
    MAX_PATTERN_BYTES,
    MAX_READ_SPILL_LINES,
    TOOL_ARGUMENTS,
    ArgumentProblem,
    GlobArguments,
    GlobRequest,
    GrepArguments,
    GrepRequest,
    ReadSpillArguments,
    ReadSpillRequest,
    ToolArguments,
    ToolsRequest,
    include_problem,
    request_problem,
)

# Activity type names and the task queue of a workspace: the public Temporal surface.
GLOB_ACTIVITY = "fs_search.glob"
GREP_ACTIVITY = "fs_search.grep"
TOOLS_ACTIVITY = "fs_search.tools"
READ_SPILL_ACTIVITY = "fs_search.read_spill"
TASK_QUEUE_PREFIX = "fs-search/"
# A host-routed worker's one queue (SPEC §7): every request on it names its workspace.
HOST_QUEUE_PREFIX = "fs-search-host/"


def task_queue_for(workspace_id: str) -> str:
    """The task queue the worker owning ``workspace_id`` polls."""
    return f"{TASK_QUEUE_PREFIX}{workspace_id}"


def host_queue_for(host_id: str) -> str:
    """The one task queue of a host-routed worker on ``host_id``."""
    return f"{HOST_QUEUE_PREFIX}{host_id}"


class ErrorCode(StrEnum):
    """Codes of the contract's non-retryable failures (the ApplicationError ``type``)."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    SEARCH_INVALID_PATTERN = "SEARCH_INVALID_PATTERN"
    SEARCH_FAILED = "SEARCH_FAILED"
    SEARCH_RAW_OUTPUT_OVERFLOW = "SEARCH_RAW_OUTPUT_OVERFLOW"
    SEARCH_ABORTED = "SEARCH_ABORTED"


def error_name(code: ErrorCode) -> str:
    """The ``name`` that accompanies a code in failure details and tool results."""
    return "ToolArgumentError" if code is ErrorCode.INVALID_ARGUMENT else "SearchError"


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class SpillRef(_Model):
    """Where the complete result of an over-cap call was saved, and how to read it."""

    locator: str
    hint: str


class GlobResult(_Model):
    """The outcome of a glob call; ``text`` is exactly what the model sees."""

    tool: Literal["glob"] = "glob"
    root: str
    paths: list[str]
    total: int
    truncated: bool
    sampled: bool
    text: str
    spill: SpillRef | None = None
    spill_error: str | None = None
    # Extension of the contract: some directories under the root could not be read.
    partial: bool = False


class GrepMatch(_Model):
    """One matching line."""

    path: str
    line_number: int
    line: str
    line_truncated: bool = False


class GrepResult(_Model):
    """The outcome of a grep call; ``text`` is exactly what the model sees."""

    tool: Literal["grep"] = "grep"
    matches: list[GrepMatch]
    total: int
    files: int
    truncated: bool
    partial: bool = False
    text: str
    spill: SpillRef | None = None
    spill_error: str | None = None


class ReadSpillResult(_Model):
    """A page of a spill artifact."""

    tool: Literal["read_spill"] = "read_spill"
    locator: str
    text: str
    offset: int
    next_offset: int | None
    total_lines: int


class ToolSpec(_Model):
    """A model-facing tool definition."""

    name: str
    description: str
    input_schema: dict[str, Any]


class ToolError(_Model):
    """The structured error of a failed tool call."""

    name: str
    code: ErrorCode


class ToolsResult(_Model):
    """The catalogue a worker offers: tool definitions and system prompt segments."""

    available: bool
    reason: str | None = None
    tools: list[ToolSpec] = Field(default_factory=list)
    system_prompt: list[str] = Field(default_factory=list)
    sample_over_cap_glob_results: bool
    timeout_ms: int
    # How rg is confined on this worker: "landlock" (kernel-enforced) or "none".
    sandbox: Literal["landlock", "none"] = "none"
    # The workspace whose queue answered (one worker process may serve many).
    workspace_id: str | None = None
    # Set by the caller's side only (``FsSearchTools.catalogue()``) when no worker answered:
    # the failure's code (SEARCH_FAILED when nothing serves the workspace), ``reason`` its
    # message. None when a worker answered, whatever it offers.
    error: ToolError | None = None


AnyResult = Annotated[GlobResult | GrepResult | ReadSpillResult, Field(discriminator="tool")]


class ToolResult(_Model):
    """What an agent workflow hands back to the model for one tool call."""

    text: str
    is_error: bool = False
    error: ToolError | None = None
    result: AnyResult | None = None

    @classmethod
    def failure(cls, code: ErrorCode, message: str) -> ToolResult:
        """A tool error shown to the model as ``Error: <message>``."""
        return cls(
            text=f"Error: {message}",
            is_error=True,
            error=ToolError(name=error_name(code), code=code),
        )


__all__ = [
    "DEFAULT_TIMEOUT_MS",
    "AnyResult",
    "ArgumentProblem",
    "ErrorCode",
    "GLOB_ACTIVITY",
    "GREP_ACTIVITY",
    "GlobArguments",
    "GlobRequest",
    "GlobResult",
    "GrepArguments",
    "GrepMatch",
    "GrepRequest",
    "GrepResult",
    "MAX_INCLUDE_BYTES",
    "MAX_LOCATOR_BYTES",
    "MAX_PATH_BYTES",
    "MAX_PATTERN_BYTES",
    "MAX_READ_SPILL_LINES",
    "READ_SPILL_ACTIVITY",
    "ReadSpillArguments",
    "ReadSpillRequest",
    "ReadSpillResult",
    "SpillRef",
    "HOST_QUEUE_PREFIX",
    "TASK_QUEUE_PREFIX",
    "TOOLS_ACTIVITY",
    "TOOL_ARGUMENTS",
    "ToolArguments",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "ToolsRequest",
    "ToolsResult",
    "error_name",
    "include_problem",
    "host_queue_for",
    "request_problem",
    "task_queue_for",
]
