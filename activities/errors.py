"""SearchError and its codes: the single place that turns failures into ApplicationError."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from fs_search.activities.models import ErrorCode, error_name

if TYPE_CHECKING:
    from temporalio.exceptions import ApplicationError

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


class SearchError(Exception):
    """A contract failure: a code from :class:`ErrorCode` and a message for the model."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def to_application_error(self) -> ApplicationError:
        """The non-retryable ApplicationError this failure crosses Temporal as."""
        # Imported here: the pure modules (and the digest helper process) stay light.
        from temporalio.exceptions import ApplicationError

        return ApplicationError(
            self.message,
            {"name": error_name(self.code), "code": self.code.value},
            type=self.code.value,
            non_retryable=True,
        )


def invalid_argument(message: str) -> SearchError:
    """An argument error (blank pattern, bad include, path outside the workspace, ...)."""
    return SearchError(ErrorCode.INVALID_ARGUMENT, message)


def is_invalid_pattern(stderr: str) -> bool:
    """Whether rg's stderr says it rejected the regex or the glob."""
    return any(marker in stderr for marker in _INVALID_PATTERN_MARKERS)


def pattern_error_message(stderr: str) -> str:
    """A compact rendition of rg's complaint about a pattern."""
    text = "\n".join(line.removeprefix("rg: ") for line in stderr.strip().splitlines())
    return f"invalid pattern: {text}" if text else "invalid pattern"


# "rg: <path>: <reason> (os error N)": an I/O error about one path while walking.
_IO_ERROR = re.compile(r"^rg: (?P<path>.+): .+ \(os error \d+\)$")
# rg's note (exit 2) when filters left nothing to search: an empty result, not a failure.
_NOTHING_SEARCHED = (
    "No files were searched, which means ripgrep probably applied a filter",
    "Running with --debug will show why files are being skipped.",
)


def rg_outcome(
    returncode: int,
    stderr: str,
    *,
    produced_output: bool,
    complete: bool,
    file_arg: str | None = None,
) -> bool:
    """Map rg's exit to the contract; returns ``partial``.

    0 (results) and 1 (nothing found) are results. 2 is a failure, except when the
    output is complete and stderr holds only I/O errors about paths other than the
    search target: an unreadable file deep in the tree does not fail the search.

    Raises:
        SearchError: SEARCH_INVALID_PATTERN when rg rejected the pattern or glob,
            SEARCH_FAILED otherwise.
    """
    if returncode in (0, 1):
        return False
    if returncode < 0:
        raise SearchError(ErrorCode.SEARCH_FAILED, f"rg was killed by signal {-returncode}")
    if returncode == 2:
        # A rejected pattern stops rg before it searches anything.
        if not produced_output and is_invalid_pattern(stderr):
            raise SearchError(ErrorCode.SEARCH_INVALID_PATTERN, pattern_error_message(stderr))
        said = [line for line in stderr.splitlines() if line.strip()]
        lines = [line for line in said if not any(note in line for note in _NOTHING_SEARCHED)]
        if complete and said and not lines:
            return False
        io_paths = [m.group("path") for m in map(_IO_ERROR.match, lines) if m]
        if (
            complete
            and lines
            and len(io_paths) == len(lines)
            and all(p.removeprefix("./") not in (".", "", file_arg) for p in io_paths)
        ):
            return True
    detail = stderr.strip().splitlines()[:5]
    reason = "; ".join(line.removeprefix("rg: ") for line in detail) or "no error message"
    if returncode > 128:
        reason = f"killed by signal {returncode - 128}"
    raise SearchError(ErrorCode.SEARCH_FAILED, f"rg failed [exit={returncode}]: {reason}")
