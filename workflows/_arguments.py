"""A model's tool-call arguments, decoded and checked: never an exception, whatever the text.

Every adapter hands ``FsSearchTools.call`` what its framework gives it: JSON text
(:func:`parse_arguments`) or a decoded value (:func:`object_arguments`); anything that is
not an object of string keys becomes the ``Error:`` result the model reads. Pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from fs_search.activities import ErrorCode, ToolResult

# How deep a model's tool-call arguments may nest (objects and arrays): no tool schema needs
# more, and deeper JSON makes decoders recurse (the OpenAI Agents SDK's own decoding fails the
# workflow task past ~450 levels). A framework guard replaces deeper arguments with
# NESTED_TOO_DEEPLY (not JSON, so no tool runs on it), which parse_arguments answers.
MAX_ARGUMENT_DEPTH = 100
NESTED_TOO_DEEPLY = (
    f"(arguments nested deeper than {MAX_ARGUMENT_DEPTH} levels, withheld by fs-search's guard)"
)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def nested_too_deeply(arguments: str, limit: int = MAX_ARGUMENT_DEPTH) -> bool:
    """Whether JSON text nests objects/arrays deeper than ``limit`` (strings skipped; linear,
    no recursion, whatever the text)."""
    if arguments.count("[") + arguments.count("{") <= limit:
        return False
    depth = 0
    for match in _BRACKET.finditer(_STRING.sub("", arguments)):
        if match.group() in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth = max(depth - 1, 0)
    return False


def parse_arguments(arguments: str | bytes | bytearray) -> dict[str, Any] | ToolResult:
    """A model's JSON arguments as a dict, or the ``Error:`` result it reads instead.

    Never raises, whatever the text: not JSON, a number too long for Python to read (over
    ``sys.get_int_max_str_digits()`` digits), nesting too deep to decode, or any JSON value
    but an object are INVALID_ARGUMENT results. Blank text is ``{}``.
    """
    try:
        if not arguments.strip():
            return {}
        if arguments == NESTED_TOO_DEEPLY:
            raise RecursionError(arguments)
        parsed = json.loads(arguments)
    except json.JSONDecodeError as e:
        return ToolResult.failure(ErrorCode.INVALID_ARGUMENT, f"the arguments are not JSON: {e}")
    except UnicodeDecodeError:
        return ToolResult.failure(ErrorCode.INVALID_ARGUMENT, "the arguments are not UTF-8 text")
    except ValueError:  # an integer past Python's int-string conversion limit
        return ToolResult.failure(
            ErrorCode.INVALID_ARGUMENT, "the arguments hold a number with too many digits"
        )
    except RecursionError:
        return ToolResult.failure(ErrorCode.INVALID_ARGUMENT, "the arguments are nested too deeply")
    except (TypeError, AttributeError):  # not text at all
        return ToolResult.failure(ErrorCode.INVALID_ARGUMENT, "the arguments are not JSON text")
    return object_arguments(parsed)


_JSON_KINDS = {
    list: "an array",
    tuple: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}


def object_arguments(arguments: object) -> dict[str, Any] | ToolResult:
    """``arguments`` as a tool call's fields: a JSON object (a mapping with string keys), or
    the ``Error:`` result the model reads instead."""
    if not isinstance(arguments, Mapping):
        kind = _JSON_KINDS.get(type(arguments), type(arguments).__name__)
        return ToolResult.failure(
            ErrorCode.INVALID_ARGUMENT, f"the arguments must be a JSON object, not {kind}"
        )
    if not all(isinstance(key, str) for key in arguments):
        return ToolResult.failure(ErrorCode.INVALID_ARGUMENT, "argument names must be strings")
    return dict(arguments)


__all__ = [
    "MAX_ARGUMENT_DEPTH",
    "NESTED_TOO_DEEPLY",
    "nested_too_deeply",
    "object_arguments",
    "parse_arguments",
]
