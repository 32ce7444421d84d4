"""Pure parsing of rg output."""

from __future__ import annotations

import base64
import json
import os
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fs_search.activities.results import _parse as parse
from fs_search.activities.rg import _command as command
from tests.oracles import by_path


def _match(path: dict, line: dict, number: int) -> bytes:
    message = {
        "type": "match",
        "data": {
            "path": path,
            "lines": line,
            "line_number": number,
            "absolute_offset": 0,
            "submatches": [],
        },
    }
    # As rg writes it: UTF-8 as is, only quotes, backslashes and controls escaped.
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


SUMMARY = b'{"data":{"elapsed_total":{"secs":0}},"type":"summary"}\n'
BEGIN = b'{"type":"begin","data":{"path":{"text":"a.py"}}}\n'


def test_grep_stream_keeps_only_matches():
    """Only match messages become matches; begin and summary messages are skipped."""
    stream = parse.GrepStream()
    data = BEGIN + _match({"text": "a.py"}, {"text": "x = 1\r\n"}, 3) + SUMMARY
    # Feed in awkward pieces to prove line reassembly.
    for i in range(0, len(data), 7):
        stream.feed(data[i : i + 7])
    stream.finish()
    assert by_path(stream) == [("a.py", [(3, "x = 1")])]
    assert stream.total == 1


def test_bytes_fields_are_decoded_lossily():
    """{"bytes": ...} paths and lines are decoded with U+FFFD, never a crash."""
    path = {"bytes": base64.b64encode(b"caf\xe9.txt").decode()}
    line = {"bytes": base64.b64encode(b"na\xefve\n").decode()}
    stream = parse.parse_chunks([_match(path, line, 7) + SUMMARY])
    assert by_path(stream) == [("caf\ufffd.txt", [(7, "na\ufffdve")])]


def test_colons_in_paths_and_lines_survive():
    """Paths and lines with colons are not split (the reason for --json)."""
    stream = parse.parse_chunks([_match({"text": "a:1:b.txt"}, {"text": "k: v: 2\n"}, 9)])
    assert by_path(stream) == [("a:1:b.txt", [(9, "k: v: 2")])]


@pytest.mark.parametrize("line", [b"not json at all\n", b'{"type":"match","data":{}}\n'])
def test_malformed_output_raises(line):
    """Output that is not rg's --json is reported as malformed."""
    with pytest.raises(parse.MalformedOutput):
        parse.parse_chunks([line])


def test_files_ordered_by_path_components_lines_by_number():
    """Files come out ordered by path (component-wise), each file's lines by number."""
    data = b"".join(
        _match({"text": p}, {"text": "x\n"}, n)
        for p, n in [("b.txt", 2), ("a/z.txt", 9), ("a-c.txt", 1), ("b.txt", 1), ("a/z.txt", 3)]
    )
    stream = parse.parse_chunks([data + SUMMARY])
    assert [(p, [n for n, _ in lines]) for p, lines in by_path(stream)] == [
        ("a/z.txt", [3, 9]),
        ("a-c.txt", [1]),
        ("b.txt", [1, 2]),
    ]
    assert stream.total == 5


def test_only_needed_fields_are_parsed_but_full_messages_still_work():
    """Matches parse whether or not the offset/submatch tail is present."""
    full = _match({"text": "a"}, {"text": "q\n"}, 1)
    bare = (
        b'{"type":"match","data":{"path":{"text":"b"},"lines":{"text":"r\\n"},"line_number":2}}\n'
    )
    stream = parse.parse_chunks([full + bare + SUMMARY])
    assert by_path(stream) == [("a", [(1, "q")]), ("b", [(2, "r")])]


@pytest.mark.parametrize(
    ("raw", "stripped"),
    [("a\n", "a"), ("a\r\n", "a"), ("a", "a"), ("a\r", "a\r"), ("\n", ""), ("a\n\n", "a\n")],
)
def test_one_end_of_line_is_stripped(raw, stripped):
    """Only one trailing \\n or \\r\\n is removed from a match's line."""
    stream = parse.parse_chunks([_match({"text": "a"}, {"text": raw}, 1)])
    assert by_path(stream) == [("a", [(1, stripped)])]


@pytest.mark.parametrize(
    ("chunks", "complete"),
    [
        ([BEGIN, SUMMARY], True),
        ([BEGIN + SUMMARY[:10], SUMMARY[10:]], True),
        ([BEGIN, SUMMARY + b"\n\n"], True),
        ([BEGIN], False),
        ([], False),
        ([SUMMARY, BEGIN], False),
    ],
)
def test_ends_with_summary(chunks, complete):
    """A stream is complete only when its last message is rg's summary."""
    assert parse.ends_with_summary(chunks) is complete


# --- linear cost ------------------------------------------------------------------------
# One line of many megabytes arriving in many small chunks must cost its length, not
# chunks²: re-copying the unfinished line on every chunk (``tail + chunk``) makes the
# parse below copy ~390 GB (minutes, caught by the timeout) where a linear one takes well
# under a second. No wall time is asserted; the timeout only catches the quadratic case.

HUGE = 19 * 1024 * 1024
SMALL_CHUNK = 512  # 19 MiB / 512 B = 38,912 chunks


def _pieces(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


@pytest.mark.timeout(60)
def test_one_huge_line_in_many_chunks_parses_in_linear_time():
    """A 19 MiB match line fed in 512-byte chunks parses as cheaply as short lines."""
    text = "x" * HUGE
    data = _match({"text": "big.txt"}, {"text": text + "\n"}, 1) + SUMMARY
    stream = parse.parse_chunks(_pieces(data, SMALL_CHUNK))
    assert stream.total == 1
    [(path, [(number, line)])] = by_path(stream)
    assert (path, number, len(line)) == ("big.txt", 1, HUGE)


@pytest.mark.timeout(60)
def test_unfinished_huge_line_is_finished_once():
    """A 19 MiB last line without its newline (rg cut off) is parsed once at finish()."""
    data = _match({"text": "big.txt"}, {"text": "y" * HUGE}, 4).rstrip(b"\n")
    stream = parse.GrepStream()
    for piece in _pieces(data, SMALL_CHUNK):
        stream.feed(piece)
    assert stream.total == 0
    stream.finish()
    assert stream.total == 1


@pytest.mark.timeout(60)
def test_ends_with_summary_is_linear_over_a_huge_last_line():
    """Looking for the summary behind a 19 MiB last line (no summary) reads it once."""
    chunks = _pieces(BEGIN + b"z" * HUGE, SMALL_CHUNK)
    assert parse.ends_with_summary(chunks) is False
    assert parse.ends_with_summary([*chunks, b"\n", *_pieces(SUMMARY, 7), b"\n"]) is True


@pytest.mark.parametrize("size", [1, 3, 64, 4096])
def test_chunking_never_changes_the_parse(size):
    """However the output is cut, the result is the same as parsing it whole."""
    data = (
        BEGIN
        + _match({"text": "a.py"}, {"text": "one\n"}, 1)
        + _match({"text": "a.py"}, {"text": "two\r\n"}, 2)
        + b"\n"
        + _match({"text": "b/c.py"}, {"text": "three"}, 3)
        + SUMMARY
    )
    whole = parse.parse_chunks([data])
    cut = parse.parse_chunks(_pieces(data, size))
    assert (
        by_path(cut)
        == by_path(whole)
        == [
            ("a.py", [(1, "one"), (2, "two")]),
            ("b/c.py", [(3, "three")]),
        ]
    )
    assert cut.total == 3


@pytest.mark.parametrize(
    "chunks",
    [[BEGIN, b"\n", b"\n", SUMMARY[:5], SUMMARY[5:-1], b"\n", b"\n\n"], [b"\n\n"], [b""]],
)
def test_ends_with_summary_skips_trailing_newlines_across_chunks(chunks):
    """Trailing blank lines, even in chunks of their own, do not hide the last message."""
    assert parse.ends_with_summary(chunks) is (SUMMARY in b"".join(chunks))


# --- the bulk parse agrees with parsing each line on its own -----------------------------
# Matches are parsed in bulk (one regex pass and one JSON parse per chunk) when every line
# of a chunk reads that way, else line by line: whatever rg writes (quotes, backslashes,
# escapes, CRLF, a last line without its newline, non-UTF-8 as base64 "bytes"), both ways
# and any cut into chunks give what json.loads of each message gives.

_TEXTS = st.lists(
    st.sampled_from(["a", "é", '"', "\\", "\\n", "\n", "\r", "\t", "\x00", "\x1b", "☃", "/", " "]),
    max_size=12,
).map("".join)


def _expected(messages: list[tuple[str, str, int]]) -> list[tuple[str, list[tuple[int, str]]]]:
    """The parse by definition: json.loads of each match message, one end of line off."""
    files: dict[str, list[tuple[int, str]]] = {}
    for path, line, number in messages:
        if line.endswith("\r\n"):
            line = line[:-2]
        elif line.endswith("\n"):
            line = line[:-1]
        files.setdefault(path, []).append((number, line))
    ordered = sorted(files.items(), key=lambda item: item[0].split("/"))
    return [(p, sorted(lines)) for p, lines in ordered]


@settings(max_examples=300, deadline=None)
@given(
    files=st.lists(
        st.tuples(
            _TEXTS.filter(bool),
            st.lists(st.tuples(_TEXTS, st.sampled_from(["\n", "\r\n", ""])), max_size=6),
            st.booleans(),
        ),
        max_size=6,
        unique_by=lambda f: f[0],
    ),
    size=st.integers(1, 400),
)
def test_bulk_and_line_by_line_parses_agree(files, size):
    """Any rg output, cut into any chunks, parses to what json.loads of each match says."""
    out = []
    messages = []
    for path, lines, as_bytes in files:
        out.append(BEGIN.replace(b"a.py", json.dumps(path, ensure_ascii=False)[1:-1].encode()))
        for number, (text, eol) in enumerate(lines, 1):
            line = text + eol
            field = (
                {"bytes": base64.b64encode(line.encode()).decode()} if as_bytes else {"text": line}
            )
            out.append(_match({"text": path}, field, number))
            messages.append((path, line, number))
    data = b"".join(out) + SUMMARY
    stream = parse.parse_chunks([data[i : i + size] for i in range(0, len(data), size)])
    assert by_path(stream) == _expected(messages)
    assert stream.total == len(messages)


def test_a_chunk_with_one_unusual_match_is_read_line_by_line():
    """A chunk whose matches are not all plain text (here one base64 line) still parses whole."""
    plain = _match({"text": "a"}, {"text": 'say "hi"\\n\n'}, 1)
    odd = _match({"text": "a"}, {"bytes": base64.b64encode(b"\xff\n").decode()}, 2)
    stream = parse.parse_chunks([BEGIN + plain + odd + SUMMARY])
    assert by_path(stream) == [("a", [(1, 'say "hi"\\n'), (2, "\ufffd")])]


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"match","data":{"path":{"text":"a"},"lines":{"text":"x"},"line_number":1,'
        b'"absolute_offset":0}}\nnot json\n',
        b'{"type":"match","data":{"path":{"text":"a"},"lines":{"text":"\\q"},"line_number":1,'
        b'"absolute_offset":0}}\n',
    ],
)
def test_a_bad_line_beside_good_matches_is_still_malformed(line):
    """Garbage among well-formed matches, or an invalid escape, is reported, not skipped."""
    with pytest.raises(parse.MalformedOutput):
        parse.parse_chunks([line])


# --- real rg over a hostile tree ----------------------------------------------------------
# What rg itself writes for hostile names and contents, parsed in bulk however it is cut,
# gives what json.loads of each match message gives.

HOSTILE_FILES: dict[bytes, bytes] = {
    b"plain.txt": b"".join(b"needle %d\n" % i for i in range(3000)),
    b"crlf.txt": b"needle one\r\nneedle two\r\r\nnot here\r\nneedle\r\n",
    b"no-eol.txt": b"first needle\nlast needle",
    b"escapes.txt": (
        b'needle "quoted" \\n not a newline\n'
        b"needle \\\\ backslashes \\\n"
        b"needle \x01 control \x1b[31m escape \x7f del\n"
        b"needle \t tab \x0c form feed \x0b vtab\n"
        b"needle \xc3\xa9 \xe2\x98\x83 \xf0\x9f\x98\x80 \xe2\x80\xa8 separators\n"
        b"needle \\u000a looks like an escape\n"
    ),
    b"bad-\xff-name.txt": b"needle in a non-UTF-8 name\n",
    b"bad-content.txt": b"needle \xff\xfe not UTF-8\nneedle fine\n",
    b"new\nline.txt": b"needle in a name with a newline\n",
    b'quote"and\\slash.txt': b"needle\n",
    b"huge.txt": b"needle " + b"y" * (3 * 1024 * 1024) + b"\nneedle after the huge line\n",
}


def _by_definition(out: bytes) -> list[tuple[str, list[tuple[int, str]]]]:
    """json.loads of each of rg's match messages, one end of line off, ordered as by_path."""
    messages = []
    for line in out.split(b"\n"):
        if line.startswith(b'{"type":"match"'):
            data = json.loads(line)["data"]
            path, text = parse.decode_field(data["path"]), parse.decode_field(data["lines"])
            messages.append((path, text, data["line_number"]))
    return _expected(messages)


def test_real_rg_output_of_hostile_files_parses_as_json_loads_says(tmp_path, rg_bin):
    """rg --json (grep's argv) over hostile names and contents (non-UTF-8, escapes, a
    newline in a name, CRLF, no last end of line, a 3 MiB line): bulk or not, cut anywhere,
    each match is what json.loads says."""
    for name, content in HOSTILE_FILES.items():
        (tmp_path / os.fsdecode(name)).write_bytes(content)
    out = subprocess.run(
        command.for_grep("needle", rg=rg_bin, threads=1),
        cwd=tmp_path,
        capture_output=True,
        check=True,
    ).stdout
    expected = _by_definition(out)
    assert sum(len(lines) for _, lines in expected) == 3000 + 3 + 2 + 6 + 1 + 2 + 1 + 1 + 2
    for size in (1 << 20, 65536, 4093, 997):
        stream = parse.parse_chunks(_pieces(out, size))
        assert by_path(stream) == expected, size
        assert stream.total == 3018
