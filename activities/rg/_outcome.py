"""rg's exit mapped to the contract: results, partial results, or the error in our words.

A complaint about a pattern is confirmed by the same search in an empty directory before
it is quoted (:func:`check_exit`): an ignore file in the tree makes rg say the same words.
"""

from __future__ import annotations

import logging
import re

from fs_search.activities._contract import ErrorCode
from fs_search.activities._errors import SearchError
from fs_search.activities._held_root import empty_root
from fs_search.activities.rg._executor import Executor, RgRun, is_abort

log = logging.getLogger(__name__)

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


async def check_exit(
    run: RgRun,
    executor: Executor,
    *,
    complete: bool,
    clean_argv: list[str],
    file_arg: str | None,
    pattern: str,
    budget_s: float,
) -> bool:
    """rg's exit checked against the contract: whether the results are ``partial``, or the
    contract error it means; rg's stderr is only logged.

    ``complete``: rg's output ended as a finished search; ``clean_argv``: the same search
    with no file operand, where a suspected pattern error is confirmed; ``pattern``: the
    model's, which a pattern error quotes."""
    if run.stderr.strip():
        log.info(
            "rg exit %d; stderr (not shown to the model): %r", run.returncode, run.stderr[:4096]
        )
    if run.fifo_refused:
        raise SearchError(
            ErrorCode.SEARCH_FAILED,
            "rg was stopped: it waited on a FIFO (named pipe) in the workspace that "
            "leads outside it; remove the FIFO",
        )
    try:
        return rg_outcome(
            run.returncode,
            run.stderr,
            produced_output=run.produced_output,
            complete=complete,
            file_arg=file_arg,
        )
    except PatternSuspect:
        pass
    # rg's complaint may come from an ignore file in the tree: only a run that sees nothing
    # but the request may be quoted to the model. A new empty directory, so rg sees no tree
    # there; removed as soon as the run is done, so no exit of the worker leaves it.
    with empty_root("fs-search-empty-") as empty:
        clean = await executor.run(
            clean_argv,
            cwd=empty.fd,
            timeout_s=min(budget_s, 5.0),
            max_stdout=64 * 1024,
            tree=empty,
        )
    if clean.returncode == 2 and is_invalid_pattern(clean.stderr):
        raise SearchError(
            ErrorCode.SEARCH_INVALID_PATTERN,
            pattern_error_message(clean.stderr, pattern=pattern),
        )
    raise SearchError(
        ErrorCode.SEARCH_FAILED,
        f"rg failed [exit={run.returncode}] before searching; the worker log has details",
    )


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
    if is_abort(returncode):
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
