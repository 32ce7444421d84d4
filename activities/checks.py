"""Argument checks an activity makes before it touches the tree: sizes, fields, budget."""

from __future__ import annotations

from fs_search.activities.errors import invalid_argument
from fs_search.activities.models import (
    GlobRequest,
    GrepRequest,
    ReadSpillRequest,
    request_problem,
)


def check(problem: str | None) -> None:
    """Raise INVALID_ARGUMENT for a problem found by an argument check."""
    if problem:
        raise invalid_argument(problem)


def check_request(req: GlobRequest | GrepRequest | ReadSpillRequest) -> None:
    """Refuse a request the contract does not accept (every argument check of its model)."""
    check(request_problem(req))


def budget_s(timeout_ms: int | None, *, cap_ms: int) -> float:
    """A call's budget in seconds: the request's ``timeout_ms`` (checked positive by its
    model) up to the worker's cap."""
    return min(timeout_ms or cap_ms, cap_ms) / 1000
