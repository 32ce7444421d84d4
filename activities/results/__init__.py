"""rg's output made into results: parsed, paged, digested off the event loop, and the
model-facing text.

Light (pure code): workflow code reads :func:`one_line` and :func:`read_spill_text`. The
offload (helper processes) loads on first use. Private behind this front: ``_parse``,
``_glob_names``, ``_glob_tree``, ``_glob_sample`` (the recursively balanced page),
``_glob_members`` (every name indexed by directory, when the page needs it),
``_glob_artifact``, ``_digest`` (raw output → everything a result needs), ``_modified`` and
``_modified_order`` (a glob's listing in modification order), ``_text``
(pages, previews, footers), ``_paging`` (read_spill pages), ``_offload`` and ``_helper``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from fs_search.activities.results._digest import (
    GlobDigest,
    GrepDigest,
    digest_glob,
    digest_grep,
)
from fs_search.activities.results._paging import Pager, line_count
from fs_search.activities.results._parse import MalformedOutput, ends_with_summary
from fs_search.activities.results._text import (
    SpillNote,
    glob_text,
    grep_text,
    one_line,
    read_spill_text,
)

if TYPE_CHECKING:
    from fs_search.activities.results._modified_order import ModifiedOrder
    from fs_search.activities.results._offload import Offload, default_processes

_LAZY = {
    "ModifiedOrder": "fs_search.activities.results._modified_order",
    "Offload": "fs_search.activities.results._offload",
    "default_processes": "fs_search.activities.results._offload",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "GlobDigest",
    "GrepDigest",
    "MalformedOutput",
    "ModifiedOrder",
    "Offload",
    "Pager",
    "SpillNote",
    "default_processes",
    "digest_glob",
    "digest_grep",
    "ends_with_summary",
    "glob_text",
    "grep_text",
    "line_count",
    "one_line",
    "read_spill_text",
]
