"""Pure: a glob's spill artifact, every display path one line each, in list order, built
from the names buffer in bulk.

Names that are their own artifact lines behind a fixed display head (no head, or the
``path`` prefix), valid UTF-8 with nothing to escape, as nearly always, become the
artifact in the buffer itself: no second copy of the output is ever made. Anything else is
decoded and escaped as text.
"""

from __future__ import annotations

import re

from fs_search.activities._workspace import SearchTarget
from fs_search.activities.results import _glob_names as glob_names
from fs_search.activities.results import _text as render

# A name starting "./" (after the first): a regex finds a two-byte pattern starting with
# NUL several times faster than ``in``, as NUL ends every name.
_DOT_SLASH_NAME = re.compile(rb"\0\./")
# Names rewritten at a time when a prefix is added to each in place (the window's copy
# and its rewrite are alive at once).
_REWRITE = 1 << 16


def artifact(owned: list[bytearray], target: SearchTarget) -> str | bytearray:
    """The glob spill artifact, every display path (one line each) in list order, built
    from the names buffer in bulk; ``owned`` holds the only reference to it.

    Names that are their own artifact lines behind a fixed display head (no head, or the
    ``path`` prefix), valid UTF-8 with nothing to escape, as nearly always, become the
    artifact in place: the buffer itself, grown by one head per name and rewritten from
    its end a window at a time (:func:`_in_place`). Otherwise the buffer is dropped once
    decoded and each step replaces the previous copy, so at most two exist at once.
    """
    names = owned.pop()
    head = _plain_head(names, target)
    if head is not None:
        return _in_place(names, head)
    text = glob_names.display_text(names.decode("utf-8", "replace"), target)
    del names
    text = render.one_line(text)
    return text.replace("\0", "\n")


# ASCII characters that some reader renders as a line break (render.one_line escapes them),
# and the UTF-8 of the others (U+0085, U+2028, U+2029).
_ASCII_BREAKS = (b"\n", b"\r", b"\v", b"\f", b"\x1c", b"\x1d", b"\x1e")
_UTF8_BREAKS = (b"\xc2\x85", b"\xe2\x80\xa8", b"\xe2\x80\xa9")


def _plain_head(names: bytearray, target: SearchTarget) -> bytes | None:
    """The display head (the escaped ``path`` prefix as UTF-8, or b"") when each name's
    artifact line is that head and the name itself: shown behind a fixed head, never as
    ``./x``, valid UTF-8, nothing to escape. None otherwise.

    One scan of the buffer per break character and one for ASCII (no copy); only names
    that are not all ASCII are decoded, a window at a time.
    """
    head, mark, rest = target.display("\0").partition("\0")
    if not mark or rest or names.startswith(b"./") or _DOT_SLASH_NAME.search(names):
        return None
    if any(c in names for c in _ASCII_BREAKS):
        return None
    if not names.isascii():
        if any(sequence in names for sequence in _UTF8_BREAKS):
            return None
        for start, end in glob_names.windows(names):
            try:
                names[start:end].decode("utf-8")
            except UnicodeDecodeError:
                return None
    return render.one_line(head).encode("utf-8", "replace")


def _in_place(names: bytearray, head: bytes) -> bytearray:
    """Each NUL-terminated name made ``head + name + "\\n"`` in the buffer itself.

    The buffer grows by one head per name (large buffers are mapped, so growing moves no
    bytes), then is rewritten from its end a window of names at a time: a window's output
    ends where the names before it plus their heads end, so it never overwrites a name not
    yet read.
    """
    if not head:
        for start, end in glob_names.windows(names):
            names[start:end] = names[start:end].replace(b"\0", b"\n")
        return names
    stop = len(names)
    grow = names.count(b"\0") * len(head)
    zeros = bytes(min(grow, _REWRITE))
    while len(names) < stop + grow:
        names += zeros[: stop + grow - len(names)]
    end = len(names)
    while stop > 0:
        start = names.rfind(b"\0", 0, stop - _REWRITE) + 1 if stop > _REWRITE else 0
        # The window's names, each ending "\n" + head: that head belongs to the next name.
        out = names[start:stop].replace(b"\0", b"\n" + head)
        at = end - len(out)
        names[at : at + len(head)] = head
        names[at + len(head) : end] = memoryview(out)[: -len(head)]
        end = at
        stop = start
    return names
