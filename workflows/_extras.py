"""The error an adapter raises when the agent framework it needs is not installed."""

from __future__ import annotations

from fs_search.activities.config import DISTRIBUTION


def missing_extra(error: ModuleNotFoundError, *, adapter: str, extra: str) -> ModuleNotFoundError:
    """``error`` (an import of the framework failing) in words naming the pip command:
    raise it ``from error`` where the adapter imports its framework."""
    return ModuleNotFoundError(
        f'{adapter} needs the {extra} extra ({error}): pip install "{DISTRIBUTION}[{extra}]"',
        name=error.name,
    )
