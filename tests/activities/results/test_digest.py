"""The glob digest: the same page, paths and artifact as rendering the decoded list, in
memory that is a small multiple of rg's output."""

from __future__ import annotations

import contextlib
import random
import tracemalloc
from collections import Counter
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fs_search.activities._workspace import SearchTarget
from fs_search.activities.results import _digest as digest
from fs_search.activities.results import _glob_names as glob_names
from fs_search.activities.results import _glob_sample as glob_sample
from fs_search.activities.results import _glob_tree as glob_tree
from fs_search.activities.results import _text as render
from tests.activities.results.sampling import reference_page

ROOT = SearchTarget(run_dir="/w", file_arg=None, prefix="", root=".")
TARGETS = [
    ROOT,
    SearchTarget(run_dir="/w/src", file_arg=None, prefix="src", root="src"),
    SearchTarget(run_dir="/w/src", file_arg=None, prefix="src/", root="src/"),
    SearchTarget(run_dir="/w/src", file_arg=None, prefix="/w/src", root="/w/src"),
]
# Path components: plain, UTF-8, non-UTF-8 (whose lossy forms differ), line breaks, dots.
PARTS = [b"a", b"b", b"cc", b"d e", b"\xc3\xa9", b"\xff", b"x\ny", b"u\xe2\x80\xa8", b"."]


def reference(names: list[bytes], target: SearchTarget, *, cap: int, sample: bool):
    """What the page, the paths shown, every path and the artifact are: computed from the
    decoded list, one ``str`` per path."""
    rel = [n.decode("utf-8", "replace") for n in names]
    display = [target.display(r) for r in rel]
    page = reference_page(names, cap=cap, sample=sample)
    artifact = "".join(render.one_line(p) + "\n" for p in display)
    return page, [display[i] for i in page.indices], display, artifact


@st.composite
def listings(draw):
    """rg --files output: distinct names, none both a file and a directory."""
    names: list[bytes] = []
    for _ in range(draw(st.integers(0, 40))):
        depth = draw(st.sampled_from([1, 1, 2, 3]))
        parts = [draw(st.sampled_from(PARTS)) + draw(st.sampled_from([b"", b"1", b"2"]))]
        parts += [draw(st.sampled_from(PARTS)) for _ in range(depth - 1)]
        name = b"/".join(parts)
        if any(n == name or n.startswith(name + b"/") or name.startswith(n + b"/") for n in names):
            continue
        names.append(name)
    return names


def split(raw: bytes, cuts: list[int]) -> list[bytes]:
    """``raw`` as the executor's chunks, cut anywhere (inside names too)."""
    at = sorted({min(c, len(raw)) for c in cuts})
    return [raw[i:j] for i, j in zip([0, *at], [*at, len(raw)], strict=True) if i < j] or [raw]


@settings(max_examples=400, deadline=None)
@given(
    names=listings(),
    target=st.sampled_from(TARGETS),
    cap=st.integers(1, 12),
    sample=st.booleans(),
    cuts=st.lists(st.integers(0, 400), max_size=3),
    small_limits=st.booleans(),
)
def test_glob_digest_matches_rendering_the_decoded_list(
    names, target, cap, sample, cuts, small_limits
):
    """Page, shown paths, every path and artifact equal render's over the decoded list,
    whatever the chunking, and counted in small windows (name by name too)."""
    chunks = split(b"".join(n + b"\0" for n in names), cuts)
    with contextlib.ExitStack() as stack:
        if small_limits:
            stack.enter_context(mock.patch.multiple(glob_names, _WINDOW=5))
            stack.enter_context(
                mock.patch.multiple(glob_tree, _WINDOW=5, _NAMES_WINDOW=3, _PROBE_RUNS=2)
            )
        got = digest.digest_glob(chunks, target, cap=cap, sample=sample, artifact=True, every=True)
    page, shown, display, artifact = reference(names, target, cap=cap, sample=sample)
    assert (got.page, got.shown, got.every, got.total) == (page, shown, display, len(names))
    made = got.artifact.decode() if isinstance(got.artifact, bytearray) else got.artifact
    assert made == (artifact if len(names) > len(page.indices) else None)


def page_of(rel: list[str], *, cap: int, sample: bool) -> tuple[list[str], render.GlobPage]:
    """The paths shown and the page digest.digest_glob chooses for an rg listing of ``rel``."""
    raw = b"".join(p.encode() + b"\0" for p in rel)
    got = digest.digest_glob([raw], ROOT, cap=cap, sample=sample, artifact=False, every=False)
    return got.shown, got.page


def test_under_cap_shows_everything_in_mtime_order():
    """A result that fits is shown whole, in rg's (mtime) order, unsampled."""
    shown, page = page_of(["b/1", "a/1", "b/2"], cap=3, sample=True)
    assert shown == ["b/1", "a/1", "b/2"] and not page.sampled


def test_head_mode_keeps_the_mtime_head():
    """Head mode shows the oldest `cap` paths."""
    rel = [f"{g}/{i}" for i in range(5) for g in "ab"]
    shown, page = page_of(rel, cap=4, sample=False)
    assert shown == rel[:4] and not page.sampled


def test_sampling_rotates_in_first_appearance_order_and_groups_the_page():
    """Rotation takes each entry's next path; the page lists entries in first-appearance order."""
    rel = ["b/1", "b/2", "b/3", "b/4", "a/1", "c/1", "a/2", "b/5", "a/3"]
    shown, page = page_of(rel, cap=5, sample=True)
    # Round 1: b/1, a/1, c/1; round 2: b/2, a/2 (cap reached).
    assert shown == ["b/1", "b/2", "a/1", "a/2", "c/1"]
    assert page.sampled and (page.groups_reached, page.groups_total) == (3, 3)


def test_more_groups_than_cap_gives_first_groups_one_path_each():
    """With more entries than the cap, the first `cap` entries get one path each."""
    shown, page = page_of(["a/1", "a/2", "b/1", "c/1", "d/1", "e/1"], cap=3, sample=True)
    assert shown == ["a/1", "b/1", "c/1"]
    assert page.sampled and (page.groups_reached, page.groups_total) == (3, 5)


def test_flat_result_is_the_head_and_not_sampled():
    """Every entry holding one path: the sample is the mtime head, sampled is false."""
    rel = [f"f{i}.txt" for i in range(10)]
    shown, page = page_of(rel, cap=4, sample=True)
    assert shown == rel[:4] and not page.sampled


def test_files_directly_under_root_are_their_own_entries():
    """A file at the top level is an entry of its own; a directory's files share one."""
    shown, page = page_of(["src/a/b.py", "src/c.py", "x.py", "src/d.py"], cap=3, sample=True)
    assert shown == ["src/a/b.py", "src/c.py", "x.py"]
    assert (page.groups_reached, page.groups_total) == (2, 2)


def test_empty_names_and_a_missing_last_nul_are_tolerated():
    """Empty names are never listed and the last name needs no NUL (rg always ends with one)."""
    got = digest.digest_glob(
        [b"\0a/1\0\0", b"b/2"], ROOT, cap=5, sample=True, artifact=True, every=True
    )
    assert (got.total, got.shown, got.every, got.artifact) == (
        2,
        ["a/1", "b/2"],
        ["a/1", "b/2"],
        None,
    )


def test_top_level_entries_are_told_apart_by_their_bytes():
    """Two directories whose names decode to the same text are two entries, not one."""
    names = [b"\xff/1", b"\xff/2", b"\xfe/1", b"\xff/3", b"ok"]
    got = digest.digest_glob(
        [b"\0".join(names) + b"\0"], ROOT, cap=3, sample=True, artifact=False, every=False
    )
    assert got.shown == ["\ufffd/1", "\ufffd/1", "ok"]
    assert (got.page.indices, got.page.groups_total) == ([0, 2, 4], 3)


def test_every_path_only_when_asked():
    """``every=False`` (spill mode) keeps no per-path list; the page and total stay."""
    raw = b"".join(b"d%d/f%d\0" % (i % 3, i) for i in range(50))
    got = digest.digest_glob([raw], ROOT, cap=10, sample=True, artifact=True, every=False)
    assert got.every is None and got.total == 50 and len(got.shown) == 10
    assert got.artifact is not None and got.artifact.count(b"\n") == 50


def synthetic_output(size: int, name) -> bytes:
    """At least ``size`` bytes of ``rg --files --null`` output: ``name(i)`` for i = 0, 1, ..."""
    parts: list[bytes] = []
    total = i = 0
    while total < size:
        parts.append(name(i) + b"\0")
        total += len(parts[-1])
        i += 1
    return b"".join(parts)


@pytest.mark.parametrize(
    ("name", "size", "limits"),
    [
        pytest.param(lambda i: b"d%03d/f%07d.txt" % (i % 100, i), 20_000_000, {}, id="100-dirs"),
        pytest.param(lambda i: b"f%07d.txt" % i, 20_000_000, {}, id="flat-root-files"),
        # Past the directories' budget and the dict's limit (scaled down with the output,
        # for time): the top-level entries only, counted by hash partitions.
        pytest.param(
            lambda i: b"d%07d/f" % i,
            2_000_000,
            {"_MAX_KEYS": 1 << 14, "_WINDOW": 1 << 16, "_MIN_BUDGET": 1 << 18},
            id="one-dir-per-file",
        ),
        # A deep tree, balanced recursively: a few names per directory.
        pytest.param(
            lambda i: b"p%02d/src/m%03d/s%d/f%07d.ts" % (i % 40, i // 40 % 200, i % 3, i),
            8_000_000,
            {},
            id="deep-tree",
        ),
    ],
)
def test_glob_digest_memory_is_a_small_multiple_of_the_output(name, size, limits):
    """Short paths, sampled and spilled: the digest's peak stays under 3x the output, whatever
    the tree's shape (one str per path took ~10x)."""
    raw = synthetic_output(size, name)
    chunks = [raw[i : i + 65536] for i in range(0, len(raw), 65536)]
    del raw
    size = sum(len(c) for c in chunks)
    tracemalloc.start()
    try:
        with contextlib.ExitStack() as stack:
            for module in (glob_names, glob_sample, glob_tree):
                if mine := {k: v for k, v in limits.items() if hasattr(module, k)}:
                    stack.enter_context(mock.patch.multiple(module, **mine))
            got = digest.digest_glob(chunks, ROOT, cap=100, sample=True, artifact=True, every=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got.artifact is not None and len(got.artifact) == size
    assert peak <= 3 * size, f"peak {peak / size:.2f}x the output"


@pytest.mark.parametrize("prefix", ["", "globmem", "/w/a deep/path/to/the/search root"])
def test_a_prefixed_glob_artifact_costs_its_prefixes_not_a_copy(prefix):
    """With a ``path`` prefix the artifact is still made in the names buffer: the digest's
    peak is the output, the prefixes it adds, and small change (the text path took 2.7x)."""
    target = SearchTarget(run_dir="/w", file_arg=None, prefix=prefix, root=prefix or ".")
    raw = synthetic_output(20_000_000, lambda i: b"d%03d/f%07d.txt" % (i % 100, i))
    chunks = [raw[i : i + 65536] for i in range(0, len(raw), 65536)]
    size, count = len(raw), raw.count(b"\0")
    del raw
    tracemalloc.start()
    try:
        got = digest.digest_glob(chunks, target, cap=100, sample=True, artifact=True, every=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    added = count * (len(prefix) + 1 if prefix else 0)
    assert isinstance(got.artifact, bytearray) and len(got.artifact) == size + added
    first = (f"{prefix}/" if prefix else "") + "d000/f0000000.txt\n"
    assert got.artifact.startswith(first.encode())
    # Each growth of a bytearray reserves an eighth more, counted here though never
    # touched (so never resident); the text path peaked at 2.7x.
    assert peak <= (size + added) * 1.25 + 3_000_000, f"peak {peak / size:.2f}x the output"


# --- the glob artifact built in the names buffer itself ----------------------------------
# Valid UTF-8 names shown behind a fixed head (none, or the ``path`` prefix), with nothing
# to escape, become the artifact in place (UTF-8 bytes, the buffer the output was read
# into, grown by one head per name: never a second copy); anything else is decoded and
# escaped as text. Both say the same.


@pytest.mark.parametrize(
    ("names", "prefix", "in_place"),
    [
        ([b"a/1.txt", b"b/2.txt", b"c.txt"] * 40, "", True),
        ([b"a/1.txt", b"b/2.txt"] * 40, "src", True),  # shown under a prefix
        ([b"a/1.txt", b"b/2.txt"] * 40, "src/", True),
        ([b"a/1.txt", b"b/2.txt"] * 40, "/w/\u00e9 x", True),  # a UTF-8 prefix
        ([b"a/1.txt", b"b/2.txt"] * 40, "a\u2028b", True),  # a prefix escaped once
        ([b"a/1.txt", "\u00e9/2.txt".encode()] * 40, "", True),  # UTF-8
        ([b"a/1.txt", "\u00e9/2.txt".encode()] * 40, "src", True),
        ([b"a/1.txt", "b/\u2028.txt".encode()] * 40, "", False),  # a break to escape
        ([b"a/1.txt", "b/\x85.txt".encode()] * 40, "src", False),
        ([b"a/1.txt", b"b/two\rlines.txt"] * 40, "", False),
        ([b"a/1.txt", b"b/new\nline.txt"] * 40, "src", False),
        ([b"./a/1.txt", b"./b/2.txt"] * 40, "", False),  # shown without their ./
        ([b"a/1.txt", b"\xff/2.txt"] * 40, "", False),  # not UTF-8
        ([b"a/1.txt", b"\xff/2.txt"] * 40, "src", False),
    ],
)
def test_a_glob_artifact_is_built_in_place_only_when_it_is_the_names(names, prefix, in_place):
    """The artifact is the buffer itself exactly when the names need no change, and says
    what the text path says in every case."""
    raw = b"".join(n + b"\0" for n in names)
    target = SearchTarget(run_dir="/w", file_arg=None, prefix=prefix, root=prefix or ".")
    got = digest.digest_glob(
        [raw[:100], raw[100:]], target, cap=5, sample=False, artifact=True, every=True
    )
    assert isinstance(got.artifact, bytearray) is in_place
    text = got.artifact.decode() if isinstance(got.artifact, bytearray) else got.artifact
    assert text == "".join(render.one_line(p) + "\n" for p in got.every or [])
    assert text.count("\n") == len(names) == got.total


def _top(name: bytes) -> bytes:
    head, slash, _ = name.partition(b"/")
    return head + slash if slash else b""


@pytest.mark.parametrize(
    "order", ["clustered", "shuffled", "alternating", "clustered then shuffled"]
)
def test_top_level_entries_are_counted_alike_by_runs_or_name_by_name(order, monkeypatch):
    """Names are counted a run under one entry at a time, or name by name once runs turn out
    short: either way every entry's count, in order of first appearance, and the number
    of entries are exact."""
    clustered = [f"d{i // 500}/f{i}".encode() for i in range(3000)]
    shuffled = [f"d{i % 7}/{'sub/' * (i % 2)}f{i}".encode() for i in range(3000)]
    random.Random(7).shuffle(shuffled)
    names = {
        "clustered": clustered,
        "shuffled": shuffled,
        "alternating": [f"{'d1/a' if i % 2 else 'root'}{i}".encode() for i in range(3000)],
        "clustered then shuffled": clustered + shuffled,
    }[order]
    monkeypatch.setattr(glob_names, "_WINDOW", 997)  # many windows, runs cut at their ends
    raw = bytearray(b"".join(n + b"\0" for n in names))
    dirs, groups = glob_names._groups(raw, len(names), cap=5)
    expected = Counter(_top(n) for n in names)
    assert list(dirs.items()) == list(expected.items())
    assert groups == len(expected) - (b"" in expected) + expected[b""]


def test_payload_estimates_count_every_entry_inline_and_the_text():
    """A ``spill: false`` result's estimate: each path (glob) or each match's path and full
    line (grep) with its JSON, and the text; a paged result's entries are not counted."""
    page = render.GlobPage(indices=[0], sampled=False)
    everything = digest.GlobDigest(total=2, page=page, shown=["a"], every=["a", "bb"])
    assert everything.payload_bytes("text") == (1 + 4) + (2 + 4) + 4
    paged = digest.GlobDigest(total=2, page=page, shown=["a"])
    assert paged.payload_bytes("text") == 4
    lines = [(1, "x" * 10), (7, "y")]
    grep = digest.GrepDigest(total=2, files=1, page=[], every=[("src/a.py", lines)])
    assert grep.payload_bytes("") == (8 + 10 + 64) + (8 + 1 + 64)
    assert [m.line for m in grep.matches(every=True)] == ["x" * 10, "y"]
    assert grep.matches(every=False) == []
