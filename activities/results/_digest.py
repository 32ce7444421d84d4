"""Pure: turn rg's raw output into everything a result needs, in one call.

One function per tool, free of I/O and of Temporal, so it can run in a helper process
(see :mod:`fs_search.activities.results._offload`) and its inputs and outputs pickle cheaply.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fs_search.activities._contract import GrepMatch
from fs_search.activities._workspace import SearchTarget
from fs_search.activities.results import _glob_artifact as glob_artifact
from fs_search.activities.results import _glob_names as glob_names
from fs_search.activities.results import _parse as parse
from fs_search.activities.results import _text as render
from fs_search.activities.results._parse import FileLines


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


@dataclass(frozen=True)
class GrepPart:
    """What parsing an output, or a part of one, yields: small enough to pickle cheaply
    when a helper parsed it (a page's worth of lines, and the artifact as text).

    Attributes:
        total: its matching lines.
        counts: each file's number of matching lines, files in path order (every file).
        lines: each file's lines, ascending: every file's when ``every`` was asked, else
            only those a page may show (the part's first ``cap`` in path order: no match
            after them can be among the first ``cap`` of the whole output either).
        blocks: each file's artifact block (:func:`render.grep_artifact_block`), when asked.
    """

    total: int
    counts: dict[str, int]
    lines: dict[str, FileLines]
    blocks: dict[str, str] | None


def _part(
    files: dict[str, FileLines], total: int, *, cap: int, every: bool, blocks: bool
) -> GrepPart:
    """``files`` (as parsed) in path order, kept and rendered as asked (see :class:`GrepPart`)."""
    counts: dict[str, int] = {}
    kept: dict[str, FileLines] = {}
    rendered: dict[str, str] | None = {} if blocks else None
    room = cap
    for path in sorted(files, key=parse.path_order):
        lines = files[path]
        lines.sort()  # already in order from rg: a linear pass
        counts[path] = len(lines)
        if every:
            kept[path] = lines
        elif room > 0:
            kept[path] = lines if len(lines) <= room else lines[:room]
            room -= len(kept[path])
        if rendered is not None:
            rendered[path] = render.grep_artifact_block(lines)
    return GrepPart(total, counts, kept, rendered)


def _merge(head: GrepPart, tail: GrepPart) -> GrepPart:
    """The parts of an output cut in two at a line end, as one.

    rg writes a file's matches together, in line order: at most the file at the cut has
    matches in both parts, the head's first."""
    counts = dict(head.counts)
    for path, count in tail.counts.items():
        counts[path] = counts.get(path, 0) + count
    order = sorted(counts, key=parse.path_order)
    lines = {**head.lines}
    for path, got in tail.lines.items():
        lines[path] = lines[path] + got if path in lines else got
    blocks = None
    if head.blocks is not None and tail.blocks is not None:
        blocks = {**head.blocks}
        for path, block in tail.blocks.items():
            blocks[path] = f"{blocks[path]}\n{block}" if path in blocks else block
    return GrepPart(
        total=head.total + tail.total,
        counts={path: counts[path] for path in order},
        lines={path: lines[path] for path in order if path in lines},
        blocks=blocks,
    )


def grep_part(
    chunks: list[bytes],
    target: SearchTarget,
    *,
    cap: int,
    max_line_bytes: int,
    artifact: bool,
    every: bool,
) -> GrepPart:
    """Parse a later part of an ``rg --json`` output (cut at a line end) on its own, and
    render its artifact blocks when an artifact is asked: a helper's share of a large
    output, merged by :func:`digest_grep` (``rest``). Takes :func:`digest_grep`'s arguments."""
    del target, max_line_bytes  # the head applies them to the whole
    stream = parse.parse_chunks(chunks)
    return _part(stream.files, stream.total, cap=cap, every=every, blocks=artifact)


def digest_grep(
    chunks: list[bytes],
    target: SearchTarget,
    *,
    cap: int,
    max_line_bytes: int,
    artifact: bool,
    every: bool,
    rest: Callable[[], GrepPart] | None = None,
) -> GrepDigest:
    """Parse ``rg --json`` chunks; page, artifact and full list as asked.

    ``rest``, when given, returns the parsed remainder of the output (``chunks`` then
    being its head, cut at a line end): called once the head is parsed and rendered, while
    another process may still be parsing and rendering the remainder.

    Raises:
        parse.MalformedOutput: the output is not rg's JSON lines.
    """
    stream = parse.parse_chunks(chunks)
    # The artifact's blocks: only when over the cap; a head renders its own at once (the
    # whole output's total is not known yet, and a split output is large).
    blocks = artifact and (rest is not None or stream.total > cap)
    part = _part(stream.files, stream.total, cap=cap, every=every, blocks=blocks)
    if rest is not None:
        part = _merge(part, rest())
    display = {path: target.display(path) for path in part.counts}
    files = [(display[path], lines) for path, lines in part.lines.items()]
    page = render.grep_page(files, cap=cap, max_line_bytes=max_line_bytes)
    text = None
    if artifact and part.total > len(page) and part.blocks is not None:
        text = render.grep_artifact_of_blocks(
            [(display[path], part.blocks[path]) for path in part.counts]
        )
    return GrepDigest(
        total=part.total,
        files=len(part.counts),
        page=page,
        artifact=text,
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


def digest_glob(
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
