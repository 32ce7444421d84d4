"""Pure rendering: pages, previews, footers (the glob sampling rule is test_digest's)."""

from __future__ import annotations

import pytest

from fs_search.activities._contract import ReadSpillResult
from fs_search.activities.results import _text as render
from fs_search.activities.results._text import GlobPage, Line, SpillNote
from tests.oracles import grep_artifact


def test_under_cap_has_no_footer():
    """A result that fits is its paths one per line, nothing else."""
    page = GlobPage(indices=[0, 1, 2], sampled=False)
    assert render.glob_text(["b/1", "a/1", "b/2"], page, total=3, root=".", spill=None) == (
        "b/1\na/1\nb/2"
    )


def test_exactly_at_cap_is_not_truncated():
    """total == cap is under the cap: no footer."""
    rel = [f"a/{i}" for i in range(5)]
    page = GlobPage(indices=list(range(5)), sampled=False)
    text = render.glob_text(rel, page, total=5, root=".", spill=None)
    assert "Showing" not in text and text.count("\n") == 4


def test_sampled_footer_names_basis_reach_and_asks_to_narrow():
    """The sampled footer states the basis and N of M entries, and asks to narrow when N < M."""
    page = GlobPage(indices=[0, 1, 2], sampled=True, groups_reached=3, groups_total=5)
    note = SpillNote(locator="/spill/x.txt", hint="Read it with read.")
    text = render.glob_text(["a/1", "b/1", "c/1"], page, total=40, root="src", spill=note)
    assert text.startswith("a/1\nb/1\nc/1\n\n")
    assert "sampled across the top-level entries of src" in text
    assert "Reached 3 of 5 top-level entries; narrow `path`" in text
    assert "37 more not shown" in text
    assert "Saved the complete list (40 paths, oldest modified first) to: /spill/x.txt" in text
    assert text.endswith("Read it with read.")


def test_sampled_footer_without_narrowing_when_all_reached():
    """No request to narrow when every entry was reached."""
    page = GlobPage(indices=[0, 1], sampled=True, groups_reached=2, groups_total=2)
    text = render.glob_text(["a/1", "b/1"], page, total=9, root=".", spill=None)
    assert "Reached 2 of 2 top-level entries." in text and "narrow" not in text


def test_failed_spill_says_the_full_result_could_not_be_saved():
    """A failing store leaves the page and says the complete result could not be saved."""
    page = GlobPage(indices=[0], sampled=False)
    text = render.glob_text(["a"], page, total=2, root=".", spill=SpillNote(error="boom"))
    assert "Could not save the complete list (2 paths, oldest modified first) (boom)" in text


def test_no_spill_footer_counts_omitted_without_locator():
    """spill: false renders the page with an omitted count and no locator."""
    page = GlobPage(indices=[0], sampled=False)
    text = render.glob_text(["a"], page, total=3, root=".", spill=None)
    assert "2 more not shown" in text and "Saved" not in text


def test_empty_results():
    """Empty results read `No files found` / `No matches found`."""
    assert (
        render.glob_text([], GlobPage([], False), total=0, root=".", spill=None) == "No files found"
    )
    assert render.grep_text([], total=0, files=0, spill=None) == "No matches found"


def test_grep_grouping_format():
    """Matches are grouped under `<path>:` with `  Line N: ` lines and blank lines between files."""
    lines = [Line("a.py", 12, "x"), Line("a.py", 40, "y"), Line("b.py", 3, "z")]
    assert render.grep_text(lines, total=3, files=2, spill=None) == (
        "a.py:\n  Line 12: x\n  Line 40: y\n\nb.py:\n  Line 3: z"
    )


def test_grep_footer_and_artifact():
    """Over the cap the footer counts omitted lines; the artifact holds every full line."""
    files = [("a.py", [(i, "t" * 10) for i in range(1, 6)])]
    page = render.grep_page(files, cap=2, max_line_bytes=4)
    text = render.grep_text(page, total=5, files=1, spill=SpillNote(locator="L", hint="H"))
    assert "  Line 1: tttt (line truncated)" in text
    assert "(Showing 2 of 5 matching lines in 1 files. 3 more not shown.)" in text
    assert "Saved all 5 matching lines (full text) to: L\nH" in text
    artifact = grep_artifact(files + [("b.py", [(7, "u")])])
    assert artifact.count("tttttttttt") == 5 and "truncated" not in artifact
    assert artifact.endswith("  Line 5: tttttttttt\n\nb.py:\n  Line 7: u\n")


def test_grep_page_takes_matches_across_files_in_order():
    """The page is the first `cap` matches, files in order and lines in order."""
    files = [("a", [(1, "x"), (2, "y")]), ("b", [(5, "z")]), ("c", [(1, "w")])]
    page = render.grep_page(files, cap=3, max_line_bytes=100)
    assert [(line.path, line.line_number) for line in page] == [("a", 1), ("a", 2), ("b", 5)]


@pytest.mark.parametrize(
    ("text", "cap", "expected", "cut"),
    [
        ("abc", 3, "abc", False),
        ("abcd", 3, "abc", True),
        ("é" * 3, 5, "éé", True),  # 2-byte chars: never split one
        ("日本語", 7, "日本", True),  # 3-byte chars
        ("a😀b", 4, "a", True),  # 4-byte char dropped whole
        ("a😀b", 5, "a😀", True),
    ],
)
def test_preview_cut_on_utf8_boundary(text, cap, expected, cut):
    """Previews are cut at the byte cap without splitting a character."""
    assert render.cut_utf8(text, cap) == (expected, cut)
    assert len(render.cut_utf8(text, cap)[0].encode()) <= cap


def test_paths_with_newlines_stay_on_one_line():
    """A name containing a newline is shown escaped, one path per line."""
    page = GlobPage(indices=[0], sampled=False)
    assert render.glob_text(["a\nb"], page, total=1, root=".", spill=None) == "a\\nb"


def test_partial_note():
    """A partial result says some paths could not be read."""
    text = render.grep_text([Line("a", 1, "x")], total=1, files=1, spill=None, partial=True)
    assert text.endswith(render.PARTIAL_NOTE)


def _page(text: str, offset: int, next_offset: int | None, total: int) -> ReadSpillResult:
    return ReadSpillResult(
        locator="L", text=text, offset=offset, next_offset=next_offset, total_lines=total
    )


def test_read_spill_text_footer():
    """A read_spill page says where it is and how to continue."""
    assert render.read_spill_text(_page("a\nb", 0, 2, 5)).endswith(
        "(Lines 1-2 of 5; continue with offset=2.)"
    )
    assert render.read_spill_text(_page("e", 4, None, 5)).endswith(
        "(Lines 5-5 of 5; end of the result.)"
    )


@pytest.mark.parametrize("offset", [3, 10])
def test_read_spill_past_the_end_says_where_the_lines_are(offset):
    """Past the last line: no nonsense range, but how many lines there are."""
    text = render.read_spill_text(_page("", offset, None, 3))
    assert (
        text
        == f"(No lines at offset {offset}: the result has 3 lines, so offsets run from 0 to 2.)"
    )
    assert (
        render.read_spill_text(_page("", 0, None, 0)) == "(The result is empty: it has no lines.)"
    )
