"""Pure: rg output -> paths (glob, ``--null``) and matching lines (grep, streamed ``--json``)."""

from __future__ import annotations

import base64
import re
from functools import partial
from itertools import groupby, islice
from operator import is_not

from pydantic_core import from_json

# rg writes each message's "type" first for begin/match/end/context; the summary
# message is written with sorted keys, so it is recognised by substring.
_MATCH_PREFIX = b'{"type":"match"'
_SKIP_PREFIXES = (b'{"type":"begin"', b'{"type":"end"', b'{"type":"context"')
_SUMMARY_MARK = b'"type":"summary"'
# Everything a match needs (path, lines, line_number) precedes this key; the rest
# (offsets, submatches) is cut off before parsing. The sequence cannot occur inside a
# JSON string (its quotes would be escaped), so its first occurrence is the key.
_AFTER_NEEDED = b',"absolute_offset":'
# A JSON string's contents as rg writes them, on one line.
_STRING = rb'[^"\\\n]*(?:\\.[^"\\\n]*)*'
# A match's line as rg writes it: its one line, so a \n escape only last (its end of line).
_LINE = rb'[^"\\\n]*(?:\\[^n\n][^"\\\n]*)*(?:\\n)?'
# One whole line of output, from its start to its newline: a match message with path and
# line as text (rg's key order: path, line and number captured raw, the rest of the line
# skipped), or any other message, recognised by its start (begin, end, context) or by its
# type (the summary, written with sorted keys), which captures nothing. The opening
# sequences cannot occur inside a string (their quotes would be escaped).
_MESSAGES = re.compile(
    rb'^(?:\{"type":"match","data":\{"path":\{"text":"(' + _STRING + rb')"\},'
    rb'"lines":\{"text":"(' + _LINE + rb')"\},"line_number":(\d+),'
    rb'|\{"type":"(?:begin|end|context)"|[^\n]*"type":"summary")[^\n]*\n',
    re.MULTILINE,
)
# Whether a capture took part: any other message than a match captures None.
_TOOK_PART = partial(is_not, None)


def _without_eol(text: str) -> str:
    """A matching line without its one \\n or \\r\\n."""
    if text[-1:] == "\n":
        return text[:-2] if text[-2:] == "\r\n" else text[:-1]
    return text


def _texts(lines: list[bytes]) -> list[str]:
    """Matching lines as ``_LINE`` captured them (raw JSON string contents), each without
    its one \\n or \\r\\n.

    Nearly always every line ends with its \\n and none has a \\u escape: they are then
    decoded as one string and split at its newlines (a line's only \\n is its last, so there
    are as many as lines exactly when each has one). Otherwise each line is decoded on its
    own.
    """
    raw = b"".join(lines)
    if b"\\u" not in raw:
        whole: str = from_json(b'"' + raw + b'"')
        if whole.count("\n") == len(lines):
            texts = whole.split("\n")
            texts.pop()  # after the last line's \n
            if "\r" in whole:
                texts = [text[:-1] if text[-1:] == "\r" else text for text in texts]
            return texts
    decoded: list[str] = from_json(b'["' + b'","'.join(lines) + b'"]')
    return [_without_eol(text) for text in decoded]


def path_order(path: str) -> list[str]:
    """The key that orders paths as results list them: component-wise."""
    return path.split("/")


class MalformedOutput(ValueError):
    """rg's output could not be understood."""


# A file's matching lines: (line number, line without its end-of-line), ascending.
FileLines = list[tuple[int, str]]


def decode_field(value: dict[str, str] | None) -> str:
    """rg's ``{"text": ...}`` or ``{"bytes": <base64>}`` as text (lossy U+FFFD for non-UTF-8)."""
    if not value:
        return ""
    text = value.get("text")
    if text is not None:
        return text
    raw = value.get("bytes")
    if raw is None:
        raise MalformedOutput("a path or line is neither text nor bytes")
    return base64.b64decode(raw).decode("utf-8", "replace")


class GrepStream:
    """Parser of ``rg --json`` fed stdout in pieces, in order, cut anywhere.

    Only ``match`` messages are decoded, and only up to the fields a match needs;
    ``begin``/``end``/``context``/``summary`` are skipped by prefix or mark without a
    parse. Matches are grouped by file in output order (rg reports a file's matches
    together, in line order). Whether rg finished is :func:`ends_with_summary`'s question.
    """

    def __init__(self) -> None:
        self.files: dict[str, FileLines] = {}
        self.total = 0
        # The unfinished last line, as the pieces it arrived in: joined once, when its
        # newline comes, so a line spread over many chunks costs its length, not n².
        self._tail: list[bytes] = []

    def feed(self, chunk: bytes) -> None:
        """Consume a chunk of stdout (linear in its size, however long the lines)."""
        if b"\n" not in chunk:
            if chunk:
                self._tail.append(chunk)
            return
        if self._tail:
            self._tail.append(chunk)
            data = b"".join(self._tail)
            self._tail = []
        else:
            data = chunk
        end = data.rfind(b"\n") + 1
        if end < len(data):
            self._tail.append(data[end:])
        try:
            self._lines(data, end)
        except MalformedOutput:
            raise
        except (ValueError, TypeError) as e:  # a string or number the bulk parse refused
            raise MalformedOutput(f"unreadable match message: {e}") from e

    def _lines(self, data: bytes, end: int) -> None:
        """The complete lines ``data[:end]``: in bulk when every line reads as a message
        whose path and line are text (nearly always), else one line at a time.

        Split by ``_MESSAGES``, whose finds each are one line to its newline, the lines
        leave nothing between and around the finds exactly when every line was read. The
        split gives each find's captures in turn, no object per find (a tuple each would
        only feed the cyclic collector).
        """
        parts = _MESSAGES.split(data if end == len(data) else data[:end])
        if not any(parts[::4]):
            numbers = list(filter(None, parts[3::4]))  # a match's is never empty
            if numbers:
                paths = list(filter(_TOOK_PART, parts[1::4]))
                lines = list(filter(_TOOK_PART, parts[2::4]))
                self._add(paths, lines, numbers)
            return
        for line in data[:end].split(b"\n"):
            self._line(line)

    def _add(self, paths: list[bytes], lines: list[bytes], numbers: list[bytes]) -> None:
        """Matches as ``_MESSAGES`` captured them, their strings decoded in a JSON parse or
        two (C code, no Python step per match beyond pairing)."""
        texts = _texts(lines)
        pairs = zip(from_json(b"[" + b",".join(numbers) + b"]"), texts, strict=True)
        files = self.files
        # rg writes each file's messages together: paths come in runs, one per file.
        for raw, run in groupby(paths):
            got = list(islice(pairs, len(list(run))))
            path = raw.decode() if b"\\" not in raw else from_json(b'"' + raw + b'"')
            held = files.get(path)
            if held is None:
                files[path] = got
            else:
                held.extend(got)
        self.total += len(texts)

    def _line(self, line: bytes) -> None:
        """One line of output, parsed on its own."""
        if not line.startswith(_MATCH_PREFIX):
            self._other(line)
            return
        try:
            cut = line.find(_AFTER_NEEDED)
            match = from_json(line[:cut] + b"}}" if cut > 0 else line)["data"]
            path = match["path"].get("text")
            if path is None:
                path = decode_field(match["path"])
            text = match["lines"].get("text")
            if text is None:
                text = decode_field(match["lines"])
            number = match["line_number"]
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise MalformedOutput(f"unreadable match message: {e}") from e
        if not isinstance(number, int):
            raise MalformedOutput(f"line_number is not an integer: {number!r}")
        text = _without_eol(text)
        found = self.files.get(path)
        if found is None:
            self.files[path] = [(number, text)]
        else:
            found.append((number, text))
        self.total += 1

    def _other(self, line: bytes) -> None:
        if not line or line.startswith(_SKIP_PREFIXES) or not line.strip():
            return
        if _SUMMARY_MARK in line:
            return
        raise MalformedOutput(f"unexpected output line: {line[:80]!r}")

    def finish(self) -> None:
        """Consume what is left of the stream."""
        if self._tail:
            self.feed(b"\n")


def ends_with_summary(chunks: list[bytes]) -> bool:
    """Whether ``rg --json`` output ends with its closing summary message (rg finished)."""
    parts: list[bytes] = []  # the last non-empty line's pieces, last first
    for chunk in reversed(chunks):
        if not parts:
            chunk = chunk.rstrip(b"\n")
            if not chunk:
                continue
        start = chunk.rfind(b"\n")
        parts.append(chunk[start + 1 :])
        if start >= 0:
            break
    return _SUMMARY_MARK in b"".join(reversed(parts))


def parse_chunks(chunks: list[bytes]) -> GrepStream:
    """Parse ``rg --json`` output held as chunks, releasing each chunk once consumed.

    The list is emptied: memory is given back as the parse goes.
    """
    stream = GrepStream()
    chunks.reverse()
    while chunks:
        stream.feed(chunks.pop())
    stream.finish()
    return stream
