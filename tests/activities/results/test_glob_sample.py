"""Recursive balanced sampling of over-cap globs: the invariants the contract states, the
issue's example, and the fallback for listings past the sampler's memory budget."""

from __future__ import annotations

from collections import Counter
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from fs_search.activities._workspace import SearchTarget
from fs_search.activities.results import _digest as digest
from fs_search.activities.results import _glob_sample as glob_sample
from fs_search.activities.results import _glob_tree as glob_tree
from fs_search.activities.results import _text as render
from tests.activities.results.sampling import reference_page, top_level_page

ROOT = SearchTarget(run_dir="/w", file_arg=None, prefix="", root=".")


def digested(names: list[bytes], cap: int) -> digest.GlobDigest:
    raw = b"".join(n + b"\0" for n in names)
    return digest.digest_glob([raw], ROOT, cap=cap, sample=True, artifact=True, every=False)


@st.composite
def trees(draw):
    """An rg listing in some mtime order: distinct names up to four deep, none both a file
    and a directory, from few component names so directories share entries."""
    names: list[bytes] = []
    for _ in range(draw(st.integers(2, 60))):
        depth = draw(st.sampled_from([1, 2, 2, 3, 3, 4]))
        parts = [draw(st.sampled_from([b"a", b"b", b"c", b"\xff"])) for _ in range(depth - 1)]
        name = b"/".join([*parts, b"f%d" % draw(st.integers(0, 30))])
        if any(n == name or n.startswith(name + b"/") or name.startswith(n + b"/") for n in names):
            continue
        names.append(name)
    return draw(st.permutations(names))


def entries_of(names: list[bytes]) -> dict[bytes, dict[bytes, list[int]]]:
    """Every directory (b"" the search root, others with their '/') -> its entries (a
    subdirectory, or a file) in order of first appearance -> the indices under each."""
    dirs: dict[bytes, dict[bytes, list[int]]] = {}
    for i, name in enumerate(names):
        parts = name.split(b"/")
        for depth in range(len(parts)):
            here = b"".join(p + b"/" for p in parts[:depth])
            entry = here + parts[depth] + (b"/" if depth < len(parts) - 1 else b"")
            dirs.setdefault(here, {}).setdefault(entry, []).append(i)
    return dirs


def assert_balanced(names: list[bytes], page: render.GlobPage, cap: int) -> None:
    """The contract's invariants of a sampled page, checked without an oracle."""
    taken = set(page.indices)
    assert len(page.indices) == len(taken) == cap
    dirs = entries_of(names)
    for here, entries in dirs.items():
        got = [
            (members[0], len(members), len(taken.intersection(members)))
            for members in entries.values()
        ]
        for first, size, n in got:
            if n < size:  # still holding paths: nobody took more than one turn beyond it
                for other_first, _, other_n in got:
                    assert other_n <= n + 1, (here, got)
                    # the extra turn of the last round went to entries that appeared first
                    assert other_n <= n or other_first < first, (here, got)
        # the files taken directly in a directory are its oldest
        files = [m[0] for e, m in entries.items() if not e.endswith(b"/")]
        picked = [i in taken for i in files]
        assert picked == sorted(picked, reverse=True), (here, picked)
    # the page: top-level entries in order of first appearance, each in list order
    tops = {i: e for e, members in dirs[b""].items() for i in members}
    order = [tops[i] for i in page.indices]
    assert order == sorted(order, key=lambda e: dirs[b""][e][0])
    for e in set(order):
        shown = [i for i in page.indices if tops[i] == e]
        assert shown == sorted(shown)
    reached = {tops[i] for i in page.indices}
    assert (page.groups_reached, page.groups_total) == (len(reached), len(dirs[b""]))
    assert page.directories == len({names[i].rpartition(b"/")[0] for i in taken})


@settings(max_examples=300, deadline=None)
@given(names=trees(), cap=st.integers(1, 30))
def test_a_sampled_page_hands_each_directorys_share_out_round_robin(names, cap):
    """At every level each entry takes one path per round until the share is spent (an
    entry out of paths drops out), the extra turns of the last round go to the entries
    that appeared first, a directory's own files are its oldest, and the page is grouped
    by top-level entry in order of first appearance."""
    got = digested(names, cap)
    if len(names) <= cap or not got.page.sampled:
        assert got.page.indices == list(range(min(len(names), cap)))
        if len(names) > cap:  # flat: one path per top-level entry
            assert len(entries_of(names)[b""]) == len(names)
        return
    assert_balanced(names, got.page, cap)
    assert got.page == reference_page(names, cap=cap, sample=True)


@settings(max_examples=150, deadline=None)
@given(names=trees(), cap=st.integers(1, 30), probe=st.integers(1, 3))
def test_counting_by_runs_or_name_by_name_gives_the_same_page(names, cap, probe):
    """Whether names are counted a run at a time or name by name, in any window size,
    the page is the same."""
    expected = digested(names, cap).page
    small = {"_WINDOW": 7, "_NAMES_WINDOW": 5, "_PROBE_RUNS": probe, "_MIN_RUN": 1000}
    with mock.patch.multiple(glob_tree, **small):
        assert digested(names, cap).page == expected


def issue_tree() -> list[bytes]:
    """The issue's tree in mtime order: a/huge's 300 files oldest, then a/s00..a/s19
    (3 each), b/x (40), b/y (10) and c.z."""
    names = [b"a/huge/old%03d" % i for i in range(300)]
    names += [b"a/s%02d/f%d" % (s, i) for s in range(20) for i in range(3)]
    names += [b"b/x/f%02d" % i for i in range(40)] + [b"b/y/f%d" % i for i in range(10)]
    return [*names, b"c.z"]


def test_the_issues_tree_reaches_every_subdirectory():
    """On the issue's tree every one of a's 21 subdirectories is reached, a/huge takes no
    more than its fair share, b/y all 10 and b/x the rest of b's share."""
    names = issue_tree()
    got = digested(names, 100)
    per_dir = Counter(p.rpartition("/")[0] for p in got.shown)
    shares = Counter(p.split("/")[0] for p in got.shown)
    assert shares == {"a": 50, "b": 49, "c.z": 1}  # rounds between a, b and c.z
    assert {f"a/s{s:02}" for s in range(20)} | {"a/huge"} <= set(per_dir)
    assert per_dir["a/huge"] == 3  # 50 between 21 entries: 2 rounds, and one more early
    assert [per_dir[f"a/s{s:02}"] for s in range(20)] == [3] * 7 + [2] * 13
    assert (per_dir["b/y"], per_dir["b/x"]) == (10, 39)
    assert got.shown[:3] == ["a/huge/old000", "a/huge/old001", "a/huge/old002"]
    assert got.shown[-1] == "c.z" and got.shown[50] == "b/x/f00"
    page = got.page
    assert (page.groups_reached, page.groups_total, page.directories) == (3, 3, 24)
    assert_balanced(names, page, 100)
    # The artifact is the full mtime-ordered list; the footer says what was reached.
    assert bytes(got.artifact).decode().splitlines() == [n.decode() for n in names]
    text = render.glob_text(got.shown, page, total=len(names), root=".", spill=None)
    assert "Reached 3 of 3 top-level entries and 24 directories. 311 more not shown." in text


def test_head_mode_is_unchanged_on_the_issues_tree():
    """Head mode still shows the 100 oldest: all from a/huge."""
    raw = b"".join(n + b"\0" for n in issue_tree())
    got = digest.digest_glob([raw], ROOT, cap=100, sample=False, artifact=False, every=False)
    assert got.shown == [f"a/huge/old{i:03}" for i in range(100)] and not got.page.sampled


@settings(max_examples=100, deadline=None)
@given(names=trees(), cap=st.integers(1, 30))
def test_too_many_directories_for_the_budget_balances_the_top_level_only(names, cap):
    """A listing whose directories would cost more than the budget is sampled between the
    top-level entries only (memory stays bounded), and its page says so."""
    with mock.patch.multiple(glob_sample, _MIN_BUDGET=0, _BUDGET=0):
        got = digested(names, cap)
    if len(names) > cap:
        assert got.page == top_level_page(names, cap=cap)


def test_a_directory_with_more_entries_than_its_share_gives_its_first_entries_one_each():
    """Fewer turns than entries: the entries that appeared first (files and
    subdirectories alike) take one path each."""
    names = [b"d/x/1", b"d/f1", b"d/y/1", b"d/f2", b"d/x/2", b"d/z/1", b"e/1", b"e/2"]
    got = digested(names, 4)
    # d and e take 2 each; d's first two entries are x (at 0) and f1 (at 1).
    assert got.shown == ["d/x/1", "d/f1", "e/1", "e/2"]


def test_a_deep_chain_is_followed_to_its_files():
    """A share passes whole down a chain of single directories."""
    names = [b"a/b/c/d/e/f%d" % i for i in range(10)] + [b"z/%d" % i for i in range(10)]
    got = digested(names, 6)
    assert got.shown == [f"a/b/c/d/e/f{i}" for i in range(3)] + ["z/0", "z/1", "z/2"]


def test_names_far_from_their_directorys_first_are_found_whatever_the_listing_size():
    """Names of a directory far apart in the listing (a/x's files lie between b's) are
    found from every directory's names listed at once: the page is the rule's, with no
    budget of scans past which it would balance the top-level entries only."""
    names = [b"%s/%d" % (d, i) for i in range(6) for d in (b"a/x", b"b")]
    names += [b"a/y/%d" % i for i in range(6)]
    recursive = digested(names, 8).page
    assert recursive == reference_page(names, cap=8, sample=True)
    assert recursive != top_level_page(names, cap=8) and not recursive.top_level_only
