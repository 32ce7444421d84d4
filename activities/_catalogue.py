"""Pure: the model-facing tool definitions and system prompt segments."""

from __future__ import annotations

from typing import Any

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from fs_search.activities._contract import (
    MAX_READ_SPILL_LINES,
    GlobArguments,
    GrepArguments,
    ReadSpillArguments,
    ToolArguments,
    ToolSpec,
)

# The seed's guidance texts, verbatim.
GLOB_PROMPT_SAMPLED = (
    "Use the glob tool \u2014 not shell find \u2014 to discover files by path pattern. A pattern "
    'with no "/" matches basenames at any depth, so "*" matches every file in the tree rather '
    "than its top level. Results are files only, never directories, and include hidden and "
    "ignored files: a result that fits comes back in modification-time order, while a larger "
    "one is sampled across top-level entries, so it spans the tree instead of one subtree."
)
GLOB_PROMPT_HEAD = (
    "Use the glob tool \u2014 not shell find \u2014 to discover files by path pattern. A pattern "
    'with no "/" matches basenames at any depth, so "*" matches every file in the tree rather '
    "than its top level. Results are files only, never directories, and include hidden and "
    "ignored files: a result that fits comes back in modification-time order, while a larger "
    "one keeps the modification-time-ordered head."
)
GREP_PROMPT = (
    "Use the grep tool \u2014 not shell grep or rg \u2014 to search file contents. Use read on a "
    "matched file when you need surrounding context."
)
READ_SPILL_PROMPT = (
    "When a glob or grep result says its complete output was saved to an s3:// locator, "
    "page through it with the read_spill tool."
)


class _ModelFacing(GenerateJsonSchema):
    """A tool's input schema as a model reads it: no titles or defaults, and an optional
    argument is simply left out rather than sent as null."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])


def input_schema(arguments: type[ToolArguments]) -> dict[str, Any]:
    """The JSON schema of a tool's arguments, generated from its model."""
    schema = arguments.model_json_schema(schema_generator=_ModelFacing)
    return {
        "type": "object",
        "properties": schema["properties"],
        "required": schema.get("required", []),
        "additionalProperties": False,
    }


def glob_tool(*, sample_over_cap: bool, cap: int) -> ToolSpec:
    """The glob tool; its description states how over-cap results are ordered."""
    if sample_over_cap:
        over = (
            f"When more than {cap} files match, the result is sampled across the entries "
            "directly under the search path and, inside each directory, across its entries "
            "(one file per entry per round) so it spans the tree, and says how many entries "
            "it reached."
        )
    else:
        over = (
            f"When more than {cap} files match, the result keeps the {cap} least recently "
            "modified files and says how many more there are."
        )
    return ToolSpec(
        name="glob",
        description=(
            "Find files by glob pattern (ripgrep glob syntax), matched relative to the search "
            "path. A pattern without '/' matches file names at any depth; '**' crosses "
            "directories; '{a,b}' alternates. Lists files only, including hidden and ignored "
            "ones, never VCS metadata; results are ordered by modification time, oldest "
            f"first. {over}"
        ),
        input_schema=input_schema(GlobArguments),
    )


def grep_tool(*, cap: int, line_bytes: int) -> ToolSpec:
    """The grep tool."""
    return ToolSpec(
        name="grep",
        description=(
            "Search file contents with a regular expression (Rust regex syntax, as ripgrep; "
            "no look-around or backreferences). Respects .gitignore/.ignore, includes hidden "
            "files, skips VCS metadata and binary files. Returns matching lines grouped by "
            f"file as 'Line N: <text>', ordered by path then line; at most {cap} lines are "
            f"shown and each is cut at {line_bytes} bytes."
        ),
        input_schema=input_schema(GrepArguments),
    )


def read_spill_tool() -> ToolSpec:
    """The read_spill tool, offered when spill artifacts live where ``read`` cannot go."""
    return ToolSpec(
        name="read_spill",
        description=(
            "Read a page of a saved complete glob or grep result by its s3:// locator, by "
            f"line: offset (0-based, default 0) and limit (default and maximum "
            f"{MAX_READ_SPILL_LINES})."
        ),
        input_schema=input_schema(ReadSpillArguments),
    )


def tools_and_prompts(
    *, sample_over_cap: bool, glob_cap: int, grep_cap: int, line_bytes: int, read_spill: bool
) -> tuple[list[ToolSpec], list[str]]:
    """Tool definitions and prompt segments (glob variant of the mode, then grep)."""
    tools = [
        glob_tool(sample_over_cap=sample_over_cap, cap=glob_cap),
        grep_tool(cap=grep_cap, line_bytes=line_bytes),
    ]
    prompts = [GLOB_PROMPT_SAMPLED if sample_over_cap else GLOB_PROMPT_HEAD, GREP_PROMPT]
    if read_spill:
        tools.append(read_spill_tool())
        prompts.append(READ_SPILL_PROMPT)
    return tools, prompts
