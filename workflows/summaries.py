"""Activity summaries: the one line the Temporal UI shows for each call."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from fs_search.activities import results
    from fs_search.activities.contract import GlobRequest, GrepRequest, ReadSpillRequest

SUMMARY_MAX_BYTES = 200


def summary_of(req: GlobRequest | GrepRequest | ReadSpillRequest) -> str:
    """The activity summary of a request (see ``summary``)."""
    if isinstance(req, ReadSpillRequest):
        return _fit(results.one_line(f"read_spill {req.locator}"))
    include = req.include if isinstance(req, GrepRequest) else None
    return summary(req.tool, req.pattern, req.path, include)


def summary(tool: str, pattern: str, path: str | None = None, include: str | None = None) -> str:
    """The activity summary shown in the Temporal UI, e.g. ``grep "TODO" in src (*.py)``.

    At most 200 bytes: a long pattern is shortened first, then the whole line.
    """
    tail = ""
    if path:
        tail += f" in {results.one_line(path)}"
    if include:
        tail += f" ({results.one_line(include)})"
    shown = results.one_line(pattern)
    text = f'{tool} "{shown}"{tail}'
    if len(text.encode("utf-8", "replace")) <= SUMMARY_MAX_BYTES:
        return text
    room = SUMMARY_MAX_BYTES - len(f'{tool} "…"{tail}'.encode("utf-8", "replace"))
    if room >= 8:
        short = shown.encode("utf-8", "replace")[:room].decode("utf-8", "ignore")
        text = f'{tool} "{short}…"{tail}'
    return _fit(text)


def _fit(text: str) -> str:
    raw = text.encode("utf-8", "replace")
    if len(raw) <= SUMMARY_MAX_BYTES:
        return text
    return raw[: SUMMARY_MAX_BYTES - 3].decode("utf-8", "ignore") + "…"
