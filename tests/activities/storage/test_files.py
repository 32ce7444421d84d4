"""The SpillStore pieces: keys, paging, the file:// store's confinement and retention."""

from __future__ import annotations

import os
import random
import time
import tracemalloc
from pathlib import Path

import pytest

from fs_search.activities._errors import SearchError
from fs_search.activities.results._paging import MAX_PAGE_BYTES, Pager
from fs_search.activities.storage import FileSpillStore, SpillKey
from tests.helpers import Link, write_tree
from tests.oracles import page_of


def test_keys_are_deterministic_and_percent_encoded():
    """A key is workspace/workflow/run/activity.tool, each segment percent-encoded (no '/', '..')."""
    key = SpillKey("../a/b", "r-1", "7", "grep", workspace="repo.main")
    assert key.relpath() == "repo%2Emain/%2E%2E%2Fa%2Fb/r-1/7.grep.txt"
    assert key.relpath() == SpillKey("../a/b", "r-1", "7", "grep", workspace="repo.main").relpath()
    assert SpillKey("", "", "", "glob", workspace="").relpath() == "null/null/null/null.glob.txt"
    assert SpillKey("wf", "run", "1", "glob").relpath() == "_unnamed/wf/run/1.glob.txt"


def test_page_of_lines_and_next_offset():
    """Pages are by line with the next offset, or None at the end."""
    text = "".join(f"l{i}\n" for i in range(10))
    page = page_of(text, locator="L", offset=3, limit=4)
    assert (page.text, page.next_offset, page.total_lines) == ("l3\nl4\nl5\nl6", 7, 10)
    assert page_of(text, locator="L", offset=8, limit=4).next_offset is None
    assert page_of(text, locator="L", offset=50, limit=4).text == ""


def test_page_of_caps_bytes_and_cuts_a_giant_line():
    """A page never carries more than MAX_PAGE_BYTES; one giant line is cut and marked."""
    text = ("x" * 100_000 + "\n") * 5 + "y" * (MAX_PAGE_BYTES * 2) + "\n"
    first = page_of(text, locator="L", offset=0, limit=100)
    assert len(first.text.encode()) <= MAX_PAGE_BYTES and first.next_offset == 2
    giant = page_of(text, locator="L", offset=5, limit=100)
    assert giant.text.endswith("(line truncated)") and len(giant.text.encode()) <= MAX_PAGE_BYTES
    assert giant.next_offset is None


async def test_file_store_round_trip_and_overwrite(tmp_path):
    """Saving twice under one key overwrites; the locator is the absolute path."""
    store = FileSpillStore(tmp_path / "spill")
    key = SpillKey("wf", "run", "1", "glob")
    first = await store.save(key, "a\nb\n")
    second = await store.save(key, "c\n")
    assert first.locator == second.locator == str(tmp_path / "spill/_unnamed/wf/run/1.glob.txt")
    assert Path(second.locator).read_text() == "c\n"
    assert "read tool" in second.hint
    page = await store.read(f"file://{second.locator}", offset=0, limit=10)
    assert page.text == "c" and page.total_lines == 1


async def test_file_store_refuses_symlinks_out_of_the_store(tmp_path):
    """A symlink planted inside the store that points outside is not followed."""
    outside = write_tree(tmp_path, {"secret.txt": "secret\n"}) / "secret.txt"
    store = FileSpillStore(tmp_path / "spill")
    await store.save(SpillKey("wf", "run", "1", "glob"), "x\n")
    write_tree(tmp_path / "spill/_unnamed/wf/run", {"evil.txt": Link(outside)})
    with pytest.raises(SearchError) as info:
        await store.read(str(tmp_path / "spill/_unnamed/wf/run/evil.txt"), offset=0, limit=5)
    assert info.value.code == "INVALID_ARGUMENT"


async def test_file_store_refuses_a_link_from_one_workspace_into_another(tmp_path):
    """A workspace's directory in the store linked to another's does not lend it its name."""
    store = FileSpillStore(tmp_path / "spill")
    theirs = await store.save(SpillKey("wf", "run", "1", "glob", workspace="b"), "b's\n")
    write_tree(tmp_path / "spill", {"a": Link(tmp_path / "spill/b")})
    through_a = str(tmp_path / "spill/a/wf/run/1.glob.txt")
    assert Path(through_a).read_text() == "b's\n"  # the link works, for anyone but the store
    with pytest.raises(SearchError) as info:
        await store.read(through_a, offset=0, limit=5, workspace="a")
    assert info.value.code == "INVALID_ARGUMENT"
    page = await store.read(theirs.locator, offset=0, limit=5, workspace="b")
    assert page.text == "b's"


async def test_file_store_prunes_artifacts_older_than_its_ttl(tmp_path):
    """Artifacts past the TTL go from every workspace, emptied directories with them; newer stay."""
    store = FileSpillStore(tmp_path / "spill", ttl_hours=1)
    old = Path(
        (await store.save(SpillKey("old", "run", "1", "glob", workspace="a"), "x\n")).locator
    )
    new = Path(
        (await store.save(SpillKey("new", "run", "1", "glob", workspace="a"), "y\n")).locator
    )
    gone = Path(
        (await store.save(SpillKey("wf", "run", "1", "grep", workspace="b"), "z\n")).locator
    )
    two_hours_ago = time.time() - 7200
    for path in (old, gone):
        os.utime(path, (two_hours_ago, two_hours_ago))
    assert await store.prune() == 2
    assert not old.exists() and not (tmp_path / "spill/a/old").exists()
    assert not gone.exists() and not (tmp_path / "spill/b").exists()
    assert new.exists() and new == tmp_path / "spill/a/new/run/1.glob.txt"


async def test_missing_artifact_is_search_failed(tmp_path):
    """A pruned or never-written artifact inside the store is SEARCH_FAILED, not a crash."""
    store = FileSpillStore(tmp_path / "spill")
    with pytest.raises(SearchError) as info:
        await store.read(str(tmp_path / "spill/ws/wf/run/9.grep.txt"), offset=0, limit=5)
    assert info.value.code == "SEARCH_FAILED" and "expired" in info.value.message


def test_page_of_splits_by_newline_alone():
    """Only `\\n` ends a line: other break characters stay inside the line."""
    others = "\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
    text = f"a{others}b\nc\r\nd"
    page = page_of(text, locator="L", offset=0, limit=10)
    assert page.text.split("\n") == [f"a{others}b", "c\r", "d"] and page.total_lines == 3
    assert page_of(text, locator="L", offset=1, limit=1).text == "c\r"
    assert page_of("", locator="L", offset=0, limit=5).total_lines == 0


async def test_file_store_total_lines_agrees_with_the_hint(tmp_path):
    """read_spill's total_lines is the count the save hint gave, whatever the text holds."""
    store = FileSpillStore(tmp_path / "spill")
    text = "".join(f"l{i}\u2028x\x85y\r\n" for i in range(5)) + "tail"
    ref = await store.save(SpillKey("wf", "run", "1", "grep"), text)
    page = await store.read(ref.locator, offset=0, limit=100)
    assert page.total_lines == 6 and f"({page.total_lines} lines;" in ref.hint
    assert page.text.split("\n")[-1] == "tail"


def _reference_page(text: str, offset: int, limit: int) -> tuple[str, int | None, int]:
    """The whole-text paging read_spill is defined by (lines split by newline alone)."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    out, size, index = [], 0, offset
    while index < len(lines) and len(out) < limit:
        line = lines[index]
        encoded = len(line.encode()) + 1
        if encoded > MAX_PAGE_BYTES - size:
            if out:
                break
            cut = line.encode()[: max(MAX_PAGE_BYTES - size - 20, 0)].decode("utf-8", "ignore")
            line = cut + " (line truncated)"
        out.append(line)
        size += encoded
        index += 1
    return "\n".join(out), (index if index < len(lines) else None), len(lines)


@pytest.mark.parametrize("seed", range(40))
def test_pager_fed_in_any_blocks_matches_whole_text_paging(seed):
    """Fed in blocks of any size, the streaming pager gives the page of the whole text."""
    rng = random.Random(seed)
    sizes = [0, 1, 5, 40, MAX_PAGE_BYTES // 3, MAX_PAGE_BYTES + 7]
    text = "".join(
        rng.choice(["", "é", "日本", "x" * rng.choice(sizes)]) + rng.choice(["\n", "\n", ""])
        for _ in range(rng.randint(0, 30))
    )
    raw = text.encode()
    offset, limit = rng.randint(0, 12), rng.randint(1, 8)
    for block in (1, 3, 4096, len(raw) or 1):
        pager = Pager(offset=offset, limit=limit)
        for start in range(0, len(raw), block):
            pager.feed(raw[start : start + block])
        got = pager.result("L")
        assert (got.text, got.next_offset, got.total_lines) == _reference_page(text, offset, limit)


@pytest.mark.parametrize("offset", [0, 400_000, 899_990])
async def test_reading_a_page_of_a_large_artifact_holds_only_the_page(tmp_path, offset):
    """A page of a 50 MB artifact: memory stays far below the artifact's size."""
    store = FileSpillStore(tmp_path / "spill")
    key = SpillKey("wf", "run", "1", "grep")
    line = "  Line 1: " + "x" * 45 + "\n"  # 56 bytes
    count = 50 * 1024 * 1024 // len(line)
    target = tmp_path / "spill" / key.relpath()
    target.parent.mkdir(parents=True)
    with open(target, "w") as f:
        for _ in range(count // 1000):
            f.write(line * 1000)
    tracemalloc.start()
    try:
        page = await store.read(str(target), offset=offset, limit=2000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert page.total_lines == count // 1000 * 1000 and target.stat().st_size > 50_000_000
    assert page.text.split("\n") == [line[:-1]] * min(2000, page.total_lines - offset)
    assert peak < 5 * 1024 * 1024, peak


async def test_file_store_saves_an_artifact_given_as_its_utf8_bytes(tmp_path):
    """A glob artifact built in place arrives as UTF-8 bytes: written as is, lines counted."""
    store = FileSpillStore(tmp_path / "spill")
    ref = await store.save(SpillKey("wf", "run", "1", "glob"), bytearray("a\nb\u00e9\n".encode()))
    assert Path(ref.locator).read_bytes() == "a\nb\u00e9\n".encode() and "2 lines" in ref.hint
    page = await store.read(f"file://{ref.locator}", offset=1, limit=10)
    assert page.text == "b\u00e9" and page.total_lines == 2
