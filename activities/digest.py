"""Pure: turn rg's raw output into everything a result needs, in one call.

One function per tool, free of I/O and of Temporal, so it can run in a helper process
(see :mod:`fs_search.activities.offload`) and its inputs and outputs pickle cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass

from fs_search.activities import parse, render
from fs_search.activities.parse import FileLines
from fs_search.activities.paths import SearchTarget


@dataclass(frozen=True)
class GrepDigest:
    """A parsed and rendered grep output.

    Attributes:
        total: matching lines fetched.
        files: distinct files among them.
        page: the first ``cap`` matches, previews cut to the byte cap.
        artifact: the complete result as the spill artifact (only when asked and over cap).
        every: every match (display path, lines), only when asked (``spill: false``).
    """

    total: int
    files: int
    page: list[render.Line]
    artifact: str | None = None
    every: list[tuple[str, FileLines]] | None = None


def grep(
    chunks: list[bytes],
    target: SearchTarget,
    *,
    cap: int,
    max_line_bytes: int,
    artifact: bool,
    every: bool,
) -> GrepDigest:
    """Parse ``rg --json`` chunks; page, artifact and full list as asked.

    Raises:
        parse.MalformedOutput: the output is not rg's JSON lines.
    """
    stream = parse.parse_chunks(chunks)
    files = [(target.display(path), lines) for path, lines in stream.by_path()]
    page = render.grep_page(files, cap=cap, max_line_bytes=max_line_bytes)
    over_cap = stream.total > len(page)
    return GrepDigest(
        total=stream.total,
        files=len(files),
        page=page,
        artifact=render.grep_artifact(files) if artifact and over_cap else None,
        every=files if every else None,
    )


@dataclass(frozen=True)
class GlobDigest:
    """A parsed and paged glob output: display paths (mtime order) and the page."""

    display: list[str]
    page: render.GlobPage
    artifact: str | None = None


def glob(
    chunks: list[bytes], target: SearchTarget, *, cap: int, sample: bool, artifact: bool
) -> GlobDigest:
    """Split ``rg --files --null`` output; page it; the artifact when asked and over cap."""
    rel = parse.glob_paths(b"".join(chunks))
    display = [target.display(r) for r in rel]
    page = render.glob_page(rel, cap=cap, sample=sample)
    over_cap = len(display) > len(page.indices)
    return GlobDigest(
        display=display,
        page=page,
        artifact=render.glob_artifact(display) if artifact and over_cap else None,
    )
