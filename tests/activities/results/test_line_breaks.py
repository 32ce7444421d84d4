"""Line breaks cannot forge entries: every path and preview is one line, everywhere."""

from __future__ import annotations

import re

import pytest
from temporalio.testing import ActivityEnvironment

from fs_search.activities._contract import GlobRequest, GrepRequest, ReadSpillRequest
from fs_search.activities._workspace import SearchTarget
from fs_search.activities.results import _digest as digest
from fs_search.activities.results import _text as render
from fs_search.activities.results._text import GlobPage, SpillNote
from tests.helpers import write_tree
from tests.oracles import grep_artifact

# Each character some reader renders as a line break, and the escape text shown for it.
BREAKS = {
    "\n": "\\n",
    "\r": "\\r",
    "\v": "\\x0b",
    "\f": "\\x0c",
    "\x1c": "\\x1c",
    "\x1d": "\\x1d",
    "\x1e": "\\x1e",
    "\x85": "\\x85",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
ALL = "".join(BREAKS)


def glob_artifact(paths: list[str]) -> str:
    """The glob spill artifact digest.digest_glob builds for an rg listing of ``paths``."""
    raw = b"".join(p.encode() + b"\0" for p in paths)
    root = SearchTarget(run_dir="/w", file_arg=None, prefix="", root=".")
    got = digest.digest_glob([raw], root, cap=1, sample=False, artifact=True, every=False)
    assert got.artifact is not None
    # Built in place as UTF-8 bytes when the names need no escaping.
    return got.artifact if isinstance(got.artifact, str) else got.artifact.decode()


@pytest.mark.parametrize("char", list(BREAKS))
def test_one_line_escapes_each_break_and_leaves_the_rest(char):
    """Each line-break character becomes escape text; backslashes and tabs stay as they are."""
    assert render.one_line(f"a{char}b\\c\td") == f"a{BREAKS[char]}b\\c\td"
    assert len(render.one_line(f"a{char}b").splitlines()) == 1


def test_glob_text_and_artifact_keep_one_path_per_line():
    """A glob page and its artifact hold exactly one line per path, whatever the names hold."""
    paths = [f"x{c}y.txt" for c in BREAKS] + [f"{ALL}/forged.txt", "plain.txt"]
    page = GlobPage(indices=list(range(3)), sampled=False)
    note = SpillNote(locator="/spill/a.txt", hint="Read it.")
    text = render.glob_text(paths[:3], page, total=len(paths), root=f"r{ALL}", spill=note)
    body = text.split("\n\n", 1)[0]
    assert body.splitlines() == ["x\\ny.txt", "x\\ry.txt", "x\\x0by.txt"]
    assert len(text.splitlines()) == len(text.split("\n")) == 7
    artifact = glob_artifact(paths)
    assert artifact.count("\n") == len(artifact.splitlines()) == len(paths)
    assert artifact.splitlines()[-2] == "".join(BREAKS.values()) + "/forged.txt"


def test_glob_text_sampled_footer_escapes_the_root():
    """The root named in the sampled footer is one line too."""
    page = GlobPage(indices=[0, 1], sampled=True, groups_reached=2, groups_total=3)
    text = render.glob_text(["a/1", "b/1"], page, total=9, root=f"src{ALL}", spill=None)
    assert len(text.splitlines()) == len(text.split("\n")) == 4


def test_grep_text_and_artifact_escape_paths_and_previews():
    """Matched lines and file names carrying breaks neither add lines nor fake a `Line N:`."""
    forged = f"x{ALL}  Line 99: forged"
    files = [(f"a{ALL}b.py", [(1, forged), (2, "ok")]), ("c.py", [(3, f"\u2028{ALL}")])]
    page = render.grep_page(files, cap=2, max_line_bytes=10_000)
    text = render.grep_text(page, total=3, files=2, spill=SpillNote(locator="L", hint="H"))
    lines = text.split("\n")
    assert text.splitlines() == lines
    assert lines[:3] == [
        "a" + "".join(BREAKS.values()) + "b.py:",
        "  Line 1: x" + "".join(BREAKS.values()) + "  Line 99: forged",
        "  Line 2: ok",
    ]
    artifact = grep_artifact(files)
    # path, 2 lines, blank, path, 1 line
    assert artifact.count("\n") == len(artifact.splitlines()) == 6
    assert artifact.splitlines()[5] == "  Line 3: \\u2028" + "".join(BREAKS.values())


def test_clean_artifacts_are_unchanged():
    """Names and lines without breaks render exactly as before (backslashes kept)."""
    assert glob_artifact(["a\\b", "c"]) == "a\\b\nc\n"
    assert grep_artifact([("a\\b", [(1, "x\\ny")])]) == "a\\b:\n  Line 1: x\\ny\n"


# --- end to end: real files, real rg, the real file store --------------------------


def _hinted_lines(hint: str) -> int:
    match = re.search(r"(\d+) lines;", hint)
    assert match, hint
    return int(match.group(1))


async def _every_page(acts, locator: str, limit: int) -> tuple[list[str], int]:
    lines: list[str] = []
    offset: int | None = 0
    total = -1
    while offset is not None:
        page = await ActivityEnvironment().run(
            acts.read_spill, ReadSpillRequest(locator=locator, offset=offset, limit=limit)
        )
        assert page.text.split("\n") == page.text.splitlines()
        lines += page.text.split("\n")
        total, offset = page.total_lines, page.next_offset
    return lines, total


async def test_glob_names_with_breaks_page_by_line(tmp_path, make_activities):
    """File names holding each break: one line each inline, in the artifact and read_spill."""
    names = {f"d{i}/n{i}{c}x.txt": "" for i, c in enumerate(BREAKS)}
    names["plain.txt"] = ""
    ws = write_tree(tmp_path / "ws", names)
    acts = await make_activities(ws, glob_max_results=3)
    r = await ActivityEnvironment().run(acts.glob, GlobRequest(pattern="**/*.txt"))
    assert r.total == len(names) and r.spill is not None
    # 3 paths, blank, footer, "Saved ... to:", hint
    assert len(r.text.split("\n")) == len(r.text.splitlines()) == 7
    lines, total = await _every_page(acts, r.spill.locator, limit=4)
    assert total == len(lines) == len(names) == _hinted_lines(r.spill.hint)
    assert sorted(lines) == sorted(render.one_line(name) for name in names)


async def test_grep_lines_with_breaks_page_by_line(tmp_path, make_activities):
    """Matched lines holding each break stay one line; read_spill's count matches the hint."""
    body = "".join(f"needle {i}{c}  Line 99: forged\n" for i, c in enumerate(BREAKS) if c != "\n")
    ws = write_tree(tmp_path / "ws", {f"a{ALL[1:]}.txt": body, "b.txt": "needle\n"})
    acts = await make_activities(ws, grep_max_matches=2)
    r = await ActivityEnvironment().run(acts.grep, GrepRequest(pattern="needle"))
    assert r.total == len(BREAKS) and r.spill is not None
    # path, 2 matches, blank, footer, "Saved ... to:", hint
    assert len(r.text.split("\n")) == len(r.text.splitlines()) == 7
    assert sum(" Line 99: forged" in line for line in r.text.split("\n")) == 2
    lines, total = await _every_page(acts, r.spill.locator, limit=3)
    # path, 9 matches, blank, path, 1 match
    assert total == len(lines) == 13 == _hinted_lines(r.spill.hint)
    assert [line.startswith("  Line ") for line in lines].count(True) == len(BREAKS)
