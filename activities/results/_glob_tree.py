"""Pure: the directories of a glob's names buffer, counted and linked into a tree.

One pass counts the names directly in each directory: a run of names in one directory at a
time (a regex match with a back-reference and one count of its NULs per run: rg lists a
checkout's directories mostly in runs); once runs turn out short, the rest a window of
names at a time in bulk (no Python step per name). The tree is then linked in order of
first appearance, with each directory's size. Memory is bounded by a budget the caller
gives (the count returns None past it).
"""

from __future__ import annotations

import itertools
import re
from array import array
from collections import Counter

Names = bytes | bytearray

# A run of names directly in one directory: the directory (captured, with its '/'), or a
# run of names with no '/' (files directly under the search root; captures nothing).
_DIR_RUN = re.compile(rb"(?:([^\0]*/)[^\0/]*\0(?:\1[^\0/]*\0)*|(?:[^\0/]*\0)+)")
# One name's directory with its '/' (b"" for a file directly under the search root).
DIR_OF = re.compile(rb"([^\0]*/|)[^\0/]*\0")
# Runs taken before their average length is judged, and the shortest average kept.
_PROBE_RUNS = 64
_MIN_RUN = 4
# Names are counted in windows of about this many bytes (bounding the objects alive):
# runs in larger ones, single names (an object each) in smaller ones.
_WINDOW = 1 << 20
_NAMES_WINDOW = 1 << 16
# What a directory costs, estimated: this many bytes on top of its name.
PER_DIR = 200


class Tree:
    """The directories holding names, and their ancestors, in flat columns.

    Node ``i``: ``keys[i]`` (with its '/'; the search root is b""), ``own[i]`` names
    directly in it, ``first[i]`` where its first direct name starts (-1: none),
    ``run[i]`` names in that name's run. Once linked: ``sub_first[i]`` where the first
    name under it starts, ``size[i]`` names under it, ``width[i]`` its subdirectories,
    listed in order of first appearance by :meth:`kids`.
    """

    def __init__(self) -> None:
        self.index: dict[bytes, int] = {}
        self.keys: list[bytes] = []
        self.own = array("q")
        self.first = array("q")
        self.run = array("q")
        self.cost = 0

    def add(self, key: bytes, count: int, first: int, run: int) -> None:
        """Names directly in ``key``: its first run, or more of its names."""
        at = self.index.get(key)
        if at is not None:
            self.own[at] += count
            return
        self.index[key] = len(self.keys)
        self.keys.append(key)
        self.own.append(count)
        self.first.append(first)
        self.run.append(run)
        self.cost += PER_DIR + len(key)

    def kids(self, node: int, most: int) -> list[int]:
        """``node``'s first ``most`` subdirectories, in order of first appearance."""
        out: list[int] = []
        kid = self.first_kid[node]
        while kid >= 0 and len(out) < most:
            out.append(kid)
            kid = self.next_kid[kid]
        return out

    def link(self, budget: int) -> bool:
        """Build the tree from the directories counted (in order of first appearance):
        ancestors added, each directory's subdirectories in order of first appearance,
        sizes. False when it would cost more than ``budget``.

        Each directory is linked to its parent when first met, walking up until a
        directory already linked: as directories are met in order of first appearance,
        that is each one's first appearance, and the order of its parent's list.
        """
        index, keys, first = self.index, self.keys, self.first
        if b"" not in index:
            self.add(b"", 0, -1, 0)
        root = index[b""]
        n = len(keys)
        parent, sub_first = [-1] * n, [-1] * n
        first_kid, last_kid, next_kid, width = [-1] * n, [-1] * n, [-1] * n, [0] * n
        added = [parent, sub_first, first_kid, last_kid, next_kid]
        get = index.get
        for i in range(n):
            node, at = i, first[i]
            while node != root and parent[node] < 0:
                sub_first[node] = at
                key = keys[node]
                up = key[: key.rfind(b"/", 0, -1) + 1]
                above = get(up)
                if above is None:  # an ancestor with no name directly in it
                    above = len(keys)
                    self.add(up, 0, -1, 0)
                    for column in added:
                        column.append(-1)
                    width.append(0)
                    if self.cost > budget:
                        return False
                parent[node] = above
                last = last_kid[above]
                if last < 0:
                    first_kid[above] = node
                else:
                    next_kid[last] = node
                last_kid[above] = node
                width[above] += 1
                node = above
        self.root, self.parent, self.sub_first = root, parent, sub_first
        self.first_kid, self.next_kid, self.width = first_kid, next_kid, width
        size = self.size = list(self.own)
        order = [root]
        for node in order:  # breadth first: every parent before its children
            kid = first_kid[node]
            while kid >= 0:
                order.append(kid)
                kid = next_kid[kid]
        for node in reversed(order):
            if node != root:
                size[parent[node]] += size[node]
        return True


def count(names: Names, budget: int) -> Tree | None:
    """Names directly in each directory, in order of first appearance (None past the
    budget). A run of names in one directory at a time; once runs turn out short (fewer
    than ``_MIN_RUN`` on average after ``_PROBE_RUNS``), the rest a window of names at a
    time in bulk."""
    tree = Tree()
    counted = 0
    runs = 0
    start = 0
    size = len(names)
    while start < size:
        end = names.index(b"\0", min(start + _WINDOW, size) - 1) + 1
        for run in _DIR_RUN.finditer(names, start, end):
            length = names.count(b"\0", run.start(), run.end())
            tree.add(run.group(1) or b"", length, run.start(), length)
            counted += length
            runs += 1
            if runs >= _PROBE_RUNS and counted < runs * _MIN_RUN:
                if not _count_names(names, run.end(), tree, budget):
                    return None
                return tree
        if tree.cost > budget:
            return None
        start = end
    return tree


def _count_names(names: Names, start: int, tree: Tree, budget: int) -> bool:
    """Names from ``start`` on counted a window at a time: each name's directory found in
    one regex pass, counted by one ``Counter`` over the whole pass (added to the tree
    once at the end), and a new directory's first name found among the window's name
    starts. No Python step per name, nor per directory of each window (in a scattered
    listing nearly every name of a window is in a directory of its own). False past the
    budget."""
    size = len(names)
    counts: Counter[bytes] = Counter()
    index = tree.index
    while start < size:
        end = names.index(b"\0", min(start + _NAMES_WINDOW, size) - 1) + 1
        keys = DIR_OF.findall(names, start, end)
        seen = len(counts)
        counts.update(keys)
        # Directories first counted here: the last ones the Counter took in (a dict keeps
        # its order), those the runs before did not count either.
        fresh = itertools.islice(reversed(counts), len(counts) - seen)
        new = [key for key in fresh if key not in index]
        if new:
            lengths = map(len, names[start:end].split(b"\0"))
            starts = list(itertools.accumulate(map((1).__add__, lengths), initial=start))
            firsts = dict(zip(reversed(keys), reversed(starts[: len(keys)]), strict=True))
            ordered = new[::-1]  # in order of first appearance
            at = len(tree.keys)
            index.update(zip(ordered, range(at, at + len(ordered)), strict=True))
            tree.keys += ordered
            tree.own.extend(itertools.repeat(0, len(ordered)))
            tree.first.extend(map(firsts.__getitem__, ordered))
            tree.run.extend(itertools.repeat(1, len(ordered)))
            tree.cost += PER_DIR * len(ordered) + sum(map(len, ordered))
        if tree.cost > budget:
            return False
        start = end
    own = tree.own
    for key, n in counts.items():
        own[index[key]] += n
    return True
