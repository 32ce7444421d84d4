"""The grep digest, whole or split in two parts (a large output's head in a thread, its tail
in a helper, each rendering its own files' artifact blocks): the same page, counts, every
match and artifact as a plain reading of rg's messages, wherever the output is cut."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from fs_search.activities._workspace import SearchTarget
from fs_search.activities.results import _digest as digest
from fs_search.activities.results import _text as render
from fs_search.activities.results._offload import halves

TARGET = SearchTarget(run_dir="/w/src", file_arg=None, prefix="src", root="src")
# Path parts and line texts, hostile ones included: line breaks of every kind a reader
# renders, a Unicode separator, a carriage return before the newline, a backslash.
NAMES = ["a", "b", "a b", "é", "x\ny", "u\u2028v", "c\\d", "."]
TEXTS = ["needle", "needle \r", "two\rlines", "form\ffeed", "sep\u2029", "é" * 30, ""]


def _message(kind: str, data: dict) -> bytes:
    return json.dumps({"type": kind, "data": data}, separators=(",", ":")).encode() + b"\n"


@st.composite
def outputs(draw):
    """rg --json output: files with their matches together, in line order; and the matches
    as (path, number, text)."""
    paths = draw(st.lists(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map("/".join),
                          unique=True, max_size=8))  # fmt: skip
    raw, matches = [], []
    for path in paths:
        raw.append(_message("begin", {"path": {"text": path}}))
        numbers = sorted(draw(st.sets(st.integers(1, 500), min_size=1, max_size=12)))
        for number in numbers:
            text = draw(st.sampled_from(TEXTS))
            raw.append(
                _message(
                    "match",
                    {
                        "path": {"text": path},
                        "lines": {"text": text + "\n"},
                        "line_number": number,
                        "absolute_offset": 0,
                        "submatches": [],
                    },
                )
            )
            # The line without its end of line: its \n, or its \r\n.
            matches.append((path, number, text.removesuffix("\r")))
        raw.append(_message("end", {"path": {"text": path}, "binary_offset": None}))
    raw.append(_message("summary", {"elapsed_total": {"secs": 0}}))
    return b"".join(raw), matches


def reference(matches, *, cap: int, max_line_bytes: int):
    """Page, files, every match and artifact from the matches themselves."""
    by_path: dict[str, list[tuple[int, str]]] = {}
    for path, number, text in matches:
        by_path.setdefault(path, []).append((number, text))
    ordered = [
        (TARGET.display(p), sorted(by_path[p])) for p in sorted(by_path, key=lambda p: p.split("/"))
    ]
    flat = [(p, n, t) for p, lines in ordered for n, t in lines]
    page = []
    for path, number, text in flat[:cap]:
        shown, cut = render.cut_utf8(text, max_line_bytes)
        page.append(render.Line(path, number, shown, cut))
    blocks = []
    for path, lines in ordered:
        head = [f"{render.one_line(path)}:"]
        blocks.append("\n".join(head + [f"  Line {n}: {render.one_line(t)}" for n, t in lines]))
    return page, len(ordered), ordered, "\n\n".join(blocks) + "\n"


@settings(max_examples=300, deadline=None)
@given(
    output=outputs(),
    cap=st.integers(1, 15),
    max_line_bytes=st.sampled_from([4, 20, 1000]),
    spill=st.booleans(),
    chunk=st.integers(1, 300),
)
def test_a_split_grep_digest_is_the_digest_of_the_whole(output, cap, max_line_bytes, spill, chunk):
    """Whole or cut at its middle line end (a file's matches then in both parts), the
    digest is what the messages say: page, totals, every match, artifact."""
    raw, matches = output
    page, files, ordered, artifact = reference(matches, cap=cap, max_line_bytes=max_line_bytes)
    kw = {"cap": cap, "max_line_bytes": max_line_bytes, "artifact": spill, "every": not spill}
    chunks = [raw[i : i + chunk] for i in range(0, len(raw), chunk)]
    head, tail = halves(list(chunks), len(raw))
    part = digest.grep_part(list(tail), TARGET, **kw)
    for got in (
        digest.digest_grep(list(chunks), TARGET, **kw),
        digest.digest_grep(head, TARGET, rest=lambda: part, **kw),
    ):
        assert (got.total, got.files, got.page) == (len(matches), files, page)
        assert got.every == (None if spill else ordered)
        over = len(matches) > cap
        assert got.artifact == (artifact if spill and over else None)


def test_a_helpers_part_carries_a_page_of_lines_not_every_line():
    """A part's lines are at most the page's worth (what crosses back from a helper), its
    artifact as one block of text per file."""
    matches = [("f", n, f"needle {n}") for n in range(1, 401)] + [("g", 1, "needle")]
    raw = b"".join(
        _message(
            "match",
            {"path": {"text": p}, "lines": {"text": t + "\n"}, "line_number": n,
             "absolute_offset": 0, "submatches": []},
        )
        for p, n, t in matches
    )  # fmt: skip
    kw = {"cap": 250, "max_line_bytes": 100, "artifact": True, "every": False}
    part = digest.grep_part([raw], TARGET, **kw)
    assert part.total == 401 and part.counts == {"f": 400, "g": 1}
    assert list(part.lines) == ["f"] and len(part.lines["f"]) == 250
    assert part.blocks is not None and part.blocks["f"].count("\n") == 399
