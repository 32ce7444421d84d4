"""Listings whose times are scattered over the tree: the issue-46 example, and a plain
reference allocation of the sampling rule (docs/configuration.md) to check pages against.

The reference shares nothing with the production sampler: it builds a dict tree of the
listing (entries in order of first appearance) and hands each share out one turn at a
time, recursively.
"""

from __future__ import annotations

import random
from typing import Union

from fs_search.activities.results import _text as render

# A directory: its entries in order of first appearance, each a directory or a file (its
# index in the listing).
Node = dict[tuple[bytes, bool], Union["Node", int]]


def issue_136() -> list[bytes]:
    """The issue's example in mtime order: 136 paths in t0..t2/s0..s2, times scattered.

    t0 (60 paths: s0 30, s1 15, s2 15) lists first, so it takes 34 of a cap of 100; its
    own first 34 paths are s1's first, then 29 of s0, 2 more of s1 and 2 of s2 in some
    order. The rule hands t0's 34 out between s1, s0 and s2 (in order of first appearance):
    12, 11, 11; the first 34 of t0 in list order are 29 of s0, 3 of s1, 2 of s2.
    """
    rng = random.Random(46)
    rest = [b"t0/s0"] * 29 + [b"t0/s1"] * 2 + [b"t0/s2"] * 2
    rng.shuffle(rest)
    tail = [b"t0/s0"] + [b"t0/s1"] * 12 + [b"t0/s2"] * 13
    rng.shuffle(tail)
    t0 = [b"t0/s1", *rest, *tail]
    others = [
        b"t%d/s%d" % (t, s) for t in (1, 2) for s, n in enumerate((13, 13, 12)) for _ in range(n)
    ]
    rng.shuffle(others)
    # t0's paths at random places among the others', its first path first.
    at = {0, *rng.sample(range(1, len(t0) + len(others)), len(t0) - 1)}
    t0_iter, others_iter = iter(t0), iter(others)
    dirs = [next(t0_iter if i in at else others_iter) for i in range(len(t0) + len(others))]
    seen: dict[bytes, int] = {}
    names = []
    for d in dirs:
        seen[d] = seen.get(d, 0) + 1
        names.append(b"%s/f%02d.z" % (d, seen[d]))
    return names


def tree_of(names: list[bytes]) -> Node:
    """The listing as a dict tree (entries keyed by (name, is a directory))."""
    root: Node = {}
    for i, name in enumerate(names):
        *dirs, file = name.split(b"/")
        node = root
        for d in dirs:
            child = node.setdefault((d, True), {})
            assert isinstance(child, dict)
            node = child
        node[(file, False)] = i
    return root


def sizes_of(node: Node, into: dict[int, int]) -> int:
    """Paths under ``node`` (each directory's size kept in ``into``, by id)."""
    size = 0
    for entry in node.values():
        size += 1 if isinstance(entry, int) else sizes_of(entry, into)
    into[id(node)] = size
    return size


def turns(sizes: list[int], share: int) -> list[int]:
    """``share`` handed out one path per turn, entry after entry, round after round; an
    entry out of paths drops out."""
    given = [0] * len(sizes)
    active = [k for k, size in enumerate(sizes) if size]
    while share and active:
        still = []
        for k in active:
            if not share:
                break
            given[k] += 1
            share -= 1
            if given[k] < sizes[k]:
                still.append(k)
        active = still
    return given


def allocate(node: Node, share: int, sizes: dict[int, int], taken: list[int]) -> None:
    entries = list(node.values())
    counts = [1 if isinstance(e, int) else sizes[id(e)] for e in entries]
    for entry, n in zip(entries, turns(counts, share), strict=True):
        if not n:
            continue
        if isinstance(entry, int):
            taken.append(entry)
        else:
            allocate(entry, n, sizes, taken)


def plain_page(names: list[bytes], cap: int) -> render.GlobPage:
    """The sampling rule's page: the head under the cap or when flat (one path per top-level
    entry); else the cap handed out recursively, the top-level entries shown in order of
    first appearance, each one's paths in list order."""
    root = tree_of(names)
    if len(names) <= cap or len(root) == len(names):
        return render.GlobPage(indices=list(range(min(cap, len(names)))), sampled=False)
    sizes: dict[int, int] = {}
    sizes_of(root, sizes)
    taken: list[int] = []
    allocate(root, cap, sizes, taken)
    chosen = set(taken)
    groups = []
    for entry in root.values():
        under = [entry] if isinstance(entry, int) else sorted(_indices(entry) & chosen)
        groups.append([i for i in under if i in chosen])
    return render.GlobPage(
        indices=[i for group in groups for i in group],
        sampled=True,
        groups_reached=sum(1 for group in groups if group),
        groups_total=len(root),
        directories=len({names[i].rpartition(b"/")[0] for i in chosen}),
    )


def _indices(node: Node) -> set[int]:
    out: set[int] = set()
    for entry in node.values():
        if isinstance(entry, int):
            out.add(entry)
        else:
            out |= _indices(entry)
    return out
