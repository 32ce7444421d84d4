"""Pure: turn rg's raw output into everything a result needs, in one call.

One function per tool, free of I/O and of Temporal, so it can run in a helper process
(see :mod:`fs_search.activities.results._offload`) and its inputs and outputs pickle cheaply.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fs_search.activities.results import _glob_artifact as glob_artifact
from fs_search.activities.results import _glob_names as glob_names
from fs_search.activities.results import _parse as parse
from fs_search.activities.results import _text as render
from fs_search.activities.results._parse import FileLines
from fs_search.activities.workspace import SearchTarget


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

    @property
    def truncated(self) -> bool:
        """More matches were fetched than the page shows."""
        return self.total > len(self.page)


# What parsing part of an output yields: its files' matching lines and how many there are.
Part = tuple[dict[str, FileLines], int]


def grep_part(chunks: list[bytes]) -> Part:
    """Parse a later part of an ``rg --json`` output (cut at a line end) on its own: a
    helper's share of a large output, merged by :func:`grep` (``rest``)."""
    stream = parse.parse_chunks(chunks)
    return stream.files, stream.total


def grep(
    chunks: list[bytes],
    target: SearchTarget,
    *,
    cap: int,
    max_line_bytes: int,
    artifact: bool,
    every: bool,
    rest: Callable[[], Part] | None = None,
) -> GrepDigest:
    """Parse ``rg --json`` chunks; page, artifact and full list as asked.

    ``rest``, when given, returns the parsed remainder of the output (``chunks`` then
    being its head, cut at a line end): called once the head is parsed, while another
    process may still be parsing the remainder.

    Raises:
        parse.MalformedOutput: the output is not rg's JSON lines.
    """
    stream = parse.parse_chunks(chunks)
    if rest is not None:
        stream.merge(*rest())
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
    """A paged glob output.

    Attributes:
        total: paths rg listed.
        page: which of them are shown and how they were chosen.
        shown: the page's display paths, in page order.
        artifact: the complete mtime-ordered list as the spill artifact (only when asked
            and over cap): text, or that text's UTF-8 bytes.
        every: every display path in mtime order, only when asked (``spill: false``).
    """

    total: int
    page: render.GlobPage
    shown: list[str]
    artifact: str | bytearray | None = None
    every: list[str] | None = None

    @property
    def truncated(self) -> bool:
        """More paths were listed than the page shows."""
        return self.total > len(self.shown)


def glob(
    chunks: list[bytes],
    target: SearchTarget,
    *,
    cap: int,
    sample: bool,
    artifact: bool,
    every: bool,
) -> GlobDigest:
    """Page ``rg --files --null`` output; the artifact when asked and over cap.

    ``chunks`` is consumed (emptied): the output is not kept twice.

    The output stays one buffer: only the page's paths become ``str`` objects (and every
    path when ``every``), so memory is a small multiple of the output (under two when the
    artifact is built in the buffer itself, see ``glob_artifact.artifact``).
    """
    names = glob_names.blob(chunks)
    # The output is handed over: the caller's chunks go as soon as the blob holds them.
    chunks.clear()
    total, page, shown, paths = glob_names.listing(
        names, target, cap=cap, sample=sample, every=every
    )
    text = None
    if artifact and total > len(page.indices):
        owned = [names]
        del names  # artifact() drops the blob once decoded: two copies at most
        text = glob_artifact.artifact(owned, target)
    return GlobDigest(total=total, page=page, shown=shown, artifact=text, every=paths)
