"""Sampled glob pages against a plain reference allocation of the sampling rule
(docs/configuration.md), on generated trees of 10 to 100,000 paths with scattered times; the
issue-46 example; the top-level-only page past the sampler's memory budget, and its footer."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fs_search.activities._workspace import SearchTarget
from fs_search.activities.results import _digest as digest
from fs_search.activities.results import _glob_members as glob_members
from fs_search.activities.results import _glob_tree as glob_tree
from fs_search.activities.results import _text as render
from tests.activities.results.sampling import reference_page, top_level_page
from tests.activities.results.scattered import issue_136, plain_page

ROOT = SearchTarget(run_dir="/w", file_arg=None, prefix="", root=".")
# Bytes path components may hold: plain, spaces, glob and regex characters, UTF-8,
# non-UTF-8, line breaks (escaped in text), a backslash, control bytes.
ODD = [b"", b"", b"", b" x", b"*", b"[a]", b"\xc3\xa9", b"\xff\xfe", b"\n", b"\\", b"\x01", b".."]


def digested(names: list[bytes], cap: int) -> digest.GlobDigest:
    raw = b"".join(n + b"\0" for n in names)
    return digest.digest_glob([raw], ROOT, cap=cap, sample=True, artifact=False, every=False)


def generate(rng: random.Random, paths: int, *, tops: int, more: int, small: int, depth: int,
             chain: int, leaves: bool, root_files: float, skew: float,
             order: str) -> list[bytes]:  # fmt: skip
    """A listing of about ``paths`` names in some mtime order.

    ``tops`` top-level directories; ``more`` directories (or one per 20 paths, when -1)
    grow under random existing ones down to ``depth`` levels; one single-directory chain
    ``chain`` levels deep. Files go to directories (``leaves``: those with no
    subdirectory only, so a directory's entries are few and their shares large) by
    heavy-tailed weights (``skew``: many directories get one or two), or directly under
    the root (a share ``root_files`` of them); besides, ``small`` more directories get 1
    to 15 files each, fewer than their turns in a large listing. The order is
    ``scattered`` (shuffled), ``runs`` (each directory's files together, in the order the
    directories were made) or ``touched`` (runs, then a tenth of the files moved to
    random later places, as files edited after a checkout are).
    """
    dirs = [b"t%d%s" % (t, rng.choice(ODD)) for t in range(tops)]
    levels = {d: 1 for d in dirs}
    for k in range(paths // 20 if more < 0 else more):
        parent = rng.choice(dirs)
        if levels[parent] < depth:
            child = b"%s/d%d%s" % (parent, k, rng.choice(ODD))
            dirs.append(child)
            levels[child] = levels[parent] + 1
    if chain:
        dirs.append(b"/".join(b"c%d" % k for k in range(chain)))
    parents = {d.rpartition(b"/")[0] for d in dirs}
    bulk = [d for d in dirs if d not in parents] if leaves else dirs
    # Small directories under directories with subdirectories (so, with ``leaves``, with
    # few entries), or directly under the root.
    inner = [b"", *parents - {b""}]
    smalls = [b"%s/s%d%s" % (rng.choice(inner), k, rng.choice(ODD)) for k in range(small)]
    smalls = [d.lstrip(b"/") for d in smalls]
    cumulative = list(itertools.accumulate(rng.paretovariate(skew) for _ in bulk))
    names = []
    for i in range(paths):
        file = b"f%d%s" % (i, rng.choice(ODD))
        if rng.random() < root_files:
            names.append(file)
        else:
            names.append(rng.choices(bulk, cum_weights=cumulative)[0] + b"/" + file)
    for child in smalls:
        names += [b"%s/g%d" % (child, i) for i in range(rng.randint(1, 15))]
    dirs += smalls
    if order == "scattered":
        rng.shuffle(names)
    else:
        rank = {d: k for k, d in enumerate(dirs)}
        names.sort(key=lambda n: rank.get(n.rpartition(b"/")[0], -1))
        if order == "touched":  # a tenth of the files each moved to a random later place
            place = [float(k) for k in range(len(names))]
            for k in rng.sample(range(len(names)), len(names) // 10):
                place[k] = rng.uniform(k, len(names))
            names = [n for _, n in sorted(zip(place, names, strict=True))]
    return names


@st.composite
def listings(draw, smallest: int = 10, largest: int = 3000, *, large: bool = False):
    """Listings of ``smallest`` to ``largest`` paths. ``large`` (few examples): each one
    has few directories holding the files and small ones scattered among them, so shares
    are large and reach far into the listing (where a sampler that gives up after some
    scanning would be caught)."""
    paths = draw(st.integers(smallest, largest))
    some = st.sampled_from
    knobs = {
        # More top-level groups than a cap, a few, or one.
        "tops": draw(some([1, 2, 3, 7] if large else [1, 2, 3, 7, 20, 150])),
        "more": draw(some([0, 5] if large else [-1, 0, 5, 30])),
        "small": draw(some([12, 40] if large else [0, 0, 3, 12])),
        "depth": draw(st.integers(1, 6)),
        "chain": draw(some([0, 0, 2, 12])),
        "leaves": large or draw(st.booleans()),
        # Root files are top-level entries: many leave each entry one path.
        "root_files": draw(some([0.0, 0.0005] if large else [0.0, 0.0, 0.05, 0.5])),
        "skew": draw(some([0.6, 1.2, 3.0])),
        "order": draw(some(["scattered"] if large else ["scattered", "runs", "touched"])),
    }
    return generate(random.Random(draw(st.integers(0, 2**32))), paths, **knobs)


CAPS = st.sampled_from([1, 3, 10, 37, 100, 100, 250])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=listings(), cap=CAPS)
def test_a_sampled_page_is_the_reference_allocation(names, cap):
    """On trees of 10 to 3,000 paths, scattered or in runs, with root files, deep chains,
    more top-level groups than the cap and odd bytes in names: the page is exactly the
    reference allocation (which the older oracle agrees with)."""
    expected = plain_page(names, cap)
    assert digested(names, cap).page == expected
    assert reference_page(names, cap=cap, sample=True) == expected


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=listings(20_000, 100_000, large=True), cap=st.sampled_from([100, 250]))
def test_a_sampled_page_of_a_large_listing_is_the_reference_allocation(names, cap):
    """The same on trees of 20,000 to 100,000 paths."""
    assert digested(names, cap).page == plain_page(names, cap)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(names=listings(largest=600), cap=CAPS)
def test_small_windows_give_the_same_page(names, cap):
    """Directories found and names indexed in tiny windows: the same page."""
    with mock.patch.object(glob_members, "_WINDOW", 7):
        with mock.patch.multiple(glob_tree, _WINDOW=7, _NAMES_WINDOW=5):
            assert digested(names, cap).page == plain_page(names, cap)


def test_the_issues_scattered_example_takes_the_rules_shares():
    """136 paths in t0..t2/s0..s2, times scattered, cap 100: t0's 34 go 11/12/11 to s0, s1
    and s2 (s1 appeared first), not 29/3/2 as t0's 34 oldest paths would."""
    names = issue_136()
    got = digested(names, 100)
    per_dir = Counter(p.rpartition("/")[0] for p in got.shown)
    assert [per_dir[f"t0/s{s}"] for s in range(3)] == [11, 12, 11]
    assert sum(per_dir[f"t1/s{s}"] for s in range(3)) == 33
    assert got.page == plain_page(names, 100)
    # What balancing the top-level entries only gives: t0's 34 oldest.
    assert Counter(names[i].rpartition(b"/")[0] for i in top_level_page(names, cap=100).indices[:34]) == {b"t0/s0": 29, b"t0/s1": 3, b"t0/s2": 2}  # fmt: skip
    text = render.glob_text(got.shown, got.page, total=136, root=".", spill=None)
    assert "Reached 3 of 3 top-level entries and 9 directories. 36 more not shown." in text


def test_past_the_budget_for_the_names_index_the_top_level_only_and_the_footer_says_so():
    """When indexing every name would cost more than the sampler's budget, the page is
    balanced between the top-level entries only, and the footer says just that."""
    names = issue_136()
    with mock.patch.object(glob_members, "cost", lambda *_: 1 << 40):
        got = digested(names, 100)
    assert got.page == top_level_page(names, cap=100) and got.page.top_level_only
    text = render.glob_text(got.shown, got.page, total=136, root=".", spill=None)
    footer = text.splitlines()[-1]
    assert footer == (
        "(Showing 100 of 136 files, sampled across the top-level entries of the search root "
        "only: one file per entry per round, oldest modified first. Reached 3 of 3 top-level "
        "entries. 36 more not shown.)"
    )


def test_the_recursive_footer_is_unchanged():
    names = issue_136()
    got = digested(names, 100)
    text = render.glob_text(got.shown, got.page, total=136, root="src", spill=None)
    assert text.splitlines()[-1] == (
        "(Showing 100 of 136 files, sampled across the top-level entries of src and, inside "
        "each directory, across its entries: one file per entry per round, oldest modified "
        "first. Reached 3 of 3 top-level entries and 9 directories. 36 more not shown.)"
    )
