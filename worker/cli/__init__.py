"""The ``fs-search`` command line: the worker, one-off calls (embedded or against a running
Temporal), ``spill read`` and ``dev``.

Private behind this front: the console script's entry (``_entry``: Ctrl-C from the first
instruction on), running the commands (``_main``), their arguments (``_parser``), address
mode (``_address``), the embedded mode (``_embedded``), ``fs-search dev`` (``_dev``) and its
env files (``_env_file``). Names load on first use: ``fs-search --version`` imports no more
than the parser.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fs_search.worker.cli._entry import run
    from fs_search.worker.cli._main import main
    from fs_search.worker.cli._parser import build_parser

_LAZY = {
    "build_parser": "fs_search.worker.cli._parser",
    "main": "fs_search.worker.cli._main",
    "run": "fs_search.worker.cli._entry",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["build_parser", "main", "run"]
