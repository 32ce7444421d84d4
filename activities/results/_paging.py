"""Pure: read_spill paging. An artifact is fed in blocks; only the requested page is kept.

Lines end at ``\\n`` alone (render escapes every other break character), so the count a
save hint gives and read_spill's ``total_lines`` agree.
"""

from __future__ import annotations

from fs_search.activities._contract import ReadSpillResult
from fs_search.activities.results._text import LINE_TRUNCATED

# A page of read_spill never carries more than this much text, whatever the limit.
MAX_PAGE_BYTES = 256 * 1024
TRUNCATED = f" {LINE_TRUNCATED}"
_NL = 0x0A


def line_count(text: str | bytes | bytearray) -> int:
    """The lines of an artifact (text or its UTF-8 bytes) as read_spill counts them: split
    by ``\\n`` alone."""
    if isinstance(text, str):
        return text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    return text.count(b"\n") + (1 if text and not text.endswith(b"\n") else 0)


class Pager:
    """Lines ``offset`` .. ``offset+limit`` of an artifact fed as byte blocks, in order.

    Memory is the page (at most MAX_PAGE_BYTES plus one block), never the artifact: lines
    before the page are only counted, a line too long for the page keeps just the bytes
    that can be shown, and after the page the rest is only counted.
    """

    def __init__(self, *, offset: int, limit: int) -> None:
        if offset < 0 or limit < 1:
            # Callers check the request (ReadSpillRequest.checked / check_request) first.
            raise ValueError(f"a page needs offset >= 0 and limit >= 1 (got {offset}, {limit})")
        self.offset = offset
        self.limit = limit
        self.lines = 0  # newlines seen: the index of the line being read
        self.open_line = False  # bytes seen since the last newline
        self.kept: list[str] = []
        self.size = 0  # UTF-8 bytes of the kept lines, +1 each
        self.stop: int | None = None  # first line not on the page, once it is complete
        self._pieces: list[bytes] = []  # the current page line's bytes, up to the room left
        self._held = 0
        self._length = 0  # the current line's full length in bytes

    def feed(self, block: bytes) -> None:
        """The artifact's next bytes."""
        if not block:
            return
        newlines = block.count(b"\n")
        if self.stop is not None or self.lines + newlines < self.offset:
            self.lines += newlines  # nothing here is on the page: count only
            self.open_line = block[-1] != _NL
            return
        pos, end = 0, len(block)
        while pos < end:
            if self.stop is not None:
                self.lines += block.count(b"\n", pos)
                self.open_line = block[-1] != _NL
                return
            nl = block.find(b"\n", pos)
            if self.lines >= self.offset:
                self._hold(block, pos, end if nl < 0 else nl)
            if nl < 0:
                self.open_line = True
                return
            if self.lines >= self.offset:
                self._end_line()
            self.lines += 1
            self.open_line = False
            pos = nl + 1

    def result(self, locator: str) -> ReadSpillResult:
        """The page, once every block has been fed."""
        if self.open_line and self.stop is None and self.lines >= self.offset:
            self._end_line()  # the last line has no newline
        total = self.lines + (1 if self.open_line else 0)
        stop = total if self.stop is None else self.stop
        return ReadSpillResult(
            locator=locator,
            text="\n".join(self.kept),
            offset=self.offset,
            next_offset=stop if stop < total else None,
            total_lines=total,
        )

    def _hold(self, block: bytes, start: int, stop: int) -> None:
        self._length += stop - start
        room = MAX_PAGE_BYTES - self.size - self._held
        if room > 0 and stop > start:
            piece = block[start : min(stop, start + room)]
            self._pieces.append(piece)
            self._held += len(piece)

    def _end_line(self) -> None:
        raw, length = b"".join(self._pieces), self._length
        self._pieces, self._held, self._length = [], 0, 0
        room = MAX_PAGE_BYTES - self.size
        line = raw.decode("utf-8", "replace")
        # Decoding never shrinks: a line longer than the room stays too long.
        encoded = len(line.encode("utf-8", "surrogatepass")) + 1 if len(raw) == length else None
        if encoded is not None and encoded <= room:
            self.kept.append(line)
            self.size += encoded
            if len(self.kept) >= self.limit:
                self.stop = self.lines + 1
            return
        if self.kept:
            self.stop = self.lines  # it starts the next page
            return
        cut = line.encode("utf-8", "surrogatepass")[: max(room - 20, 0)]
        self.kept.append(cut.decode("utf-8", "ignore") + TRUNCATED)
        self.stop = self.lines + 1
