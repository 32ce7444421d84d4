"""The glob digest: the same page, paths and artifact as rendering the decoded list, in
memory that is a small multiple of rg's output."""

from __future__ import annotations

import contextlib
import tracemalloc
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fs_search.activities import digest, render
from fs_search.activities.paths import SearchTarget

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
    """What the page, the paths shown, every path and the artifact are: rendered from the
    decoded list, one ``str`` per path."""
    rel = [n.decode("utf-8", "replace") for n in names]
    display = [target.display(r) for r in rel]
    page = render.glob_page(rel, cap=cap, sample=sample)
    return page, [display[i] for i in page.indices], display, render.glob_artifact(display)


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
    whatever the chunking, and past the limit of directories counted in a dict too."""
    chunks = split(b"".join(n + b"\0" for n in names), cuts)
    limits = {"_MAX_KEYS": 1, "_WINDOW": 5} if small_limits else {}
    with mock.patch.multiple(digest, **limits) if limits else contextlib.nullcontext():
        got = digest.glob(chunks, target, cap=cap, sample=sample, artifact=True, every=True)
    page, shown, display, artifact = reference(names, target, cap=cap, sample=sample)
    assert (got.page, got.shown, got.every, got.total) == (page, shown, display, len(names))
    assert got.artifact == (artifact if len(names) > len(page.indices) else None)


def test_empty_names_and_a_missing_last_nul_are_tolerated():
    """Empty names are never listed and the last name needs no NUL (rg always ends with one)."""
    got = digest.glob([b"\0a/1\0\0", b"b/2"], ROOT, cap=5, sample=True, artifact=True, every=True)
    assert (got.total, got.shown, got.every, got.artifact) == (
        2,
        ["a/1", "b/2"],
        ["a/1", "b/2"],
        None,
    )


def test_top_level_entries_are_told_apart_by_their_bytes():
    """Two directories whose names decode to the same text are two entries, not one."""
    names = [b"\xff/1", b"\xff/2", b"\xfe/1", b"\xff/3", b"ok"]
    got = digest.glob(
        [b"\0".join(names) + b"\0"], ROOT, cap=3, sample=True, artifact=False, every=False
    )
    assert got.shown == ["\ufffd/1", "\ufffd/1", "ok"]
    assert (got.page.indices, got.page.groups_total) == ([0, 2, 4], 3)


def test_every_path_only_when_asked():
    """``every=False`` (spill mode) keeps no per-path list; the page and total stay."""
    raw = b"".join(b"d%d/f%d\0" % (i % 3, i) for i in range(50))
    got = digest.glob([raw], ROOT, cap=10, sample=True, artifact=True, every=False)
    assert got.every is None and got.total == 50 and len(got.shown) == 10
    assert got.artifact is not None and got.artifact.count("\n") == 50


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
        # Past the dict's limit (scaled down with the output, for time): hash partitions.
        pytest.param(
            lambda i: b"d%07d/f" % i,
            2_000_000,
            {"_MAX_KEYS": 1 << 14, "_WINDOW": 1 << 16},
            id="one-dir-per-file",
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
        with mock.patch.multiple(digest, **limits) if limits else contextlib.nullcontext():
            got = digest.glob(chunks, ROOT, cap=100, sample=True, artifact=True, every=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got.artifact is not None and len(got.artifact) == size
    assert peak <= 3 * size, f"peak {peak / size:.2f}x the output"
