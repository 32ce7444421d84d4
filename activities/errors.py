"""SearchError and its codes: the single place that turns failures into ApplicationError."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Generator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from fs_search.activities.contract import ArgumentProblem, ErrorCode, capped, error_name

if TYPE_CHECKING:
    from temporalio.exceptions import ApplicationError

log = logging.getLogger(__name__)
T = TypeVar("T")

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

    def __init__(self, code: ErrorCode, message: str) -> None:
        message = capped(message)  # what it echoes (a pattern, rg's words) is cut to fit
        super().__init__(message)
        self.code = code
        self.message = message

    def to_application_error(self) -> ApplicationError:
        """The non-retryable ApplicationError this failure crosses Temporal as: of category
        BENIGN when the model's input caused it (:data:`BENIGN_CODES`)."""
        # Imported here: the pure modules (and the digest helper process) stay light.
        from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

        return ApplicationError(
            self.message,
            {"name": error_name(self.code), "code": self.code.value},
            type=self.code.value,
            non_retryable=True,
            category=(
                ApplicationErrorCategory.BENIGN
                if self.code in BENIGN_CODES
                else ApplicationErrorCategory.UNSPECIFIED
            ),
        )


class contract(Generic[T]):  # noqa: N801 - read as a function: errors.contract(...)
    """An activity body whose every failure leaves as a contract ApplicationError.

    ``await contract(work)`` runs an awaitable; ``async with contract():`` a block. A
    :class:`SearchError` keeps its code, an :class:`ArgumentProblem` (a request's checks,
    ``req.check()``) is INVALID_ARGUMENT, anything else SEARCH_FAILED without its text. A
    cancellation passes through untouched: the caller's side maps it.
    """

    def __init__(self, work: Awaitable[T] | None = None) -> None:
        self._work = work

    def __await__(self) -> Generator[Any, None, T]:
        return self._run().__await__()

    async def _run(self) -> T:
        assert self._work is not None
        async with self:
            return await self._work
        raise AssertionError("unreachable")  # pragma: no cover - __aexit__ always raises

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: Any
    ) -> bool:
        if error is None or isinstance(error, asyncio.CancelledError):
            return False
        if isinstance(error, ArgumentProblem):
            raise invalid_argument(str(error)).to_application_error() from None
        if isinstance(error, SearchError):
            raise error.to_application_error() from None
        if not isinstance(error, Exception):
            return False
        log.error("unexpected failure in a search activity", exc_info=error)
        # The exception's text may carry host detail (paths, endpoints): the log has it.
        raise SearchError(
            ErrorCode.SEARCH_FAILED,
            f"the search failed unexpectedly ({type(error).__name__}); the worker log has details",
        ).to_application_error() from None


def invalid_argument(message: str) -> SearchError:
    """An argument error (blank pattern, bad include, path outside the workspace, ...)."""
    return SearchError(ErrorCode.INVALID_ARGUMENT, message)
