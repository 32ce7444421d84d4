"""The contract: its models, their checks, and what crosses Temporal."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.exceptions import ApplicationError

from fs_search.activities._contract import (
    MAX_PATTERN_BYTES,
    MAX_READ_SPILL_LINES,
    TOOL_ARGUMENTS,
    ArgumentProblem,
    ErrorCode,
    GlobRequest,
    GrepArguments,
    GrepRequest,
    GrepResult,
    ReadSpillArguments,
    ReadSpillRequest,
    ToolResult,
    task_queue_for,
)
from fs_search.activities._errors import contract_errors


def test_task_queue_name():
    """A workspace's queue is fs-search/<workspace-id>."""
    assert task_queue_for("host-ws-1") == "fs-search/host-ws-1"


def test_unknown_fields_are_ignored():
    """Neighbouring versions interoperate: unknown fields are ignored."""
    req = GlobRequest.model_validate({"pattern": "*", "future_field": 1})
    assert req.pattern == "*"


def test_size_limits():
    """Oversized or NUL-bearing fields are reported; normal requests pass."""
    assert GrepRequest(pattern="x" * MAX_PATTERN_BYTES).problem() is None
    assert "pattern is" in GrepRequest(pattern="x" * (MAX_PATTERN_BYTES + 1)).problem()
    assert "path is" in GlobRequest(pattern="*", path="p" * 5000).problem()
    assert "include" in GrepRequest(pattern="x", include="i" * 2000).problem()
    assert "NUL" in GrepRequest(pattern="a\x00b").problem()
    assert "locator" in ReadSpillRequest(locator="l" * 5000).problem()


def test_tool_result_round_trips_with_discriminated_result():
    """A ToolResult's result deserialises to the right model by its tool field."""
    result = GrepResult(matches=[], total=0, files=0, truncated=False, text="No matches found")
    tr = ToolResult(text=result.text, result=result)
    back = ToolResult.model_validate_json(tr.model_dump_json())
    assert isinstance(back.result, GrepResult)


def test_failure_text():
    """Errors read `Error: <message>` with name and code."""
    from fs_search.activities._contract import ErrorCode

    tr = ToolResult.failure(ErrorCode.INVALID_ARGUMENT, "bad include")
    assert tr.text == "Error: bad include" and tr.is_error
    assert tr.error is not None and (tr.error.name, tr.error.code) == (
        "ToolArgumentError",
        "INVALID_ARGUMENT",
    )


def test_lone_surrogates_are_refused():
    """Text that is not valid Unicode is an argument problem, not a crash."""
    assert "not valid Unicode" in GrepRequest(pattern="a\ud800").problem()


@pytest.mark.parametrize("pattern", ["", "   ", "\t\n"])
def test_blank_patterns_are_refused(pattern):
    """Blank patterns are argument problems, for glob and grep alike."""
    assert GlobRequest(pattern=pattern).problem() == "pattern must not be blank"
    assert GrepRequest(pattern=pattern).problem() == "pattern must not be blank"


@pytest.mark.parametrize(
    ("include", "ok"),
    [
        (None, True),
        ("", True),
        ("  ", True),
        ("*.py", True),
        ("*.{ts,tsx}", True),
        ("src/**/*.{a,b,c}", True),
        (r"a\,b", True),
        ("*.py,*.md", False),
        ("!*.py", False),
        ("{a,b},c", False),
    ],
)
def test_include_validation(include, ok):
    """include is one positive glob: braces may hold commas, lists and negations are refused."""
    problem = GrepRequest(pattern="x", include=include).problem()
    assert (problem is None) is ok
    if not ok:
        assert problem.startswith(f"include {include!r} must be")


def test_budget_and_page_checks():
    """timeout_ms must be positive; offset >= 0, limit >= 1, and a limit over the max is cut."""
    assert GlobRequest(pattern="*", timeout_ms=0).problem() == "timeout_ms must be positive (got 0)"
    assert GrepRequest(pattern="x", timeout_ms=1).problem() is None
    assert ReadSpillRequest(locator="l", offset=-1).problem() == "offset must be >= 0 (got -1)"
    assert ReadSpillRequest(locator="l", limit=0).problem() == "limit must be >= 1 (got 0)"
    assert ReadSpillRequest(locator="l", limit=MAX_READ_SPILL_LINES + 1).limit == (
        MAX_READ_SPILL_LINES
    )


def test_refused_requests_still_build_and_decode():
    """A request that breaks the contract still builds and decodes, so the activity can answer
    it INVALID_ARGUMENT (a decoding failure would be a generic, retryable error)."""
    assert GrepRequest(pattern="", include="!x", timeout_ms=-1).pattern == ""
    decoded = GlobRequest.model_validate_json('{"pattern": "x\\u0000", "cwd": "c"}')
    assert decoded.problem() == "pattern contains a NUL character"


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("grep", {"pattern": "x", "cwd": "/etc"}, "unexpected argument(s) for grep: cwd "),
        ("glob", {"pattern": "*", "spill": False, "z": 1}, "for glob: spill, z (allowed: pattern"),
        ("grep", {"pattern": 5}, "'pattern' must be a string"),
        ("glob", {}, "glob needs a string 'pattern'"),
        ("read_spill", {}, "read_spill needs a string 'locator'"),
        ("grep", {"pattern": "x", "path": ["a"]}, "'path' must be a string"),
        ("read_spill", {"locator": "l", "offset": True}, "'offset' must be an integer"),
        ("read_spill", {"locator": "l", "limit": "5"}, "'limit' must be an integer"),
        ("read_spill", {"locator": "l", "limit": 1.0}, "'limit' must be an integer"),
        ("grep", {"pattern": "x", "include": "a,b"}, "include 'a,b' must be one glob"),
        ("glob", {"pattern": "x" * (MAX_PATTERN_BYTES + 1)}, "the limit is 32768 bytes"),
        # A name UTF-8 cannot carry (a lone surrogate from a model's JSON) is shown escaped.
        ("glob", {"\ud800": [], "pattern": "*"}, "for glob: \\ud800 (allowed: pattern"),
        # Unknown names come before other problems, the first in sorted order shown.
        ("grep", {"pattern": 5, "zz": 1, "aa": 2}, "for grep: aa, zz (allowed: pattern"),
    ],
)
def test_model_arguments_are_checked_by_the_tool_model(tool, arguments, message):
    """A model's arguments: only the schema's fields, typed as the schema says, within limits."""
    with pytest.raises(ArgumentProblem) as refused:
        TOOL_ARGUMENTS[tool].checked(arguments)
    assert message in str(refused.value)
    str(refused.value).encode("utf-8")  # what reaches the model goes through Temporal as UTF-8


def test_two_hundred_thousand_unknown_names_are_counted_not_listed():
    """The first eight in sorted order, and how many more (found in one pass)."""
    arguments = {"pattern": "x", **{f"k{i:06d}": i for i in range(200_000)}}
    with pytest.raises(ArgumentProblem) as refused:
        TOOL_ARGUMENTS["grep"].checked(arguments)
    assert str(refused.value) == (
        "unexpected argument(s) for grep: k000000, k000001, k000002, k000003, k000004, "
        "k000005, k000006, k000007 and 199,992 more (allowed: pattern, path, include)"
    )


def test_model_arguments_that_pass():
    """Accepted arguments come back as the tool's model, optional fields left out."""
    assert TOOL_ARGUMENTS["grep"].checked({"pattern": "x", "path": None}) == GrepArguments(
        pattern="x"
    )
    page = TOOL_ARGUMENTS["read_spill"].checked({"locator": "s3://b/k", "limit": 10**6})
    assert isinstance(page, ReadSpillArguments) and page.limit == MAX_READ_SPILL_LINES


def test_a_huge_number_is_refused_without_being_spelled_out():
    """A 5,000-digit negative offset is INVALID_ARGUMENT naming its size, not its digits."""
    with pytest.raises(ArgumentProblem) as info:
        ReadSpillArguments.checked({"locator": "x", "offset": -(10**5000)})
    assert "about 5001 digits" in str(info.value) and "Exceeds the limit" not in str(info.value)


# --- a request's check() and errors.contract_errors(): INVALID_ARGUMENT in one step -----


async def invalid(call) -> str:
    """The INVALID_ARGUMENT message ``call`` raises through ``errors.contract_errors()``."""
    with pytest.raises(ApplicationError) as info:
        async with contract_errors():
            call()
    assert info.value.type == ErrorCode.INVALID_ARGUMENT and info.value.non_retryable
    return info.value.message


@pytest.mark.parametrize("timeout_ms", [0, -1])
async def test_a_non_positive_budget_is_an_argument_error(timeout_ms):
    """timeout_ms must be positive: the request's check refuses it before any budget."""
    req = GrepRequest(pattern="x", timeout_ms=timeout_ms)
    assert "timeout_ms must be positive" in await invalid(req.check)


async def test_an_argument_problem_is_invalid_argument_with_its_message():
    """An ArgumentProblem becomes INVALID_ARGUMENT with that message; no problem passes."""

    def refuse() -> None:
        raise ArgumentProblem("blank pattern")

    assert await invalid(refuse) == "blank pattern"
    async with contract_errors():
        assert await asyncio.sleep(0, "fine") == "fine"


@pytest.mark.parametrize(
    "req",
    [
        GrepRequest.model_construct(pattern="x" * (33 * 1024)),
        GrepRequest.model_construct(pattern="x", include="*" * 2048),
        GlobRequest.model_construct(pattern="*", path="a\x00b"),
        GlobRequest.model_construct(pattern="*", cwd="d" * 5000),
        ReadSpillRequest.model_construct(locator="l" * 5000, offset=0, limit=10),
    ],
)
async def test_oversized_or_nul_fields_are_refused(req):
    """Fields over their limits, or holding NUL, are INVALID_ARGUMENT before anything runs."""
    await invalid(req.check)


def test_requests_within_limits_pass():
    """Ordinary requests pass the size checks."""
    GrepRequest(pattern="TODO", include="*.py", path="src", cwd=".").check()
    GlobRequest(pattern="**/*.py").check()
    ReadSpillRequest(locator="s3://b/p/x.grep.txt").check()
