"""A grep's rg that an ignore file stopped, run again without ignore files.

An ignore file the tree planted (huge, endless, a FIFO that leads outside) can stop rg before
it searches: it holds rg past its memory limit, or rg blocks opening it. The search is then
run again applying none, and the result says so; if that run is stopped too, it was not an
ignore file but one file's matches, which rg holds in memory before writing them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from fs_search.activities._contract import ErrorCode
from fs_search.activities._errors import SearchError
from fs_search.activities.rg._command import GrepArgvs
from fs_search.activities.rg._executor import RgRun

log = logging.getLogger(__name__)

# The footer line of a grep that ran without the workspace's ignore files.
IGNORE_FILES_SKIPPED = (
    "(ignore files were not applied: one in the workspace could not be read safely, "
    "so files it would hide are included)"
)


async def grep_past_ignore_files(
    run: Callable[[list[str]], Awaitable[RgRun]], argvs: GrepArgvs
) -> tuple[RgRun, bool]:
    """rg's run of a grep (``run`` runs one argv), and whether its ignore files were skipped:
    the search, or, when rg was stopped (aborted, or a FIFO refused), the same search
    without ignore files.

    Raises:
        SearchError: SEARCH_RAW_OUTPUT_OVERFLOW when that run is stopped too.
    """
    done = await run(argvs.search)
    if not (done.aborted or done.fifo_refused):
        return done, False
    log.warning("rg was stopped by an ignore file; searching again without them")
    again = await run(argvs.without_ignore_files)
    if again.aborted:
        # Not an ignore file, then: rg holds each file's matches in memory before writing
        # them, and one file's were too many.
        raise SearchError(
            ErrorCode.SEARCH_RAW_OUTPUT_OVERFLOW,
            "the matches in one file needed more memory than rg may use on this worker "
            "(FS_SEARCH_RG_MEMORY_MB) and the search was stopped; narrow the pattern, path or "
            "include",
        )
    return again, True
