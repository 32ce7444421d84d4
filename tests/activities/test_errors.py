"""rg exit codes and stderr mapped to the contract."""

from __future__ import annotations

import pytest

from fs_search.activities.errors import SearchError, rg_outcome
from fs_search.activities.models import ErrorCode


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
def test_rejected_patterns_are_invalid_pattern(stderr):
    """rg's pattern complaints become SEARCH_INVALID_PATTERN."""
    assert _code(returncode=2, stderr=stderr, produced_output=False, complete=False) == (
        ErrorCode.SEARCH_INVALID_PATTERN
    )


def test_io_errors_elsewhere_with_complete_stream_are_partial():
    """Exit 2 with only I/O errors about other paths and a complete stream is partial."""
    stderr = "rg: ./secret/x.txt: Permission denied (os error 13)\n"
    assert rg_outcome(2, stderr, produced_output=True, complete=True) is True


@pytest.mark.parametrize(
    ("stderr", "complete", "file_arg"),
    [
        ("rg: ./secret/x.txt: Permission denied (os error 13)", False, None),  # stream cut
        ("rg: something else went wrong", True, None),  # not an I/O error line
        ("rg: target.txt: Permission denied (os error 13)", True, "target.txt"),  # the target
        ("", True, None),  # exit 2 with nothing said
    ],
)
def test_other_exit_2_is_search_failed(stderr, complete, file_arg):
    """Any other exit 2 is SEARCH_FAILED."""
    assert (
        _code(
            returncode=2, stderr=stderr, produced_output=True, complete=complete, file_arg=file_arg
        )
        == ErrorCode.SEARCH_FAILED
    )


@pytest.mark.parametrize("returncode", [-9, -15, 137, 3])
def test_signals_and_odd_exits_are_search_failed(returncode):
    """rg killed by a signal (or any other exit) is SEARCH_FAILED."""
    assert _code(returncode=returncode, stderr="", produced_output=False, complete=False) == (
        ErrorCode.SEARCH_FAILED
    )


def test_application_error_shape():
    """Contract errors cross Temporal non-retryable with {name, code} details."""
    err = SearchError(ErrorCode.SEARCH_FAILED, "boom").to_application_error()
    assert err.type == "SEARCH_FAILED" and err.non_retryable and err.message == "boom"
    assert err.details == ({"name": "SearchError", "code": "SEARCH_FAILED"},)
    arg = SearchError(ErrorCode.INVALID_ARGUMENT, "bad").to_application_error()
    assert arg.details == ({"name": "ToolArgumentError", "code": "INVALID_ARGUMENT"},)


def test_nothing_searched_is_an_empty_result():
    """rg's 'No files were searched' note (exit 2, complete stream) is an empty result."""
    stderr = (
        "rg: No files were searched, which means ripgrep probably applied a filter you didn't expect.\n"
        "Running with --debug will show why files are being skipped.\n"
    )
    assert rg_outcome(2, stderr, produced_output=True, complete=True) is False
    with pytest.raises(SearchError):
        rg_outcome(2, stderr + "rg: something else\n", produced_output=True, complete=True)
