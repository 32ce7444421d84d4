"""Pure: turn rg's raw output into everything a result needs, in one call.

One function per tool, free of I/O and of Temporal, so it can run in a helper process
(see :mod:`fs_search.activities.results._offload`) and its inputs and outputs pickle cheaply.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fs_search.activities.contract import GrepMatch
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

    def matches(self, *, every: bool) -> list[GrepMatch]:
        """The result's matches: the page's previews, or (``every``: ``spill: false``) every
        match with its full line."""
        if not every:
            return [
                GrepMatch(
                    path=line.path,
                    line_number=line.line_number,
                    line=line.text,
                    line_truncated=line.truncated,
                )
                for line in self.page
            ]
        # Trusted values straight from the parser: skip per-match validation.
        return [
            GrepMatch.model_construct(path=path, line_number=number, line=line)
            for path, lines in self.every or []
            for number, line in lines
        ]

    def payload_bytes(self, text: str) -> int:
        """About how large the result is with every match inline (``spill: false``) and
        ``text``: each match's path and line, and the JSON around them."""
        matches = (len(p) + len(t) for p, lines in self.every or [] for _, t in lines)
        return sum(size + _MATCH_JSON for size in matches) + len(text)


# A GrepMatch's JSON beyond its path and line: field names, line number, quotes, commas.
_MATCH_JSON = 64
# A glob path's JSON beyond its text: quotes and a comma, with room for escapes.
_PATH_JSON = 4

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

    def payload_bytes(self, text: str) -> int:
        """About how large the result is with every path inline (``spill: false``) and
        ``text``: each path and the JSON around it."""
        return sum(len(p) + _PATH_JSON for p in self.every or []) + len(text)


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
