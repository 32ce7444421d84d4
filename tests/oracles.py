"""What only tests ask of production objects: plain ways to read a result or a state that the
worker itself never needs (it streams, pages and counts otherwise)."""

from __future__ import annotations

from collections.abc import Sequence

from fs_search.activities._contract import ReadSpillResult
from fs_search.activities.results._paging import Pager
from fs_search.activities.results._parse import FileLines, GrepStream, path_order
from fs_search.activities.results._text import grep_artifact_block, grep_artifact_of_blocks
from fs_search.activities.rg._running_slots import RunningSlots


def page_of(text: str, *, locator: str, offset: int, limit: int) -> ReadSpillResult:
    """Lines ``offset`` .. ``offset+limit`` of an artifact held whole, at most MAX_PAGE_BYTES
    of text (the worker pages a stream: the same Pager fed at once)."""
    pager = Pager(offset=offset, limit=limit)
    pager.feed(text.encode("utf-8", "surrogatepass"))
    return pager.result(locator)


def by_path(stream: GrepStream) -> list[tuple[str, FileLines]]:
    """Every file's matches of a parsed stream, files ordered by path (component-wise), lines
    by number."""
    ordered = sorted(stream.files.items(), key=lambda item: path_order(item[0]))
    return [(path, sorted(lines)) for path, lines in ordered]


def grep_artifact(files: Sequence[tuple[str, FileLines]]) -> str:
    """The spill artifact of a grep from every file's matches: every match with its full
    line, grouped by file (the worker builds it from blocks made where each file was parsed)."""
    return grep_artifact_of_blocks([(path, grep_artifact_block(lines)) for path, lines in files])


def running_for(slots: RunningSlots, key: str) -> int:
    """Searches ``key`` runs now (the slots' own count: the worker asks only ``busy``)."""
    return slots._running[key]
