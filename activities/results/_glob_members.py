"""Pure: every directory's direct names in list order, for a whole glob listing at once.

Built when the sampler needs a directory's names past its first run (names of one
directory scattered through the listing, as files modified at different times are): one
windowed pass finds each name's directory (one regex ``findall`` per window, the
directories' ids by dict lookup, no Python step per name) into a NumPy array; a stable
argsort by directory then lists each directory's names together, in list order, so a
directory's first ``n`` names are a slice. Linear in the listing, plus the sort (a radix
sort while there are at most 65,536 directories, else n log n).

Memory: about :data:`PER_NAME` bytes a name at peak (the ids and the order, then the order
and every name's start), counted by the caller against the sampler's budget.
"""

from __future__ import annotations

import numpy as np

from fs_search.activities.results import _glob_tree as glob_tree
from fs_search.activities.results._glob_tree import Names

# Bytes a name costs at peak: its directory's id (2 or 4) and its place in the order (8),
# then its start (4) and that place (8).
PER_NAME = 12
# Names' directories are found in windows of about this many bytes (a bytes object per
# name of the window is alive at once).
_WINDOW = 1 << 16
# Bytes searched for name ends at a time (the comparison's array stays small), and names
# whose starts are gathered at a time (the gather's temporaries stay small).
_NUL_WINDOW = 1 << 18
_GATHER = 1 << 16


class Members:
    """Where each of a listing's names starts, grouped by the directory it is directly
    in (a :class:`glob_tree.Tree` node), each directory's in list order."""

    def __init__(self, names: Names, tree: glob_tree.Tree, total: int) -> None:
        order = _by_directory(names, tree, total)
        starts = _starts(names, total)
        for first in range(0, total, _GATHER):  # each name's place -> its start, in place
            block = order[first : first + _GATHER]
            block[:] = starts[block]
        del starts
        self._starts = order
        self._offsets = np.zeros(len(tree.own) + 1, dtype=np.int64)
        np.cumsum(np.frombuffer(tree.own, dtype=np.int64), out=self._offsets[1:])

    def first(self, node: int, n: int) -> list[int]:
        """Where the first ``n`` names directly in ``node`` start, in list order."""
        at = int(self._offsets[node])
        end = min(at + n, int(self._offsets[node + 1]))
        return [int(s) for s in self._starts[at:end]]


def _by_directory(names: Names, tree: glob_tree.Tree, total: int) -> np.ndarray:
    """The names' places in the listing, sorted stably by the id of their directory."""
    # Ids below 2**16 sort by radix (linear); more directories sort by timsort.
    dtype = np.uint16 if len(tree.keys) <= 1 << 16 else np.int32
    ids = np.empty(total, dtype=dtype)
    lookup = tree.index.__getitem__
    at = start = 0
    size = len(names)
    while start < size:
        end = names.index(b"\0", min(start + _WINDOW, size) - 1) + 1
        keys = glob_tree.DIR_OF.findall(names, start, end)
        ids[at : at + len(keys)] = np.fromiter(map(lookup, keys), dtype=dtype, count=len(keys))
        at += len(keys)
        start = end
    if at != total:
        raise ValueError(f"{at} names but {total} counted")
    return np.argsort(ids, kind="stable")


def _starts(names: Names, total: int) -> np.ndarray:
    """Where each name starts (4 bytes a name while the listing is under 2 GiB)."""
    buf = np.frombuffer(names, dtype=np.uint8)
    starts = np.empty(total, dtype=np.int32 if len(buf) < 1 << 31 else np.int64)
    starts[:1] = 0
    found = 0
    for window in range(0, len(buf), _NUL_WINDOW):
        nuls = np.flatnonzero(buf[window : window + _NUL_WINDOW] == 0)
        after = nuls[: total - 1 - found] + (window + 1)  # the last NUL starts no name
        starts[found + 1 : found + 1 + len(after)] = after
        found += len(after)
    del buf  # the view's export ends, so the caller's buffer may be resized again
    return starts
