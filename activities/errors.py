"""SearchError and its codes: the single place that turns failures into ApplicationError."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Generator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from fs_search.activities.models import ArgumentProblem, ErrorCode, error_name

if TYPE_CHECKING:
    from temporalio.exceptions import ApplicationError

log = logging.getLogger(__name__)
T = TypeVar("T")

# rg's own words for a pattern it rejects (regex or glob); all exit 2.
_INVALID_PATTERN_MARKERS = (
    "regex parse error",
    "error parsing glob",
    "is not allowed in a regex",
    "look-around",
    "backreferences are not supported",
    "unrecognized escape sequence",
    "compiled regex exceeds size limit",
)


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


def is_invalid_pattern(stderr: str) -> bool:
    """Whether rg's stderr says it rejected a regex or a glob.

    Only trusted for a run that saw nothing but the request (see ``PatternSuspect``): an
    ignore file in a tree makes rg say "error parsing glob" too.
    """
    return any(marker in stderr for marker in _INVALID_PATTERN_MARKERS)


def pattern_error_message(stderr: str, *, pattern: str | None = None) -> str:
    """A compact rendition of rg's complaint about the model's own pattern.

    rg quotes a regex as it compiled it, the pattern wrapped in ``(?:...)``; given the
    model's ``pattern``, the quote shows that instead (see :func:`_unwrapped`).
    """
    lines = [line.removeprefix("rg: ") for line in stderr.strip().splitlines()[:20]]
    if pattern is not None:
        lines = _unwrapped(lines, pattern)
    text = "\n".join(lines)
    return f"invalid pattern: {text}" if text else "invalid pattern"


# What rg adds around a regex before compiling it.
_WRAP_OPEN, _WRAP_CLOSE = "(?:", ")"


def _unwrapped(lines: list[str], pattern: str) -> list[str]:
    """rg's message with its quote of the wrapped regex replaced by the model's pattern.

    The caret line under the quote is shifted with it, and kept only when it still points
    inside the pattern: an error rg places on the wrapper itself (an unclosed group at
    its ``(?:``, an unopened one at its ``)``) keeps rg's words without a caret.
    """
    wrapped = f"{_WRAP_OPEN}{pattern}{_WRAP_CLOSE}"
    for i, line in enumerate(lines):
        indent = line[: len(line) - len(line.lstrip(" "))]
        if line[len(indent) :] != wrapped:
            continue
        out = [*lines[:i], indent + pattern]
        rest = lines[i + 1 :]
        if rest and rest[0].strip() and set(rest[0].strip()) == {"^"}:
            caret = rest.pop(0)
            start = len(caret) - len(caret.lstrip(" ")) - len(indent) - len(_WRAP_OPEN)
            width = len(caret.strip())
            if start >= 0 and start + width <= len(pattern):
                out.append(indent + " " * start + "^" * width)
        return out + rest
    return lines


class PatternSuspect(Exception):
    """rg stopped before searching and said something about a pattern: confirm it with a
    run that sees only the request (no tree, so no ignore file can speak) before quoting."""


# "rg: <path>: <reason> (os error N)": an I/O error about one path while walking.
_IO_ERROR = re.compile(r"^rg: (?P<path>.+): .+ \(os error \d+\)$")
# rg's complaints about an ignore file it could not parse: the search goes on without it.
_IGNORE_FILE_ERROR = re.compile(
    r": line \d+: error parsing glob |^rg: No files were searched|^Running with --debug"
)
# SIGABRT: rg aborts when an allocation fails under its address-space limit.
_ABORT = 6


def rg_outcome(
    returncode: int,
    stderr: str,
    *,
    produced_output: bool,
    complete: bool,
    file_arg: str | None = None,
) -> bool:
    """Map rg's exit to the contract; returns ``partial``. Never quotes stderr.

    0 (results) and 1 (nothing found) are results. 2 with a complete output is a result
    too: rg searched everything it could. It is partial when rg said it could not read
    some path other than the target; complaints about ignore files (planted, malformed,
    unreadable) are not the model's concern and change nothing.

    Raises:
        PatternSuspect: rg stopped before any output, complaining about a pattern.
        SearchError: SEARCH_FAILED otherwise, in our own words (stderr goes to the log).
    """
    if returncode in (0, 1):
        return False
    if returncode in (-_ABORT, 128 + _ABORT):
        raise SearchError(
            ErrorCode.SEARCH_FAILED,
            "rg ran out of memory under the worker's limit (FS_SEARCH_RG_MEMORY_MB); "
            "narrow the path or include",
        )
    if returncode < 0 or returncode > 128:
        signum = -returncode if returncode < 0 else returncode - 128
        raise SearchError(ErrorCode.SEARCH_FAILED, f"rg was killed by signal {signum}")
    lines = [line for line in stderr.splitlines() if line.strip()]
    if returncode == 2 and not produced_output and is_invalid_pattern(stderr):
        raise PatternSuspect()
    io_paths = [m.group("path").removeprefix("./") for m in map(_IO_ERROR.match, lines) if m]
    if returncode == 2 and complete:
        if any(p in (".", "", file_arg) for p in io_paths):
            raise SearchError(ErrorCode.SEARCH_FAILED, "the path could not be read")
        return any(not _IGNORE_FILE_ERROR.search(line) for line in lines)
    raise SearchError(
        ErrorCode.SEARCH_FAILED,
        f"rg failed [exit={returncode}] before finishing the search; the worker log has details",
    )
