"""SearchError and its codes, and :func:`contract_errors`: the single place that turns an
activity's failures into the contract's ApplicationError."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from fs_search.activities._contract import ArgumentProblem, ErrorCode, capped, error_name

if TYPE_CHECKING:
    from temporalio.exceptions import ApplicationError

log = logging.getLogger(__name__)

# Codes the model's own input causes: benign for the worker (Temporal logs them at DEBUG,
# emits no failure metrics, and no span is marked as an error).
BENIGN_CODES = frozenset(
    {
        ErrorCode.INVALID_ARGUMENT,
        ErrorCode.SEARCH_INVALID_PATTERN,
        ErrorCode.SEARCH_RAW_OUTPUT_OVERFLOW,
    }
)


class SearchError(Exception):
    """A contract failure: a code from :class:`ErrorCode` and a message for the model."""

    def __init__(self, code: ErrorCode, message: str, *, benign: bool | None = None) -> None:
        message = capped(message)  # what it echoes (a pattern, rg's words) is cut to fit
        super().__init__(message)
        self.code = code
        self.message = message
        # An expected refusal the worker need not report (default: the code's own kind).
        self.benign = code in BENIGN_CODES if benign is None else benign

    def to_application_error(self) -> ApplicationError:
        """The non-retryable ApplicationError this failure crosses Temporal as: of category
        BENIGN when the model's input caused it (:data:`BENIGN_CODES`) or it is another
        expected refusal (``benign``)."""
        # Imported here: the pure modules (and the digest helper process) stay light.
        from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

        return ApplicationError(
            self.message,
            {"name": error_name(self.code), "code": self.code.value},
            type=self.code.value,
            non_retryable=True,
            category=(
                ApplicationErrorCategory.BENIGN
                if self.benign
                else ApplicationErrorCategory.UNSPECIFIED
            ),
        )


@contextlib.asynccontextmanager
async def contract_errors() -> AsyncIterator[None]:
    """Every failure of the block (an activity's body) leaves as a contract
    ApplicationError: a :class:`SearchError` keeps its code, an :class:`ArgumentProblem` (a
    request's checks, ``req.check()``) is INVALID_ARGUMENT, any other ``Exception``
    SEARCH_FAILED without its text. A cancellation passes through untouched: the caller's
    side maps it."""
    try:
        yield
    except ArgumentProblem as e:
        raise invalid_argument(str(e)).to_application_error() from None
    except SearchError as e:
        raise e.to_application_error() from None
    except asyncio.CancelledError:
        raise
    except Exception as e:
        log.error("unexpected failure in a search activity", exc_info=e)
        # The exception's text may carry host detail (paths, endpoints): the log has it.
        raise SearchError(
            ErrorCode.SEARCH_FAILED,
            f"the search failed unexpectedly ({type(e).__name__}); the worker log has details",
        ).to_application_error() from None


def invalid_argument(message: str) -> SearchError:
    """An argument error (blank pattern, bad include, path outside the workspace, ...)."""
    return SearchError(ErrorCode.INVALID_ARGUMENT, message)
