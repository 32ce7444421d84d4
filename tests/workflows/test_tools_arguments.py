"""FsSearchTools refuses a request the contract refuses before anything is scheduled."""

from __future__ import annotations

import pytest

from fs_search.activities._contract import MAX_PATH_BYTES, ErrorCode
from fs_search.activities._summaries import summary_of
from fs_search.workflows import FsSearchTools


@pytest.mark.parametrize(
    ("tools", "tool", "args", "message"),
    [
        (FsSearchTools("ws"), "glob", ("  ",), "pattern must not be blank"),
        (FsSearchTools("ws"), "grep", ("x", None, "*.py,*.md"), "must be one glob"),
        (FsSearchTools("ws", timeout_ms=0), "glob", ("*",), "timeout_ms must be positive"),
        (FsSearchTools("ws", timeout_ms=1.5), "grep", ("x",), "'timeout_ms' must be an integer"),  # type: ignore[arg-type]
        (FsSearchTools("ws", cwd="c" * (MAX_PATH_BYTES + 1)), "glob", ("*",), "cwd is 4097 bytes"),
        (FsSearchTools("ws"), "read_spill", ("s3://b/k", -1), "offset must be >= 0 (got -1)"),
    ],
)
async def test_refused_before_scheduling(tools, tool, args, message):
    """Outside a workflow, where scheduling would raise: the refusal comes first."""
    result = await getattr(tools, tool)(*args)
    assert result.is_error and result.error.code == ErrorCode.INVALID_ARGUMENT
    assert message in result.text


def test_summaries_of_requests():
    """Each request's activity summary names the tool and its arguments."""
    from fs_search.activities._contract import GrepRequest, ReadSpillRequest

    assert summary_of(GrepRequest(pattern="TODO", path="src", include="*.py")) == (
        'grep "TODO" in src (*.py)'
    )
    assert summary_of(ReadSpillRequest(locator="s3://b/k")) == "read_spill s3://b/k"
