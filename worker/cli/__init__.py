"""The ``fs-search`` command line: the worker, one-off calls (embedded or against a running
Temporal), ``spill read`` and ``dev``.

Private behind this front: running the commands (``_main``), their arguments (``_parser``),
the embedded mode (``_embedded``), ``fs-search dev`` (``_dev``) and its env files
(``_env_file``).
"""

from __future__ import annotations

from fs_search.worker.cli._main import main, run
from fs_search.worker.cli._parser import build_parser

__all__ = ["build_parser", "main", "run"]
