"""rg exit codes and stderr mapped to the contract."""

from __future__ import annotations

import pytest

from fs_search.activities._contract import ErrorCode
from fs_search.activities._errors import SearchError
from fs_search.activities.rg._outcome import PatternSuspect, pattern_error_message, rg_outcome


def _code(**kwargs):
    with pytest.raises(SearchError) as info:
        rg_outcome(**kwargs)
    return info.value.code


def test_exit_0_and_1_are_results():
    """0 is results and 1 is an empty search: neither is an error."""
    assert rg_outcome(0, "", produced_output=True, complete=True) is False
    assert rg_outcome(1, "", produced_output=True, complete=True) is False


@pytest.mark.parametrize(
    "stderr",
    [
        "rg: regex parse error:\n    (\n    ^\nerror: unclosed group",
        "rg: error parsing glob 'a[': unclosed character class; missing ']'",
        'rg: the literal "\\n" is not allowed in a regex',
        "rg: regex parse error:\n error: look-around, including look-ahead and look-behind, is not supported",
    ],
)
def test_rejected_patterns_are_only_suspected_until_confirmed(stderr):
    """rg's pattern complaints are not quoted directly: an ignore file can say the same."""
    with pytest.raises(PatternSuspect):
        rg_outcome(returncode=2, stderr=stderr, produced_output=False, complete=False)


def test_io_errors_elsewhere_with_complete_stream_are_partial():
    """Exit 2 with I/O errors about other paths and a complete stream is partial."""
    stderr = "rg: ./secret/x.txt: Permission denied (os error 13)\n"
    assert rg_outcome(2, stderr, produced_output=True, complete=True) is True


@pytest.mark.parametrize(
    ("stderr", "complete", "file_arg"),
    [
        ("rg: ./secret/x.txt: Permission denied (os error 13)", False, None),  # stream cut
        ("rg: target.txt: Permission denied (os error 13)", True, "target.txt"),  # the target
        ("", False, None),  # exit 2 with nothing said and no summary
    ],
)
def test_other_exit_2_is_search_failed(stderr, complete, file_arg):
    """Exit 2 without a complete stream, or about the target itself, is SEARCH_FAILED."""
    assert (
        _code(
            returncode=2, stderr=stderr, produced_output=True, complete=complete, file_arg=file_arg
        )
        == ErrorCode.SEARCH_FAILED
    )


SECRET = "rg: ./.ignore: line 1: error parsing glob 'TOPSECRET[': unclosed character class"


@pytest.mark.parametrize(
    ("returncode", "stderr", "complete"),
    [
        (2, "rg: /outside/x: Permission denied (os error 13)\nTOPSECRET", False),
        (2, "TOPSECRET went wrong", False),
        (-9, "TOPSECRET", False),
        (134, "memory allocation of TOPSECRET bytes failed", False),
    ],
)
def test_failures_never_quote_stderr(returncode, stderr, complete):
    """Whatever rg printed (an ignore file's lines, outside paths) stays out of the message."""
    with pytest.raises(SearchError) as info:
        rg_outcome(returncode, stderr, produced_output=True, complete=complete)
    assert "TOPSECRET" not in info.value.message and "outside" not in info.value.message


def test_ignore_file_complaints_leave_a_complete_result_whole():
    """A malformed ignore file (exit 2, complete stream) is neither a failure nor partial."""
    assert rg_outcome(2, SECRET + "\n", produced_output=True, complete=True) is False
    assert rg_outcome(2, "rg: odd\n" + SECRET, produced_output=True, complete=True) is True


def test_memory_abort_names_the_limit():
    """An allocation failure under the limit (SIGABRT) says which setting bounds it."""
    with pytest.raises(SearchError) as info:
        rg_outcome(134, "", produced_output=False, complete=False)
    assert "FS_SEARCH_RG_MEMORY_MB" in info.value.message


@pytest.mark.parametrize("returncode", [-9, -15, 137, 3])
def test_signals_and_odd_exits_are_search_failed(returncode):
    """rg killed by a signal (or any other exit) is SEARCH_FAILED."""
    assert _code(returncode=returncode, stderr="", produced_output=False, complete=False) == (
        ErrorCode.SEARCH_FAILED
    )


def test_nothing_searched_is_an_empty_result():
    """rg's 'No files were searched' note (exit 2, complete stream) is an empty result."""
    stderr = (
        "rg: No files were searched, which means ripgrep probably applied a filter you didn't expect.\n"
        "Running with --debug will show why files are being skipped.\n"
    )
    assert rg_outcome(2, stderr, produced_output=True, complete=True) is False
    assert rg_outcome(2, stderr + "rg: something else\n", produced_output=True, complete=True)


# rg 14's stderr for one `-e PATTERN`: it quotes the regex wrapped in (?:...).
def _rg_says(wrapped: str, caret: str, error: str) -> str:
    return f"rg: regex parse error:\n    {wrapped}\n    {caret}\nerror: {error}\n"


@pytest.mark.parametrize(
    ("pattern", "stderr", "expected"),
    [
        (
            "foo(",
            _rg_says("(?:foo()", "^", "unclosed group"),
            "invalid pattern: regex parse error:\n    foo(\nerror: unclosed group",
        ),
        (
            "a)",
            _rg_says("(?:a))", "     ^", "unopened group"),
            "invalid pattern: regex parse error:\n    a)\nerror: unopened group",
        ),
        (
            "[a",
            _rg_says("(?:[a)", "   ^", "unclosed character class"),
            "invalid pattern: regex parse error:\n    [a\n    ^\nerror: unclosed character class",
        ),
        (
            "\\p{Foo}",
            _rg_says("(?:\\p{Foo})", "   ^^^^^^^", "Unicode property not found"),
            "invalid pattern: regex parse error:\n    \\p{Foo}\n    ^^^^^^^\nerror: Unicode property not found",
        ),
        (
            "ab(?=c)",
            _rg_says("(?:ab(?=c))", "     ^^^", "look-around is not supported"),
            "invalid pattern: regex parse error:\n    ab(?=c)\n      ^^^\nerror: look-around is not supported",
        ),
    ],
)
def test_the_quote_is_the_models_pattern_not_rgs_wrapped_regex(pattern, stderr, expected):
    """The model reads its own pattern; rg's caret is shifted under it, or dropped when it
    points at rg's wrapper (there is no right place for it in the model's pattern)."""
    assert pattern_error_message(stderr, pattern=pattern) == expected


def test_a_message_without_the_wrapped_quote_is_kept():
    """A glob complaint, or rg's wording changing, leaves the message as rg's."""
    stderr = "rg: error parsing glob 'a[': unclosed character class; missing ']'\n"
    assert pattern_error_message(stderr, pattern="a[") == (
        "invalid pattern: error parsing glob 'a[': unclosed character class; missing ']'"
    )
