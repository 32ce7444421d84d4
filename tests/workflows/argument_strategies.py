"""Hypothesis strategies of the arguments a model may send a tool: any JSON value (as Python
values and as JSON text), numbers too long for Python to read, deep nesting, lone surrogates,
NaN and infinities, and text that is not JSON at all."""

from __future__ import annotations

import json
import sys
from typing import Any

from hypothesis import strategies as st

# Every field any tool or request has, so objects often hit the argument models' checks.
FIELDS = ["pattern", "path", "include", "locator", "offset", "limit", "cwd", "spill"]
# Past Python's int-string conversion limit (4300 digits by default).
HUGE_DIGITS = st.integers(sys.get_int_max_str_digits() + 1, 6000)

# Text with everything in it, lone surrogates included.
texts = st.text(st.characters(exclude_categories=()), max_size=20)
keys = st.sampled_from(FIELDS) | texts
huge_ints = st.builds(lambda digits, sign: sign * 10**digits, HUGE_DIGITS, st.sampled_from([1, -1]))
scalars = st.none() | st.booleans() | st.integers() | huge_ints | st.floats() | texts
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=12,
)
# Objects shaped like a tool's arguments: known and unknown fields, any values.
objects = st.dictionaries(keys, json_values, max_size=5)


def nested(depth: int) -> list[Any]:
    """A list nested ``depth`` levels deep, built without recursion."""
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


deep_values = st.integers(1, 5000).map(nested)
# Objects a model's JSON may decode to, and then some (nesting deeper than JSON decodes).
any_objects = objects | st.dictionaries(keys, deep_values, max_size=2)
# Any value a model's JSON may decode to, and then some.
arguments = any_objects | json_values | deep_values


def dump(value: Any) -> str:
    """``value`` as JSON text, huge integers included (Python refuses to print them)."""
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        return json.dumps(value)
    finally:
        sys.set_int_max_str_digits(limit)


def deep_text(depth: int, opener: str) -> str:
    """JSON text nested ``depth`` levels deep: arrays (``[[]]``) or objects (``{"a": {...}}``)."""
    if opener == "[":
        return "[" * depth + "]" * depth
    return '{"a": ' * depth + "1" + "}" * depth


deep_texts = st.builds(deep_text, st.integers(1, 100_000), st.sampled_from(["[", "{"]))
# JSON text as a model sends it: any value, a value under a field, deep nesting past any
# recursion limit, truncated JSON, and text that is not JSON at all.
json_texts = st.one_of(
    (objects | json_values).map(dump),
    st.builds(lambda key, inner: "{" + json.dumps(key) + ": " + inner + "}", keys, deep_texts),
    deep_texts,
    st.builds(lambda text, cut: text[:cut], (objects | json_values).map(dump), st.integers(0, 40)),
    texts,
    st.just(""),
)
