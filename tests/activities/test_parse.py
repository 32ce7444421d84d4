"""Pure parsing of rg output."""

from __future__ import annotations

import base64
import json

import pytest

from fs_search.activities import parse


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
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


SUMMARY = b'{"data":{"elapsed_total":{"secs":0}},"type":"summary"}\n'
BEGIN = b'{"type":"begin","data":{"path":{"text":"a.py"}}}\n'


def test_glob_paths_split_on_nul_and_decode_lossily():
    """--null output splits unambiguously, even names with newlines; bad UTF-8 becomes U+FFFD."""
    out = b"a.py\0dir/with\nnewline.txt\0bad\xff.txt\0"
    assert parse.glob_paths(out) == ["a.py", "dir/with\nnewline.txt", "bad\ufffd.txt"]
    assert parse.glob_paths(b"") == []


def test_grep_stream_keeps_matches_and_marks_complete():
    """Only match messages become matches; the summary marks the stream complete."""
    stream = parse.GrepStream()
    data = BEGIN + _match({"text": "a.py"}, {"text": "x = 1\r\n"}, 3) + SUMMARY
    # Feed in awkward pieces to prove line reassembly.
    for i in range(0, len(data), 7):
        stream.feed(data[i : i + 7])
    matches = stream.finish()
    assert matches == [parse.Match("a.py", 3, "x = 1")]
    assert stream.complete


def test_grep_stream_without_summary_is_incomplete():
    """A stream cut before its summary is not complete."""
    stream = parse.parse_grep(_match({"text": "a"}, {"text": "x\n"}, 1))
    assert not stream.complete and len(stream.matches) == 1


def test_bytes_fields_are_decoded_lossily():
    """{"bytes": ...} paths and lines are decoded with U+FFFD, never a crash."""
    path = {"bytes": base64.b64encode(b"caf\xe9.txt").decode()}
    line = {"bytes": base64.b64encode(b"na\xefve\n").decode()}
    stream = parse.parse_grep(_match(path, line, 7) + SUMMARY)
    assert stream.matches == [parse.Match("caf\ufffd.txt", 7, "na\ufffdve")]


def test_colons_in_paths_and_lines_survive():
    """Paths and lines with colons are not split (the reason for --json)."""
    stream = parse.parse_grep(_match({"text": "a:1:b.txt"}, {"text": "k: v: 2\n"}, 9))
    assert stream.matches[0] == parse.Match("a:1:b.txt", 9, "k: v: 2")


@pytest.mark.parametrize("line", [b"not json at all\n", b'{"type":"match","data":{}}\n'])
def test_malformed_output_raises(line):
    """Output that is not rg's --json is reported as malformed."""
    with pytest.raises(parse.MalformedOutput):
        parse.parse_grep(line)


def test_sort_by_path_components_then_line():
    """Matches are ordered by path (component-wise) then line number."""
    ms = [
        parse.Match("b.txt", 2, ""),
        parse.Match("a/z.txt", 9, ""),
        parse.Match("a-c.txt", 1, ""),
        parse.Match("b.txt", 1, ""),
        parse.Match("a/z.txt", 3, ""),
    ]
    ordered = [(m.path, m.line_number) for m in parse.sort_matches(ms)]
    assert ordered == [("a/z.txt", 3), ("a/z.txt", 9), ("a-c.txt", 1), ("b.txt", 1), ("b.txt", 2)]


@pytest.mark.parametrize(
    ("raw", "stripped"),
    [("a\n", "a"), ("a\r\n", "a"), ("a", "a"), ("a\r", "a\r"), ("\n", ""), ("a\n\n", "a\n")],
)
def test_strip_eol(raw, stripped):
    """Only one trailing \\n or \\r\\n is removed."""
    assert parse.strip_eol(raw) == stripped
