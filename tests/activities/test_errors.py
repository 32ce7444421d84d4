"""SearchError and errors.contract_errors(): every failure leaves as a contract
ApplicationError."""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from fs_search.activities._contract import ErrorCode
from fs_search.activities._errors import SearchError, contract_errors


def test_application_error_shape():
    """Contract errors cross Temporal non-retryable with {name, code} details."""
    err = SearchError(ErrorCode.SEARCH_FAILED, "boom").to_application_error()
    assert err.type == "SEARCH_FAILED" and err.non_retryable and err.message == "boom"
    assert err.details == ({"name": "SearchError", "code": "SEARCH_FAILED"},)
    arg = SearchError(ErrorCode.INVALID_ARGUMENT, "bad").to_application_error()
    assert arg.details == ({"name": "ToolArgumentError", "code": "INVALID_ARGUMENT"},)


async def test_an_unexpected_failure_is_reported_without_its_text(caplog):
    """An unexpected exception's text (paths, endpoints) goes to the log, not to the model."""

    with pytest.raises(ApplicationError) as info:
        async with contract_errors():
            raise RuntimeError("cannot open /home/worker/.aws/credentials at http://10.0.0.5:9000")
    assert info.value.type == "SEARCH_FAILED" and "RuntimeError" in info.value.message
    assert "/home" not in info.value.message and "10.0.0.5" not in info.value.message
    assert info.value.__cause__ is None
    assert "10.0.0.5" in caplog.text


@pytest.mark.parametrize("code", list(ErrorCode), ids=lambda c: c.value)
def test_errors_the_models_input_causes_are_benign(code):
    """INVALID_ARGUMENT, SEARCH_INVALID_PATTERN and SEARCH_RAW_OUTPUT_OVERFLOW are BENIGN
    (Temporal logs them at DEBUG, counts no failure, marks no span); the worker's own failures
    and aborted searches keep the default category."""
    err = SearchError(code, "x").to_application_error()
    benign = code in {
        ErrorCode.INVALID_ARGUMENT,
        ErrorCode.SEARCH_INVALID_PATTERN,
        ErrorCode.SEARCH_RAW_OUTPUT_OVERFLOW,
    }
    expected = ApplicationErrorCategory.BENIGN if benign else ApplicationErrorCategory.UNSPECIFIED
    assert err.category == expected
    assert err.non_retryable and err.type == code.value
