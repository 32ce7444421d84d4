"""Pure: a glob's ``rg --files --null`` output as one bytes blob of names, paged in bulk.

Only the page's paths (and every path when asked) become ``str`` objects; the sample, the
display paths and the spill artifact are computed over the blob, so memory stays a small
multiple of rg's output whatever the tree's shape.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterable, Iterator

from fs_search.activities.results import _glob_sample as glob_sample
from fs_search.activities.results import _text as render
from fs_search.activities.workspace import SearchTarget

# One name of ``rg --null`` output: its top-level directory with the '/' (captured) when it
# has one; a name with no '/' is a file directly under the search root (captures b"").
_NAME = re.compile(rb"(?:([^\0/]*/)[^\0]*|[^\0/]*)\0")
# A run of names under one top-level directory (captured with its '/'), or one name with
# no '/' (a file directly under the search root; captures nothing).
_RUN = re.compile(rb"(?:([^\0/]*/)[^\0]*\0(?:\1[^\0]*\0)*|[^\0/]*\0)")
# Runs taken before their average length is judged, and the shortest average kept.
_PROBE_RUNS = 64
_MIN_RUN = 4
# The NUL before a name with no '/'.
_BEFORE_ROOT_FILE = re.compile(rb"\0(?=[^\0/]*\0)")
# Names are scanned in windows of about this many bytes, bounding the objects alive at once.
_WINDOW = 1 << 20
# An empty name, and a name starting "./" (after the first). A regex finds these two-byte
# patterns several times faster than ``in``, as NUL is every name's end.
_EMPTY_NAME = re.compile(rb"\0\0")
_DOT_SLASH_NAME = re.compile(rb"\0\./")
# Names rewritten at a time when a prefix is added to each in place (the window's copy
# and its rewrite are alive at once).
_REWRITE = 1 << 18
# Top-level directories counted in one dict at most (about 100 bytes each).
_MAX_KEYS = 1 << 18
# The names buffer (see blob): read as bytes, grown and rewritten in place as a bytearray.
Names = bytes | bytearray


def blob(chunks: list[bytes]) -> bytearray:
    """rg's ``--null`` output as one buffer of non-empty, NUL-terminated names.

    ``chunks`` is consumed: each chunk is dropped as the buffer grows over it (in place,
    as large allocations are mapped), so the output is never held twice.
    """
    names = bytearray()
    chunks.reverse()
    while chunks:
        names += chunks.pop()
    if names.startswith(b"\0") or _EMPTY_NAME.search(names):  # never from rg, never listed
        names = bytearray(re.sub(rb"\0\0+", b"\0", names).lstrip(b"\0"))
    if names and not names.endswith(b"\0"):
        names += b"\0"
    return names


def listing(
    names: Names, target: SearchTarget, *, cap: int, sample: bool, every: bool
) -> tuple[int, render.GlobPage, list[str], list[str] | None]:
    """(total, page, the page's display paths, every display path when asked)."""
    total = names.count(b"\0")
    if sample and total > cap:
        page, starts = _sampled(names, total, cap)
    else:
        page = render.GlobPage(indices=list(range(min(total, cap))), sampled=False)
        starts = _starts(names, 0, b"\0", len(page.indices))
    shown = [target.display(_name_at(names, start)) for start in starts]
    paths = None
    if every:
        paths = _display_text(names.decode("utf-8", "replace"), target).split("\0")[:-1]
    return total, page, shown, paths


def _sampled(names: Names, total: int, cap: int) -> tuple[render.GlobPage, list[int]]:
    """The sampled page and where its names start: recursively balanced
    (:mod:`._glob_sample`); in a listing with too many directories to count in its memory
    budget, balanced between the top-level entries only (:func:`_top_level_sampled`). A
    flat result (one path per top-level entry) is the head, not sampled."""
    got = glob_sample.sample(names, total, cap)
    if got is None:
        return _top_level_sampled(names, total, cap)
    if got.entries == total:
        return render.GlobPage(indices=list(range(cap)), sampled=False), _starts(
            names, 0, b"\0", cap
        )
    index = _indices(names, got.starts)
    page = render.GlobPage(
        indices=[index[s] for s in got.starts],
        sampled=True,
        groups_reached=got.reached,
        groups_total=got.entries,
        directories=got.directories,
    )
    return page, got.starts


def _top_level_sampled(names: Names, total: int, cap: int) -> tuple[render.GlobPage, list[int]]:
    """The page sampled between the entries directly under the search root only.

    Rounds take each group's next path, groups in order of first appearance, until the
    cap; the page shows the groups in that order, each group's paths in list order. A
    flat result (one path per group) is the head, not sampled. Groups are the entries
    directly under the search root, told apart by their bytes.
    Only directories are kept in a dict: rg lists each file once, so a file directly
    under the root is a group of its own and is only counted.
    """
    dirs, groups = _groups(names, total, cap=cap)
    root_files = dirs.pop(b"", 0)
    if groups == total:  # flat: one path per entry, so the sample is the head
        return render.GlobPage(indices=list(range(cap)), sampled=False), _starts(
            names, 0, b"\0", cap
        )
    # Only the first `cap` groups (in order of first appearance) can get a path.
    firsts = list(_dir_firsts(names, itertools.islice(dirs, cap)))
    if root_files:
        firsts = sorted(firsts + [(s, b"") for s in _root_file_starts(names, cap)])[:cap]
    taken = _rounds([dirs[key] if key else 1 for _, key in firsts], cap)
    members = [
        _starts(names, first, b"\0" + key, n)
        for (first, key), n in zip(firsts, taken, strict=True)
        if n
    ]
    starts = [s for group in members for s in group]
    index = _indices(names, starts)
    page = render.GlobPage(
        indices=[index[s] for s in starts],
        sampled=True,
        groups_reached=len(members),
        groups_total=groups,
    )
    return page, starts


def _groups(names: Names, total: int, *, cap: int) -> tuple[Counter[bytes], int]:
    """Paths per top-level directory (first appearance first; b"": files directly under
    the root) and the number of groups.

    Past ``_MAX_KEYS`` directories (and the cap) the counts stop, and only the first
    ``cap`` directories are kept: with more groups than the cap, the first ``cap`` groups
    get one path each whatever their sizes. The groups are then counted one hash
    partition of the directories per pass, so memory stays bounded whatever the tree holds.
    """
    limit = max(cap, _MAX_KEYS)
    dirs: Counter[bytes] = Counter()
    for start, end in _windows(names):
        _count(names, start, end, dirs)
        if len(dirs) > limit:
            break
    else:
        return dirs, len(dirs) - (b"" in dirs) + dirs[b""]
    dirs = Counter(dict(itertools.islice(dirs.items(), cap + 1)))  # b"" may be one of them
    parts = -(-total // limit)
    groups = 0
    for part in range(parts):
        seen: set[bytes] = set()
        for start, end in _windows(names):
            keys = _NAME.findall(names, start, end)
            groups += keys.count(b"") if part == 0 else 0
            seen.update(k for k in keys if k and hash(k) % parts == part)
        groups += len(seen)
    return dirs, groups


def _count(names: Names, start: int, end: int, dirs: Counter[bytes]) -> None:
    """Add the names of ``names[start:end]`` to ``dirs``, by top-level entry.

    A run of names under one entry at a time (oldest first usually keeps an entry's files
    together: a checkout or a build writes them in turn), each run one regex match and one
    count of its NULs; once runs turn out short (fewer than ``_MIN_RUN`` names on average
    after ``_PROBE_RUNS``), the rest name by name.
    """
    counted = 0
    for runs, run in enumerate(_RUN.finditer(names, start, end), 1):
        size = names.count(b"\0", run.start(), run.end())
        dirs[run.group(1) or b""] += size
        counted += size
        if runs >= _PROBE_RUNS and counted < runs * _MIN_RUN:
            dirs.update(_NAME.findall(names, run.end(), end))
            return


def _rounds(sizes: list[int], cap: int) -> list[int]:
    """Paths each group gives when rounds take one path per group, in order, until ``cap``."""
    full = 0  # complete rounds: every group still holding a path gave one
    while any(s > full for s in sizes) and sum(min(s, full + 1) for s in sizes) <= cap:
        full += 1
    taken = [min(s, full) for s in sizes]
    left = cap - sum(taken)
    for g, size in enumerate(sizes):  # the last, partial round
        if left and size > full:
            taken[g] += 1
            left -= 1
    return taken


def _dir_firsts(names: Names, keys: Iterable[bytes]) -> Iterator[tuple[int, bytes]]:
    """Where each directory group (given in order of first appearance) first appears."""
    at = 0
    for key in keys:
        at = 0 if names.startswith(key) else names.index(b"\0" + key, at) + 1
        yield at, key


def _root_file_starts(names: Names, n: int) -> list[int]:
    """Where the first ``n`` names with no '/' start."""
    starts = [] if b"/" in names[: names.index(b"\0")] else [0]
    found = (m.end() for m in _BEFORE_ROOT_FILE.finditer(names))
    return starts + list(itertools.islice(found, n - len(starts)))


def _starts(names: Names, first: int, before: bytes, n: int) -> list[int]:
    """``first`` and the starts of the names after it preceded by ``before``: ``n`` at most."""
    starts = [first] if n else []
    while len(starts) < n:
        starts.append(names.index(before, starts[-1]) + 1)
    return starts


def _indices(names: Names, starts: list[int]) -> dict[int, int]:
    """Each name start's position in the list (NULs before it), counted in one pass."""
    index, at, found = 0, 0, {}
    for start in sorted(starts):
        index += names.count(b"\0", at, start)
        at = start
        found[start] = index
    return found


def _windows(names: Names) -> Iterator[tuple[int, int]]:
    """(start, end) spans of about ``_WINDOW`` bytes, each ending just after a NUL."""
    start = 0
    while start < len(names):
        end = names.index(b"\0", min(start + _WINDOW, len(names)) - 1) + 1
        yield start, end
        start = end


def _name_at(names: Names, start: int) -> str:
    return names[start : names.index(b"\0", start)].decode("utf-8", "replace")


def _display_text(text: str, target: SearchTarget) -> str:
    """NUL-terminated names -> NUL-terminated display paths.

    In bulk when the display is a fixed head joined to the name (the usual case).
    """
    head, mark, rest = target.display("\0").partition("\0")
    if not mark or rest or text.startswith("./") or "\0./" in text:
        return "".join([target.display(name) + "\0" for name in text.split("\0")[:-1]])
    if not head or not text:
        return text
    # Every NUL but the last starts the next path. Reassigning drops the only reference to
    # each copy as the next one is made, when the caller passes a temporary.
    text = text.replace("\0", "\0" + head, text.count("\0") - 1)
    return head + text


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
    text = _display_text(names.decode("utf-8", "replace"), target)
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
        for start, end in _windows(names):
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
        for start, end in _windows(names):
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
