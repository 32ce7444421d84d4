"""Pure: recursive balanced sampling of an over-cap glob, over the names buffer.

The cap is a share handed out round-robin, one path per turn, between the entries of the
search root in order of first appearance (an entry with fewer paths than its turns drops
out); a directory's share is handed out the same way between its own entries, and so on
down; a file is one path. So inside every directory the files taken are its oldest, and
a result concentrated in one deep subdirectory fills only that subdirectory's share.

Linear in the result: one pass counts the names directly in each directory (a run of
names in one directory at a time, name by name once runs turn out short), the directory
tree is built from those counts, shares are handed out top-down, and each directory's
taken names are found from its first one: inside its first run by stepping over names;
past it, from every directory's names listed at once (:mod:`._glob_members`: one more
pass, built the first time a directory needs names past its first run). Memory is the
directories and, when built, 4 bytes a name, within a share of the output: past it (a
listing with nearly one directory per name, or of millions of very short names)
:func:`sample` returns None and the caller balances the top-level entries only.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING

from fs_search.activities.results import _glob_tree as glob_tree
from fs_search.activities.results._glob_tree import Names

if TYPE_CHECKING:
    from fs_search.activities.results._glob_members import Members

# What the directories and the names' index may cost: a share of the output, at least
# _MIN_BUDGET.
_BUDGET = 3 / 4  # of the output's bytes
_MIN_BUDGET = 8 << 20


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


def sample(names: Names, total: int, cap: int) -> Sample | None:
    """The recursively balanced page of ``cap`` names out of ``total`` (> cap), or None
    when the directories, or the index of every name that finding directories' names
    past their first runs needs, would cost more than the budget (a share of the
    output). A flat listing (one name per top-level entry: ``entries == total``) has no
    starts: its page is the head."""
    budget = max(_MIN_BUDGET, int(len(names) * _BUDGET))
    tree = glob_tree.count(names, budget)
    if tree is None or not tree.link(budget):
        return None
    root = tree.root
    entries = tree.width[root] + tree.own[root]
    if entries == total:  # flat: one path per entry, so the sample is the head
        return Sample(starts=[], reached=0, entries=entries, directories=0)
    quota: dict[int, int] = {}  # directory -> names directly in it to take
    group: dict[int, int] = {}  # directory -> its top-level entry (a root kid)
    picks = _Picks(names, tree, total=total, room=budget - tree.cost)
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


def _hand_out(tree: glob_tree.Tree, node: int, share: int, picks: _Picks) -> list[tuple[int, int]]:
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
    """Finding directories' names would cost more memory than the budget."""


class _Picks:
    """Where each directory's first direct names start, found once and remembered.

    A directory's first run gives its first names for a step over a NUL each; beyond it,
    every directory's names are listed at once (:class:`Members`, built on the first such
    need, within ``room`` bytes: past it :class:`_TooCostly`).
    """

    def __init__(self, names: Names, tree: glob_tree.Tree, *, total: int, room: int) -> None:
        self.names = names
        self.tree = tree
        self.total = total
        self.room = room
        self.found: dict[int, list[int]] = {}
        self.members: Members | None = None

    def starts(self, node: int, n: int) -> list[int]:
        """Where the first ``n`` names directly in ``node`` start."""
        known = self.found.get(node, [])
        if n <= len(known) or n <= 0:
            return known[:n]
        tree = self.tree
        if n > tree.run[node]:
            starts = self._members().first(node, n)
        else:  # the first run's names follow one another
            names = self.names
            starts = known or [tree.first[node]]
            while len(starts) < n:
                starts.append(names.index(b"\0", starts[-1]) + 1)
        self.found[node] = starts
        return starts

    def _members(self) -> Members:
        if self.members is None:
            # Loaded on first use: NumPy stays out of the light imports of results/.
            members = import_module("fs_search.activities.results._glob_members")
            if members.cost(self.total, len(self.tree.own), len(self.names)) > self.room:
                raise _TooCostly
            self.members = members.Members(self.names, self.tree, self.total)
        return self.members
