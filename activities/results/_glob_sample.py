"""Pure: recursive balanced sampling of an over-cap glob, over the names buffer.

The cap is a share handed out round-robin, one path per turn, between the entries of the
search root in order of first appearance (an entry with fewer paths than its turns drops
out); a directory's share is handed out the same way between its own entries, and so on
down; a file is one path. So inside every directory the files taken are its oldest, and
a result concentrated in one deep subdirectory fills only that subdirectory's share.

Linear in the result: one pass counts the names directly in each directory (a run of
names in one directory at a time, name by name once runs turn out short), the directory
tree is built from those counts, shares are handed out top-down, and each directory's
taken names are found from its first one. Memory is the directories (bounded by a share
of the output: a listing with nearly one directory per name returns None, and the caller
balances the top-level entries only); so is the work of finding names far from their
directory's first (a few scans of the listing in all, past which the same).
"""

from __future__ import annotations

import itertools
import re
from array import array
from collections import Counter
from dataclasses import dataclass

Names = bytes | bytearray

# A run of names directly in one directory: the directory (captured, with its '/'), or a
# run of names with no '/' (files directly under the search root; captures nothing).
_DIR_RUN = re.compile(rb"(?:([^\0]*/)[^\0/]*\0(?:\1[^\0/]*\0)*|(?:[^\0/]*\0)+)")
# One name's directory with its '/' (b"" for a file directly under the search root).
_DIR_OF = re.compile(rb"([^\0]*/|)[^\0/]*\0")
# Runs taken before their average length is judged, and the shortest average kept.
_PROBE_RUNS = 64
_MIN_RUN = 4
# Names are counted in windows of about this many bytes (bounding the objects alive):
# runs in larger ones, single names (an object each) in smaller ones.
_WINDOW = 1 << 20
_NAMES_WINDOW = 1 << 16
# What the directories may cost (estimated bytes per directory on top of its name), and
# the budget: a share of the output, at least _MIN_BUDGET.
_PER_DIR = 200
_BUDGET = 3 / 4  # of the output's bytes
_MIN_BUDGET = 8 << 20
# How much of the listing finding directories' names may scan, in listing sizes.
_SCANS = 4


@dataclass(frozen=True)
class Sample:
    """The sampled page: where its names start (page order), and its reach.

    Attributes:
        starts: offsets of the page's names in the buffer: the top-level entries in order
            of first appearance, each entry's names in list (mtime) order.
        reached: top-level entries with a name on the page.
        entries: top-level entries in all.
        directories: distinct directories the page's names are directly in.
    """

    starts: list[int]
    reached: int
    entries: int
    directories: int


class _Tree:
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
        self.cost += _PER_DIR + len(key)

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


def sample(names: Names, total: int, cap: int) -> Sample | None:
    """The recursively balanced page of ``cap`` names out of ``total`` (> cap), or None
    when the directories would cost more than the budget (a share of the output), or
    finding their names more than ``_SCANS`` scans of the listing. A flat
    listing (one name per top-level entry: ``entries == total``) has no starts: its page
    is the head."""
    budget = max(_MIN_BUDGET, int(len(names) * _BUDGET))
    tree = _count(names, budget)
    if tree is None or not tree.link(budget):
        return None
    root = tree.root
    entries = tree.width[root] + tree.own[root]
    if entries == total:  # flat: one path per entry, so the sample is the head
        return Sample(starts=[], reached=0, entries=entries, directories=0)
    quota: dict[int, int] = {}  # directory -> names directly in it to take
    group: dict[int, int] = {}  # directory -> its top-level entry (a root kid)
    picks = _Picks(names, tree)
    pending = [(root, cap)]
    # The page: top-level entries in order of first appearance (a root file is one),
    # each entry's names in list order.
    by_group: dict[int, list[int]] = {}
    root_files: list[int] = []
    try:
        while pending:
            node, share = pending.pop()
            top = group.get(node, -1)
            for kid, taken in _hand_out(tree, node, share, picks):
                if kid < 0:
                    quota[node] = taken
                    continue
                group[kid] = kid if node == root else top
                pending.append((kid, taken))
        for node, n in quota.items():
            starts = picks.starts(node, n)
            if node == root:
                root_files = starts
            else:
                by_group.setdefault(group[node], []).extend(starts)
    except _TooCostly:
        return None
    groups = [(tree.sub_first[g], sorted(s)) for g, s in by_group.items()]
    groups += [(s, [s]) for s in root_files]
    groups.sort()
    return Sample(
        starts=[s for _, group_starts in groups for s in group_starts],
        reached=len(groups),
        entries=entries,
        directories=len(quota),
    )


def _hand_out(tree: _Tree, node: int, share: int, picks: _Picks) -> list[tuple[int, int]]:
    """``share`` handed out round-robin between ``node``'s entries: (kid, paths) for each
    subdirectory given some, and (-1, files) for its own files taken."""
    own = tree.own[node]
    if tree.width[node] + own > share:
        # Fewer turns than entries: the first `share` entries in order of first
        # appearance take one each, files and subdirectories alike.
        kids = tree.kids(node, share)
        files = picks.starts(node, min(own, share))
        firsts = sorted([(tree.sub_first[k], k) for k in kids] + [(s, -1) for s in files])
        chosen = firsts[:share]
        n_files = sum(1 for _, k in chosen if k < 0)
        return [(k, 1) for _, k in chosen if k >= 0] + ([(-1, n_files)] if n_files else [])
    kids = tree.kids(node, share)
    sizes = [tree.size[k] for k in kids]
    if share >= tree.size[node]:  # everything
        return [*zip(kids, sizes, strict=True), *([(-1, own)] if own else [])]
    # Complete rounds: the most that fit in the share (at least one: every entry has a
    # turn; a file lasts one round).
    low, high = 1, max(sizes, default=1)
    while low < high:
        mid = (low + high + 1) // 2
        if sum(min(s, mid) for s in sizes) + own <= share:
            low = mid
        else:
            high = mid - 1
    taken = [min(s, low) for s in sizes]
    left = share - sum(taken) - own
    for i, size in enumerate(sizes):  # the last, partial round (files are done by now)
        if not left:
            break
        if size > low:
            taken[i] += 1
            left -= 1
    out = [(k, t) for k, t in zip(kids, taken, strict=True) if t]
    return out + ([(-1, own)] if own else [])


class _TooCostly(Exception):
    """Finding directories' names scanned more of the listing than the work budget."""


class _Picks:
    """Where each directory's first direct names start, found once and remembered.

    A directory's first run gives its first names for a step over a NUL each; beyond it,
    one regex scan of the listing from there. Scans stop being tried past ``_SCANS``
    times the listing's size in all (a listing built so that many directories' files lie
    far apart): the caller then falls back to the top-level sampling.
    """

    def __init__(self, names: Names, tree: _Tree) -> None:
        self.names = names
        self.tree = tree
        self.found: dict[int, list[int]] = {}
        self.scanned = 0
        self.limit = _SCANS * len(names)

    def starts(self, node: int, n: int) -> list[int]:
        """Where the first ``n`` names directly in ``node`` start."""
        known = self.found.get(node, [])
        if n <= len(known) or n <= 0:
            return known[:n]
        names, tree = self.names, self.tree
        starts = known or [tree.first[node]]
        # The first run's names follow one another.
        while len(starts) < min(n, tree.run[node]):
            starts.append(names.index(b"\0", starts[-1]) + 1)
        if len(starts) < n:
            if self.scanned > self.limit:
                raise _TooCostly
            after = names.index(b"\0", starts[-1])
            pattern = re.compile(re.escape(b"\0" + tree.keys[node]) + rb"(?=[^\0/]*\0)")
            more = (m.start() + 1 for m in pattern.finditer(names, after))
            starts.extend(itertools.islice(more, n - len(starts)))
            self.scanned += (starts[-1] if len(starts) == n else len(names)) - after
        self.found[node] = starts
        return starts


def _count(names: Names, budget: int) -> _Tree | None:
    """Names directly in each directory, in order of first appearance (None past the
    budget). A run of names in one directory at a time; once runs turn out short (fewer
    than ``_MIN_RUN`` on average after ``_PROBE_RUNS``), the rest a window of names at a
    time in bulk."""
    tree = _Tree()
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


def _count_names(names: Names, start: int, tree: _Tree, budget: int) -> bool:
    """Names from ``start`` on counted a window at a time: each name's directory found in
    one regex pass, counted by ``Counter``, and a directory's first name found among the
    window's name starts. False past the budget."""
    size = len(names)
    while start < size:
        end = names.index(b"\0", min(start + _NAMES_WINDOW, size) - 1) + 1
        keys = _DIR_OF.findall(names, start, end)
        counts = Counter(keys)
        index, own = tree.index, tree.own
        new = [k for k in counts if k not in index]
        for key in counts.keys() - new:
            own[index[key]] += counts[key]
        if new:
            lengths = map(len, names[start:end].split(b"\0"))
            starts = list(itertools.accumulate(map((1).__add__, lengths), initial=start))
            firsts = dict(zip(reversed(keys), reversed(starts[: len(keys)]), strict=True))
            index.update(zip(new, range(len(tree.keys), len(tree.keys) + len(new)), strict=True))
            tree.keys += new
            own.extend(map(counts.__getitem__, new))
            tree.first.extend(map(firsts.__getitem__, new))
            tree.run.extend(itertools.repeat(1, len(new)))
            tree.cost += _PER_DIR * len(new) + sum(map(len, new))
        if tree.cost > budget:
            return False
        start = end
    return True
