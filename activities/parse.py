"""Pure: rg output -> paths (glob, ``--null``) and matching lines (grep, streamed ``--json``)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

# rg writes each message's "type" first for begin/match/end/context; the summary
# message is written with sorted keys, so it is recognised by substring.
_MATCH_PREFIX = b'{"type":"match"'
_SKIP_PREFIXES = (b'{"type":"begin"', b'{"type":"end"', b'{"type":"context"')
_SUMMARY_MARK = b'"type":"summary"'


class MalformedOutput(ValueError):
    """rg's output could not be understood."""


@dataclass(frozen=True, slots=True)
class Match:
    """One matching line as rg reported it (path relative to rg's working directory)."""

    path: str
    line_number: int
    line: str


def glob_paths(stdout: bytes) -> list[str]:
    """Split ``rg --files --null`` output; names that are not UTF-8 are decoded lossily."""
    return [name.decode("utf-8", "replace") for name in stdout.split(b"\0") if name]


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


def strip_eol(line: str) -> str:
    """The line without its trailing ``\\n`` or ``\\r\\n``."""
    if line.endswith("\n"):
        line = line[:-1]
        if line.endswith("\r"):
            line = line[:-1]
    return line


class GrepStream:
    """Incremental parser of ``rg --json``: feed stdout chunks as they arrive.

    Only ``match`` messages are decoded; ``begin``/``end``/``context`` are skipped by
    prefix without a JSON parse. ``complete`` becomes true when the closing ``summary``
    message was seen, i.e. rg finished its stream.
    """

    def __init__(self) -> None:
        self.matches: list[Match] = []
        self.complete = False
        self._tail = b""
        self._paths: dict[str, str] = {}

    def feed(self, chunk: bytes) -> None:
        """Consume a chunk of stdout."""
        data = self._tail + chunk if self._tail else chunk
        lines = data.split(b"\n")
        self._tail = lines.pop()
        for line in lines:
            self._line(line)

    def finish(self) -> list[Match]:
        """Consume what is left and return every match, in rg's order."""
        if self._tail:
            self._line(self._tail)
            self._tail = b""
        return self.matches

    def _line(self, line: bytes) -> None:
        if line.startswith(_MATCH_PREFIX):
            try:
                data = json.loads(line)["data"]
                path = decode_field(data["path"])
                self.matches.append(
                    Match(
                        path=self._paths.setdefault(path, path),
                        line_number=int(data["line_number"]),
                        line=strip_eol(decode_field(data["lines"])),
                    )
                )
            except (ValueError, KeyError, TypeError) as e:
                raise MalformedOutput(f"unreadable match message: {e}") from e
        elif line.startswith(_SKIP_PREFIXES) or not line.strip():
            return
        elif _SUMMARY_MARK in line:
            self.complete = True
        else:
            raise MalformedOutput(f"unexpected output line: {line[:80]!r}")


def parse_grep(stdout: bytes) -> GrepStream:
    """Parse a complete ``rg --json`` output at once."""
    stream = GrepStream()
    stream.feed(stdout)
    stream.finish()
    return stream


def sort_matches(matches: list[Match]) -> list[Match]:
    """Order by path (component by component) then line number."""
    return sorted(matches, key=lambda m: (m.path.split("/"), m.line_number))
