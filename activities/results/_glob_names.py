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

from fs_search.activities._workspace import SearchTarget
from fs_search.activities.results import _glob_sample as glob_sample
from fs_search.activities.results import _text as render

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
# An empty name (after the first): a regex finds a two-byte pattern starting with NUL
# several times faster than ``in``, as NUL ends every name.
_EMPTY_NAME = re.compile(rb"\0\0")
# Top-level directories counted in one dict at most (about 100 bytes each).
_MAX_KEYS = 1 << 18
# The names buffer (see blob): read as bytes, grown and rewritten in place as a bytearray.
Names = bytes | bytearray


def blob(chunks: list[bytes]) -> bytearray:
    """rg's ``--null`` output as one buffer of non-empty, NUL-terminated names.

    ``chunks`` is consumed: each chunk is dropped as the buffer grows over it (in place,
    as large allocations are mapped), so the output is never held twice; a lone
    ``bytearray`` chunk becomes the buffer itself.
    """
    if len(chunks) == 1 and isinstance(chunks[0], bytearray):
        names = chunks.pop()  # one buffer already: taken as it is
    else:
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
        paths = display_text(names.decode("utf-8", "replace"), target).split("\0")[:-1]
    return total, page, shown, paths


def _sampled(names: Names, total: int, cap: int) -> tuple[render.GlobPage, list[int]]:
    """The sampled page and where its names start: recursively balanced
    (:mod:`._glob_sample`); in a listing whose directories and names' index would cost
    more than the sampler's memory budget (millions of names, or nearly one directory
    per name), balanced between the top-level entries only (:func:`_top_level_sampled`),
    as its footer says. A flat result (one path per top-level entry) is the head, not
    sampled."""
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
        top_level_only=True,
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
    for start, end in windows(names):
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
        for start, end in windows(names):
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


def windows(names: Names) -> Iterator[tuple[int, int]]:
    """(start, end) spans of about ``_WINDOW`` bytes, each ending just after a NUL."""
    start = 0
    while start < len(names):
        end = names.index(b"\0", min(start + _WINDOW, len(names)) - 1) + 1
        yield start, end
        start = end


def _name_at(names: Names, start: int) -> str:
    return names[start : names.index(b"\0", start)].decode("utf-8", "replace")


def display_text(text: str, target: SearchTarget) -> str:
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
