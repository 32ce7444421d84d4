"""The console script's entry: Ctrl-C is an exit 130 without a traceback from the first
instruction on.

Until a command starts something that must be stopped (a search, a server, a worker), the
process has nothing to clean up: Ctrl-C leaves at once. ``_main`` hands SIGINT to asyncio
just before a command starts (``running_asyncio``), and from there Ctrl-C cancels the
command, which stops what it started (rg killed, servers stopped, a call cancelled).
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType

EXIT_INTERRUPTED = 130


def leave_interrupted(signum: int, frame: FrameType | None) -> None:
    """SIGINT while nothing has started yet (parsing, importing): leave now, exit 130."""
    os._exit(EXIT_INTERRUPTED)


def run() -> None:
    """Console-script entry: run the command, flush, and leave without interpreter
    finalisation.

    Temporal's core threads can still be calling back into Python while the interpreter
    finalises, which can abort the process after its work is done; everything has been
    shut down and flushed by then, so exit directly.
    """
    signal.signal(signal.SIGINT, leave_interrupted)
    try:
        from fs_search.worker.cli._main import main

        code = main()
    except KeyboardInterrupt:
        # asyncio's handler (while a command runs) raises it on a second Ctrl-C.
        code = EXIT_INTERRUPTED
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
