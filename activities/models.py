"""The pydantic contract shared by the activities, the workflow helper and callers.

Imports only pydantic so workflow code can pass it through the sandbox. Every model
ignores unknown fields, so callers and workers of neighbouring versions interoperate.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# Activity type names and the task queue of a workspace: the public Temporal surface.
GLOB_ACTIVITY = "fs_search.glob"
GREP_ACTIVITY = "fs_search.grep"
TOOLS_ACTIVITY = "fs_search.tools"
READ_SPILL_ACTIVITY = "fs_search.read_spill"
TASK_QUEUE_PREFIX = "fs-search/"


def task_queue_for(workspace_id: str) -> str:
    """The task queue the worker owning ``workspace_id`` polls."""
    return f"{TASK_QUEUE_PREFIX}{workspace_id}"


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


# Request size limits. They keep a request far below Temporal's payload limit (2 MiB)
# and rg's argv limits; the workflow helper checks them before scheduling and the
# activity checks them again for direct callers.
MAX_PATTERN_BYTES = 32 * 1024
MAX_INCLUDE_BYTES = 1024
MAX_PATH_BYTES = 4096
MAX_LOCATOR_BYTES = 4096
MAX_READ_SPILL_LINES = 2000


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class GlobRequest(_Model):
    """One glob call: the model's ``pattern``/``path`` plus caller-side settings."""

    pattern: str
    path: str | None = None
    cwd: str | None = None
    spill: bool = True
    timeout_ms: int | None = None


class GrepRequest(_Model):
    """One grep call: the model's ``pattern``/``path``/``include`` plus caller-side settings."""

    pattern: str
    path: str | None = None
    include: str | None = None
    cwd: str | None = None
    spill: bool = True
    timeout_ms: int | None = None


class ReadSpillRequest(_Model):
    """A page of a spill artifact, in lines."""

    locator: str
    offset: int = 0
    limit: int = MAX_READ_SPILL_LINES


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


class ToolError(_Model):
    """The structured error of a failed tool call."""

    name: str
    code: ErrorCode


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


def _too_long(name: str, value: str | None, limit: int) -> str | None:
    if value is None:
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return f"{name} is not valid Unicode text"
    size = len(value.encode("utf-8"))
    if size > limit:
        return f"{name} is {size} bytes; the limit is {limit} bytes"
    if "\x00" in value:
        return f"{name} contains a NUL character"
    return None


def request_problem(req: GlobRequest | GrepRequest | ReadSpillRequest) -> str | None:
    """The first size or character problem of a request, or None when it is acceptable.

    Pure, so the workflow helper can refuse oversized requests before scheduling.
    """
    checks: list[tuple[str, str | None, int]]
    if isinstance(req, ReadSpillRequest):
        checks = [("locator", req.locator, MAX_LOCATOR_BYTES)]
    else:
        checks = [
            ("pattern", req.pattern, MAX_PATTERN_BYTES),
            ("path", req.path, MAX_PATH_BYTES),
            ("cwd", req.cwd, MAX_PATH_BYTES),
        ]
        if isinstance(req, GrepRequest):
            checks.append(("include", req.include, MAX_INCLUDE_BYTES))
    for name, value, limit in checks:
        problem = _too_long(name, value, limit)
        if problem:
            return problem
    return None
