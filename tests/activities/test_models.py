"""The shared contract models."""

from __future__ import annotations

from fs_search.activities.models import (
    MAX_PATTERN_BYTES,
    GlobRequest,
    GrepRequest,
    GrepResult,
    ReadSpillRequest,
    ToolResult,
    request_problem,
    task_queue_for,
)


def test_task_queue_name():
    """A workspace's queue is fs-search/<workspace-id>."""
    assert task_queue_for("host-ws-1") == "fs-search/host-ws-1"


def test_unknown_fields_are_ignored():
    """Neighbouring versions interoperate: unknown fields are ignored."""
    req = GlobRequest.model_validate({"pattern": "*", "future_field": 1})
    assert req.pattern == "*"


def test_size_limits():
    """Oversized or NUL-bearing fields are reported; normal requests pass."""
    assert request_problem(GrepRequest(pattern="x" * MAX_PATTERN_BYTES)) is None
    assert "pattern is" in request_problem(GrepRequest(pattern="x" * (MAX_PATTERN_BYTES + 1)))
    assert "path is" in request_problem(GlobRequest(pattern="*", path="p" * 5000))
    assert "include" in request_problem(GrepRequest(pattern="x", include="i" * 2000))
    assert "NUL" in request_problem(GrepRequest(pattern="a\x00b"))
    assert "locator" in request_problem(ReadSpillRequest(locator="l" * 5000))


def test_tool_result_round_trips_with_discriminated_result():
    """A ToolResult's result deserialises to the right model by its tool field."""
    result = GrepResult(matches=[], total=0, files=0, truncated=False, text="No matches found")
    tr = ToolResult(text=result.text, result=result)
    back = ToolResult.model_validate_json(tr.model_dump_json())
    assert isinstance(back.result, GrepResult)


def test_failure_text():
    """Errors read `Error: <message>` with name and code."""
    from fs_search.activities.models import ErrorCode

    tr = ToolResult.failure(ErrorCode.INVALID_ARGUMENT, "bad include")
    assert tr.text == "Error: bad include" and tr.is_error
    assert tr.error is not None and (tr.error.name, tr.error.code) == (
        "ToolArgumentError",
        "INVALID_ARGUMENT",
    )


def test_lone_surrogates_are_refused():
    """Text that is not valid Unicode is an argument problem, not a crash."""
    assert "not valid Unicode" in request_problem(GrepRequest(pattern="a\ud800"))
