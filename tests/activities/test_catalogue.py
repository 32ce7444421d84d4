"""The catalogue: input schemas generated from the request models, as the model sees them."""

from __future__ import annotations

import pytest

from fs_search.activities._catalogue import input_schema, tools_and_prompts
from fs_search.activities._contract import (
    TOOL_ARGUMENTS,
    GlobArguments,
    GrepArguments,
    ReadSpillArguments,
)

_PATH_TAIL = "relative to the working directory or absolute. Omit to search the working directory."

# The schemas as they were written by hand before they were generated: the generated ones
# must say exactly this (model-facing fields and words only; no titles, defaults or nulls).
HAND_WRITTEN = {
    "glob": {
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "description": "Glob pattern, e.g. '*.py', 'src/**/*.ts', '**/test_*.py'.",
            },
            "path": {"type": "string", "description": f"Directory to search in, {_PATH_TAIL}"},
        },
        "required": ["pattern"],
        "additionalProperties": False,
    },
    "grep": {
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "description": "Regular expression to search for, e.g. 'def \\w+', 'TODO'.",
            },
            "path": {"type": "string", "description": f"File or directory to search, {_PATH_TAIL}"},
            "include": {
                "type": "string",
                "description": (
                    "One glob limiting which files are searched, e.g. '*.py' or "
                    "'*.{ts,tsx}' (no comma-separated lists, no '!')."
                ),
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    },
    "read_spill": {
        "type": "object",
        "properties": {
            "locator": {"type": "string", "description": "The s3:// locator from a result."},
            "offset": {"type": "integer", "minimum": 0, "description": "First line, 0-based."},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": 2000,
                "description": "Number of lines.",
            },
        },
        "required": ["locator"],
        "additionalProperties": False,
    },
}


@pytest.mark.parametrize("model", [GlobArguments, GrepArguments, ReadSpillArguments])
def test_generated_schema_is_the_model_facing_one(model):
    """Each tool's input schema, generated from its model, is the hand-written one."""
    assert input_schema(model) == HAND_WRITTEN[model.tool]


@pytest.mark.parametrize("read_spill", [True, False])
def test_catalogue_tools_carry_their_models_schemas(read_spill):
    """The catalogue's tools are the argument models, by name, with their schemas."""
    tools, prompts = tools_and_prompts(
        sample_over_cap=True, glob_cap=100, grep_cap=250, line_bytes=2000, read_spill=read_spill
    )
    assert len(tools) == len(prompts)
    for tool in tools:
        assert tool.input_schema == input_schema(TOOL_ARGUMENTS[tool.name])
    assert [t.name for t in tools] == ["glob", "grep"] + (["read_spill"] if read_spill else [])


def test_schema_fields_are_what_call_accepts():
    """What the schema offers is exactly what a model's call may send."""
    for name, model in TOOL_ARGUMENTS.items():
        schema = input_schema(model)
        assert list(schema["properties"]) == list(model.model_fields), name
        minimal = {field: "x" for field in schema["required"]}
        assert model.checked(minimal)
