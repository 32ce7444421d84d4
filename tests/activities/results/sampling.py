"""The glob sampling rule computed the obvious way, over one ``bytes`` per path: the oracle
the digest's page is checked against."""

from __future__ import annotations

from fs_search.activities.results import _text as render


def rounds(sizes: list[int], share: int) -> list[int]:
    """Paths each entry gives when turns take one path per entry, in order, round after
    round, until ``share`` (an entry out of paths drops out)."""
    taken = [0] * len(sizes)
    left = share
    active = [i for i, size in enumerate(sizes) if size]
    while left and active:
        still: list[int] = []
        for i in active:
            if not left:
                break
            taken[i] += 1
            left -= 1
            if taken[i] < sizes[i]:
                still.append(i)
        active = still
    return taken


def balanced(paths: list[tuple[int, list[bytes]]], share: int) -> list[int]:
    """Indices taken from ``paths`` ((list index, remaining components) in list order),
    the share handed out round-robin between the entries they form, recursively."""
    entries: dict[bytes, list[tuple[int, list[bytes]]]] = {}
    for i, parts in paths:
        # A file is an entry of its own; a directory's paths share one (keyed apart).
        key = b"d/" + parts[0] if len(parts) > 1 else b"f/%d" % i
        entries.setdefault(key, []).append((i, parts[1:]))
    groups = list(entries.values())
    taken: list[int] = []
    for group, n in zip(groups, rounds([len(g) for g in groups], share), strict=True):
        if n and len(group) == 1 and not group[0][1]:
            taken.append(group[0][0])
        elif n:
            taken += balanced(group, n)
    return taken


def reference_page(names: list[bytes], *, cap: int, sample: bool) -> render.GlobPage:
    """The contract's page for an rg listing (mtime order): the head, or the cap handed
    out recursively; the page shows the top-level entries in order of first appearance,
    each entry's paths in list order."""
    total = len(names)
    if total <= cap or not sample:
        return render.GlobPage(indices=list(range(min(total, cap))), sampled=False)
    parts = [n.split(b"/") for n in names]
    tops: dict[bytes, list[int]] = {}
    for i, p in enumerate(parts):
        tops.setdefault(b"d/" + p[0] if len(p) > 1 else b"f/%d" % i, []).append(i)
    if len(tops) == total:
        return render.GlobPage(indices=list(range(cap)), sampled=False)
    taken = set(balanced(list(enumerate(parts)), cap))
    shown = [[i for i in members if i in taken] for members in tops.values()]
    return render.GlobPage(
        indices=[i for members in shown for i in members],
        sampled=True,
        groups_reached=sum(1 for m in shown if m),
        groups_total=len(tops),
        directories=len({names[i].rpartition(b"/")[0] for i in taken}),
    )


def top_level_page(names: list[bytes], *, cap: int) -> render.GlobPage:
    """The page balanced between the top-level entries only (a listing past the
    sampler's memory budget): rounds over them in order of first appearance."""
    total = len(names)
    tops: dict[bytes, list[int]] = {}
    for i, name in enumerate(names):
        head, slash, _ = name.partition(b"/")
        tops.setdefault(b"d/" + head if slash else b"f/%d" % i, []).append(i)
    if len(tops) == total:
        return render.GlobPage(indices=list(range(cap)), sampled=False)
    members = list(tops.values())
    taken = rounds([len(m) for m in members], cap)
    shown = [m[:n] for m, n in zip(members, taken, strict=True)]
    return render.GlobPage(
        indices=[i for m in shown for i in m],
        sampled=True,
        groups_reached=sum(1 for m in shown if m),
        groups_total=len(tops),
        top_level_only=True,
    )
