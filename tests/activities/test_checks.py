"""Argument checks before the tree is touched: sizes and NULs, the budget."""

from __future__ import annotations

import pytest

from fs_search.activities.checks import budget_s, check, check_request
from fs_search.activities.errors import SearchError
from fs_search.activities.models import ErrorCode, GlobRequest, GrepRequest, ReadSpillRequest


def invalid(call) -> str:
    with pytest.raises(SearchError) as info:
        call()
    assert info.value.code == ErrorCode.INVALID_ARGUMENT
    return info.value.message


@pytest.mark.parametrize(
    ("timeout_ms", "expected"), [(None, 30.0), (500, 0.5), (30_000, 30.0), (90_000, 30.0)]
)
def test_budget_is_the_request_up_to_the_worker_cap(timeout_ms, expected):
    """No timeout_ms means the cap; a smaller one wins; a larger one is capped."""
    assert budget_s(timeout_ms, cap_ms=30_000) == expected


@pytest.mark.parametrize("timeout_ms", [0, -1])
def test_a_non_positive_budget_is_an_argument_error(timeout_ms):
    """timeout_ms must be positive: the request's check refuses it before any budget."""
    req = GrepRequest(pattern="x", timeout_ms=timeout_ms)
    assert "timeout_ms must be positive" in invalid(lambda: check_request(req))


def test_check_raises_only_for_a_problem():
    """A problem string becomes INVALID_ARGUMENT with that message; None passes."""
    check(None)
    assert invalid(lambda: check("blank pattern")) == "blank pattern"


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
def test_oversized_or_nul_fields_are_refused(req):
    """Fields over their limits, or holding NUL, are INVALID_ARGUMENT before anything runs."""
    invalid(lambda: check_request(req))


def test_requests_within_limits_pass():
    """Ordinary requests pass the size checks."""
    check_request(GrepRequest(pattern="TODO", include="*.py", path="src", cwd="."))
    check_request(GlobRequest(pattern="**/*.py"))
    check_request(ReadSpillRequest(locator="s3://b/p/x.grep.txt"))
