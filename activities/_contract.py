"""The contract: what crosses Temporal between callers, workflows and workers.

The tool arguments (limits, checks, the argument and request models), the results, the
activity and task-queue names and the error codes, defined once here. Imports only pydantic,
so workflow code can pass it through the sandbox.

The argument models are the contract's one source: types, limits, checks and the
model-facing descriptions (the catalogue's input schemas are generated from them). Building
a request, as Temporal's decoding does, accepts any well-typed value: a request that breaks
the contract must still reach the activity and be answered INVALID_ARGUMENT, where a
decoding failure would be a generic, retryable error. ``checked()``, ``check()`` and
``problem()`` apply the checks. Every model that crosses Temporal ignores unknown fields, so
callers and workers of neighbouring versions interoperate (only a model's tool arguments are
refused when they hold more).
"""

from __future__ import annotations

import hashlib
import heapq
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    ValidationError,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

# Request size limits. They keep a request far below Temporal's payload limit (2 MiB)
# and rg's argv limits; the workflow helper checks them before scheduling and the
# activity checks them again for direct callers.
MAX_PATTERN_BYTES = 32 * 1024
MAX_INCLUDE_BYTES = 1024
MAX_PATH_BYTES = 4096
MAX_LOCATOR_BYTES = 4096
MAX_READ_SPILL_LINES = 2000
# A call's budget when the caller names none (a worker caps it at its own timeout_ms).
DEFAULT_TIMEOUT_MS = 30_000
# The most an error message may take (UTF-8): whatever it echoes of a request or of rg is cut
# to fit, so a hostile request never makes a megabyte-sized error.
MAX_MESSAGE_BYTES = 4096
# Unexpected argument names an INVALID_ARGUMENT message lists (and how much of each).
_NAMES_SHOWN = 8
_NAME_CHARS = 64


_CHECKING = "fs_search.checking"
_PROBLEM = "fs_search_argument"


class ArgumentProblem(ValueError):
    """A request that breaks the contract; ``str()`` is the INVALID_ARGUMENT message."""


@dataclass(frozen=True)
class _Check:
    """One contract check of a field, applied when a request is ``checked()``.

    ``test(name, value)`` returns the model-facing problem or None; ``schema`` is what the
    check adds to the field's JSON schema.
    """

    test: Callable[[str, Any], str | None]
    schema: dict[str, Any] | None = None

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        def check(value: Any, info: core_schema.ValidationInfo) -> Any:
            if isinstance(info.context, dict) and info.context.get(_CHECKING):
                problem = self.test(info.field_name or "value", value)
                if problem:
                    raise PydanticCustomError(_PROBLEM, "{problem}", {"problem": problem})
            return value

        return core_schema.with_info_after_validator_function(check, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        generated = handler(schema)
        return {**generated, **self.schema} if self.schema else generated


def _text(limit: int) -> _Check:
    """Valid Unicode, at most ``limit`` UTF-8 bytes, no NUL."""

    def test(name: str, value: str) -> str | None:
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError:
            return f"{name} is not valid Unicode text"
        if size > limit:
            return f"{name} is {size} bytes; the limit is {limit} bytes"
        if "\x00" in value:
            return f"{name} contains a NUL character"
        return None

    return _Check(test)


def capped(message: str, limit: int = MAX_MESSAGE_BYTES) -> str:
    """``message`` cut to at most ``limit`` UTF-8 bytes (on a character boundary), saying
    how much was left out."""
    raw = message.encode("utf-8", "replace")
    if len(raw) <= limit:
        return message
    keep = raw[: limit - 64].decode("utf-8", "ignore")
    return f"{keep}… ({len(raw) - len(keep.encode('utf-8', 'replace')):,} more bytes not shown)"


def _names(names: Collection[str]) -> str:
    """The first of ``names`` in sorted order, each cut short, and how many more there are
    (the first few picked in one pass: 200,000 names are not sorted to show eight)."""
    first = heapq.nsmallest(_NAMES_SHOWN, names)
    # A name may hold what UTF-8 cannot carry (a lone surrogate from a model's JSON): escaped.
    first = [n.encode("utf-8", "backslashreplace").decode("utf-8") for n in first]
    shown = [n if len(n) <= _NAME_CHARS else f"{n[:_NAME_CHARS]}…" for n in first]
    more = len(names) - len(shown)
    return ", ".join(shown) + (f" and {more:,} more" if more else "")


def _shown(value: int) -> str:
    """An integer as an error message quotes it: a huge one is not spelled out."""
    if abs(value) < 10**18:
        return str(value)
    return f"a number of about {int(value.bit_length() * 0.30103) + 1} digits"


def _at_least(bound: int) -> _Check:
    return _Check(
        lambda name, v: f"{name} must be >= {bound} (got {_shown(v)})" if v < bound else None,
        {"minimum": bound},
    )


def include_problem(include: str | None) -> str | None:
    """Why an ``include`` glob is refused, or None (a blank one counts as absent).

    ``include`` is one positive glob: brace alternation (``*.{ts,tsx}``) is fine, a
    comma-separated list or a negation is not.
    """
    if include is None or not include.strip():
        return None
    if include.startswith("!"):
        return f"include {include!r} must be a positive glob (no leading '!')"
    depth = 0
    escaped = False
    for char in include:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth = max(depth - 1, 0)
        elif char == "," and depth == 0:
            return (
                f"include {include!r} must be one glob, not a comma-separated list; "
                "use braces for alternatives, e.g. *.{ts,tsx}"
            )
    return None


_NOT_BLANK = _Check(lambda name, v: f"{name} must not be blank" if not v.strip() else None)
_POSITIVE = _Check(lambda name, v: f"{name} must be positive (got {_shown(v)})" if v <= 0 else None)

# A workspace's (or host's) id: its task queue's suffix and its directory's name.
ID_SYNTAX = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
_ID = re.compile(ID_SYNTAX)
_WORKSPACE_ID = _Check(
    lambda name, v: None if _ID.fullmatch(v) else f"{name} {v[:200]!r} is not a valid id"
)

Pattern = Annotated[str, _text(MAX_PATTERN_BYTES), _NOT_BLANK]
PathText = Annotated[str, _text(MAX_PATH_BYTES)]
IncludeGlob = Annotated[str, _text(MAX_INCLUDE_BYTES), _Check(lambda _, v: include_problem(v))]
Locator = Annotated[str, _text(MAX_LOCATOR_BYTES)]
TimeoutMs = Annotated[int, _POSITIVE]
WorkspaceId = Annotated[str, _WORKSPACE_ID]
# A limit over the maximum is not refused: the page is cut to the maximum.
PageLimit = Annotated[
    int,
    _at_least(1),
    AfterValidator(lambda limit: min(limit, MAX_READ_SPILL_LINES)),
    Field(json_schema_extra={"maximum": MAX_READ_SPILL_LINES}),
]

_KINDS = {str: "a string", int: "an integer", bool: "a boolean"}
_TYPE_ERRORS = {"string_type": str, "int_type": int, "bool_type": bool}


class ToolArguments(BaseModel):
    """A tool's arguments exactly as a model sends them; the tool's input schema."""

    # Strict: a model's JSON is taken as typed ("5" is not an integer, 5 not a string);
    # forbid: an argument the schema does not offer (cwd, spill) is refused.
    model_config = ConfigDict(extra="forbid", strict=True)
    tool: ClassVar[str]

    @classmethod
    def checked(cls, data: Mapping[str, Any]) -> Self:
        """``data`` validated with every contract check.

        Raises:
            ArgumentProblem: the first problem, in the words the model sees.
        """
        # Unknown names first, in one pass: pydantic would build an error object for each
        # (a second for 200,000 of them, enough for Temporal's deadlock detector in a
        # workflow task on a busy machine).
        unexpected = [str(name) for name in data if name not in cls.model_fields]
        if unexpected:
            raise ArgumentProblem(cls._unexpected(unexpected))
        try:
            return cls.model_validate(data, context={_CHECKING: True})
        except ValidationError as e:
            raise ArgumentProblem(cls._problem(e)) from None

    def check(self) -> None:
        """Refuse this request when it breaks the contract (every check of its model).

        Raises:
            ArgumentProblem: the first problem; ``errors.contract_errors()`` answers it
                INVALID_ARGUMENT.
        """
        type(self).checked(dict(self))

    def problem(self) -> str | None:
        """The first contract problem of this request, or None when it is acceptable."""
        try:
            type(self).checked(dict(self))
        except ArgumentProblem as e:
            return str(e)
        return None

    @classmethod
    def _unexpected(cls, names: list[str]) -> str:
        return (
            f"unexpected argument(s) for {cls.tool}: {_names(names)} "
            f"(allowed: {', '.join(cls.model_fields)})"
        )

    @classmethod
    def _problem(cls, error: ValidationError) -> str:
        errors = error.errors(include_url=False, include_input=False)
        unexpected = [str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden"]
        if unexpected:
            return cls._unexpected(unexpected)
        first = errors[0]
        name = str(first["loc"][0]) if first["loc"] else cls.tool
        if first["type"] == _PROBLEM:
            return str((first.get("ctx") or {}).get("problem", first["msg"]))
        field = cls.model_fields.get(name)
        if first["type"] == "missing" and field is not None:
            kind = _KINDS.get(field.annotation, "a value")  # type: ignore[arg-type]
            return f"{cls.tool} needs {kind} {name!r}"
        expected = _TYPE_ERRORS.get(first["type"])
        if expected is not None:
            return f"{name!r} must be {_KINDS[expected]}"
        return f"{name!r}: {first['msg']}"


class GlobArguments(ToolArguments):
    """The glob tool's arguments."""

    tool: ClassVar[str] = "glob"
    pattern: Pattern = Field(
        description="Glob pattern, e.g. '*.py', 'src/**/*.ts', '**/test_*.py'."
    )
    path: PathText | None = Field(
        None,
        description=(
            "Directory to search in, relative to the working directory or absolute. "
            "Omit to search the working directory."
        ),
    )


class GrepArguments(ToolArguments):
    """The grep tool's arguments."""

    tool: ClassVar[str] = "grep"
    pattern: Pattern = Field(
        description="Regular expression to search for, e.g. 'def \\w+', 'TODO'."
    )
    path: PathText | None = Field(
        None,
        description=(
            "File or directory to search, relative to the working directory or absolute. "
            "Omit to search the working directory."
        ),
    )
    include: IncludeGlob | None = Field(
        None,
        description=(
            "One glob limiting which files are searched, e.g. '*.py' or "
            "'*.{ts,tsx}' (no comma-separated lists, no '!')."
        ),
    )


class ReadSpillArguments(ToolArguments):
    """The read_spill tool's arguments."""

    tool: ClassVar[str] = "read_spill"
    locator: Locator = Field(description="The s3:// locator from a result.")
    offset: Annotated[int, _at_least(0)] = Field(0, description="First line, 0-based.")
    limit: PageLimit = Field(MAX_READ_SPILL_LINES, description="Number of lines.")


# The requests the activities take: the model's arguments plus the caller's settings
# (never the model's). Unknown fields are ignored, as in every model here.
# ``workspace_id``: the workspace the call is for; required on a host queue
# (``fs-search-host/<host-id>``), and on a workspace queue it must name that workspace.


class GlobRequest(GlobArguments):
    """One glob call: the model's ``pattern``/``path`` plus caller-side settings."""

    model_config = ConfigDict(extra="ignore")
    cwd: PathText | None = None
    spill: bool = True
    timeout_ms: TimeoutMs | None = None
    workspace_id: WorkspaceId | None = None


class GrepRequest(GrepArguments):
    """One grep call: the model's ``pattern``/``path``/``include`` plus caller-side settings."""

    model_config = ConfigDict(extra="ignore")
    cwd: PathText | None = None
    spill: bool = True
    timeout_ms: TimeoutMs | None = None
    workspace_id: WorkspaceId | None = None


class ReadSpillRequest(ReadSpillArguments):
    """A page of a spill artifact, in lines."""

    model_config = ConfigDict(extra="ignore")
    workspace_id: WorkspaceId | None = None


class ToolsRequest(BaseModel):
    """The catalogue call's optional argument: which workspace (on a host queue)."""

    model_config = ConfigDict(extra="ignore")
    workspace_id: WorkspaceId | None = None


TOOL_ARGUMENTS: dict[str, type[ToolArguments]] = {
    arguments.tool: arguments for arguments in (GlobArguments, GrepArguments, ReadSpillArguments)
}


# Activity type names and the task queue of a workspace: the public Temporal surface.
GLOB_ACTIVITY = "fs_search.glob"
GREP_ACTIVITY = "fs_search.grep"
TOOLS_ACTIVITY = "fs_search.tools"
READ_SPILL_ACTIVITY = "fs_search.read_spill"
TASK_QUEUE_PREFIX = "fs-search/"
# A host-routed worker's one queue (docs/workers.md): every request on it names its workspace.
HOST_QUEUE_PREFIX = "fs-search-host/"


# The failure a host queue answers a call with when its workspace already holds its share of
# the host's held calls: the call goes back to wait in Temporal, so one workspace's backlog
# never fills the host's slots ahead of another workspace's call. The server retries it after
# the pause the host asks (its next retry delay) for its first HAND_BACKS_ON_SERVER - 1
# hand-backs, within its queueing budget; after that the failure is non-retryable and
# FsSearchTools schedules the call again itself, at HANDED_BACK_PRIORITY (the whole rule and
# its bounds: _attempts.py).
WORKSPACE_BUSY = "FS_SEARCH_WORKSPACE_BUSY"


def fairness_key_for(workspace_id: str) -> str:
    """The Temporal fairness key of a workspace's calls on a host queue (at most 64 bytes):
    a server with task-queue fairness dispatches a host queue's tasks round-robin between
    workspaces, not in arrival order. An id over 64 bytes keeps its head and a digest."""
    if len(workspace_id) <= 64:
        return workspace_id
    digest = hashlib.sha256(workspace_id.encode()).hexdigest()[:16]
    return f"{workspace_id[:47]}~{digest}"


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


# Failures that a retry cannot fix, on every route (activities, standalone activities, the
# Nexus handler's): the contract's codes, and a result too large for Temporal (retrying
# would loop forever).
NON_RETRYABLE_ERROR_TYPES = [code.value for code in ErrorCode] + ["PayloadsTooLarge"]


def error_name(code: ErrorCode) -> str:
    """The ``name`` that accompanies a code in failure details and tool results."""
    return "ToolArgumentError" if code is ErrorCode.INVALID_ARGUMENT else "SearchError"


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class SpillRef(_Model):
    """Where the complete result of an over-cap call was saved, and how to read it."""

    locator: str
    hint: str


class WorkspaceRef(_Model):
    """Which workspace answered, on which host, in which directory
    (docs/workspace-identity.md).

    ``root`` is an opaque identity of the directory the call ran in: the same for the same
    directory, a new value for a directory re-created at the same path. A tool on the same
    host compares it with ``fs_search.worker.workspace_identity(path)`` before following a
    returned path. None only in a catalogue whose workspace directory cannot be read.
    """

    id: str
    host: str
    root: str | None = None


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
    # Where the call ran (None from a worker older than workspace identities).
    workspace: WorkspaceRef | None = None


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
    # Where the call ran (None from a worker older than workspace identities).
    workspace: WorkspaceRef | None = None


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
    # The same, with its host and directory (None from a worker older than identities).
    workspace: WorkspaceRef | None = None
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
        """A tool error shown to the model as ``Error: <message>`` (the message capped at
        :data:`MAX_MESSAGE_BYTES`)."""
        return cls(
            text=f"Error: {capped(message)}",
            is_error=True,
            error=ToolError(name=error_name(code), code=code),
        )


__all__ = [
    "DEFAULT_TIMEOUT_MS",
    "GLOB_ACTIVITY",
    "GREP_ACTIVITY",
    "HOST_QUEUE_PREFIX",
    "MAX_INCLUDE_BYTES",
    "MAX_LOCATOR_BYTES",
    "MAX_MESSAGE_BYTES",
    "MAX_PATH_BYTES",
    "MAX_PATTERN_BYTES",
    "MAX_READ_SPILL_LINES",
    "READ_SPILL_ACTIVITY",
    "TASK_QUEUE_PREFIX",
    "TOOLS_ACTIVITY",
    "NON_RETRYABLE_ERROR_TYPES",
    "WORKSPACE_BUSY",
    "AnyResult",
    "ArgumentProblem",
    "ErrorCode",
    "GlobArguments",
    "GlobRequest",
    "GlobResult",
    "GrepArguments",
    "GrepMatch",
    "GrepRequest",
    "GrepResult",
    "ReadSpillArguments",
    "ReadSpillRequest",
    "ReadSpillResult",
    "SpillRef",
    "ToolArguments",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "ToolsRequest",
    "ToolsResult",
    "WorkspaceRef",
    "capped",
    "fairness_key_for",
    "host_queue_for",
    "task_queue_for",
]
