"""Pure: every directory's direct names in list order, for a whole glob listing at once.

Built when the sampler needs a directory's names past its first run (names of one
directory scattered through the listing, as files modified at different times are): one
windowed pass finds each name's directory (one regex ``findall`` per window, the
directories' ids by dict lookup, no Python step per name) and places each name's start in
its directory's part of one array, whose parts are known from the names counted in each
directory (a counting sort: a window's names sorted stably by directory, each run appended
at its directory's cursor). So a directory's first ``n`` names are a slice. Linear in the
listing.

Memory: :func:`cost` (4 bytes a name and 16 a directory, beside a window's temporaries),
counted by the caller against the sampler's budget.
"""

from __future__ import annotations

import numpy as np

from fs_search.activities.results import _glob_tree as glob_tree
from fs_search.activities.results._glob_tree import Names

# Names' directories are found in windows of about this many bytes (a bytes object per
# name of the window, and a few integers each, are alive at once).
_WINDOW = 1 << 16


def cost(total: int, nodes: int, size: int) -> int:
    """Bytes :class:`Members` holds for ``total`` names in ``nodes`` directories over a
    listing of ``size`` bytes: each name's start, each directory's bounds."""
    return total * (4 if size < 1 << 31 else 8) + nodes * 16


class Members:
    """Where each of a listing's names starts, grouped by the directory it is directly
    in (a :class:`glob_tree.Tree` node), each directory's in list order."""

    def __init__(self, names: Names, tree: glob_tree.Tree, total: int) -> None:
        nodes = len(tree.own)
        self._offsets = np.zeros(nodes + 1, dtype=np.int64)
        np.cumsum(np.frombuffer(tree.own, dtype=np.int64), out=self._offsets[1:])
        if int(self._offsets[-1]) != total:
            raise ValueError(f"{int(self._offsets[-1])} names counted but {total} listed")
        cursor = self._offsets[:-1].copy()  # where each directory's next name goes
        grouped = np.empty(total, dtype=np.int32 if len(names) < 1 << 31 else np.int64)
        ids_type = np.uint16 if nodes <= 1 << 16 else np.int32  # uint16: a radix sort
        lookup = tree.index.__getitem__
        buf = np.frombuffer(names, dtype=np.uint8)
        start = 0
        size = len(names)
        while start < size:
            end = names.index(b"\0", min(start + _WINDOW, size) - 1) + 1
            keys = glob_tree.DIR_OF.findall(names, start, end)
            ids = np.fromiter(map(lookup, keys), dtype=ids_type, count=len(keys))
            ends = np.flatnonzero(buf[start:end] == 0) + (start + 1)
            starts = np.concatenate(([start], ends[:-1]))
            order = np.argsort(ids, kind="stable")
            by_dir = ids[order]
            # Runs of one directory in the sorted window: each run goes at its cursor.
            runs = np.flatnonzero(np.diff(by_dir)) + 1
            firsts = np.concatenate(([0], runs))
            counts = np.diff(np.concatenate((firsts, [len(by_dir)])))
            dirs = by_dir[firsts]
            rank = np.arange(len(by_dir)) - np.repeat(firsts, counts)
            grouped[np.repeat(cursor[dirs], counts) + rank] = starts[order]
            cursor[dirs] += counts
            start = end
        del buf  # the view's export ends, so the caller's buffer may be resized again
        if not np.array_equal(cursor, self._offsets[1:]):
            raise ValueError("the listing's names are not those counted")
        self._starts = grouped

    def first(self, node: int, n: int) -> list[int]:
        """Where the first ``n`` names directly in ``node`` start, in list order."""
        at = int(self._offsets[node])
        end = min(at + n, int(self._offsets[node + 1]))
        return [int(s) for s in self._starts[at:end]]
