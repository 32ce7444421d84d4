"""Pure: the one line the Temporal UI shows for each call (an activity's summary).

Both sides give it: the workflow side (``FsSearchTools``, one-off calls) and the Nexus
handler, which starts the same activity for a caller in another namespace, so a call reads
the same in the UI whichever route it took.
"""

from __future__ import annotations

from fs_search.activities import results
from fs_search.activities._contract import GlobRequest, GrepRequest, ReadSpillRequest

SUMMARY_MAX_BYTES = 200


def summary_of(req: GlobRequest | GrepRequest | ReadSpillRequest) -> str:
    """The activity summary of a request (see ``summary``); a request that names its
    workspace (on a host queue, where the queue does not) names it in the summary too."""
    if isinstance(req, ReadSpillRequest):
        where = f" @ {req.workspace_id}" if req.workspace_id else ""
        return _fit(results.one_line(f"read_spill {req.locator}") + where, keep=len(where))
    include = req.include if isinstance(req, GrepRequest) else None
    return summary(req.tool, req.pattern, req.path, include, workspace=req.workspace_id)


def summary(
    tool: str,
    pattern: str,
    path: str | None = None,
    include: str | None = None,
    *,
    workspace: str | None = None,
) -> str:
    """The activity summary shown in the Temporal UI, e.g. ``grep "TODO" in src (*.py)``,
    and ``… @ <workspace>`` when ``workspace`` is given (kept whole: ids are short).

    At most 200 bytes: a long pattern is shortened first, then the whole line.
    """
    where = f" @ {workspace}" if workspace else ""
    tail = ""
    if path:
        tail += f" in {results.one_line(path)}"
    if include:
        tail += f" ({results.one_line(include)})"
    tail += where
    shown = results.one_line(pattern)
    text = f'{tool} "{shown}"{tail}'
    if len(text.encode("utf-8", "replace")) <= SUMMARY_MAX_BYTES:
        return text
    room = SUMMARY_MAX_BYTES - len(f'{tool} "…"{tail}'.encode("utf-8", "replace"))
    if room >= 8:
        short = shown.encode("utf-8", "replace")[:room].decode("utf-8", "ignore")
        text = f'{tool} "{short}…"{tail}'
    return _fit(text, keep=len(where))


def _fit(text: str, *, keep: int = 0) -> str:
    """``text`` within SUMMARY_MAX_BYTES, cut before its last ``keep`` characters (ASCII)."""
    raw = text.encode("utf-8", "replace")
    if len(raw) <= SUMMARY_MAX_BYTES:
        return text
    end = text[len(text) - keep :] if keep else ""
    room = SUMMARY_MAX_BYTES - 3 - len(end.encode())
    return raw[: len(raw) - len(end.encode())][:room].decode("utf-8", "ignore") + "…" + end
