"""rg, run: its fixed argv, the confined process that runs it, and its exit mapped to the
contract.

Private behind this front: the argv (``_command``), the executor (``_executor``: process
group, byte cap, deadline, kill on cancel), the sandbox (``_sandbox``: the setting, the
files rg's ELF loader opens, ``_elf_loader``), the fork server that starts every sandboxed
rg (``_fork_server``, a stdlib-only script; ``_fork_client``, the worker's side;
``_fork_child``, the confinement each child applies before it execs rg), the FIFO watch
(``_fifo_watch``), the running slots (``_running_slots``), a grep run again without the
ignore file that stopped it (``_ignore_fallback``) and the outcome (``_outcome``).
"""

from __future__ import annotations

from fs_search.activities.rg._command import (
    GrepArgvs,
    IgnoreFiles,
    for_glob,
    for_grep,
    for_grep_call,
    for_probe,
)
from fs_search.activities.rg._executor import Executor, RgRun, default_backstop, over_budget
from fs_search.activities.rg._ignore_fallback import IGNORE_FILES_SKIPPED, grep_past_ignore_files
from fs_search.activities.rg._outcome import check_exit
from fs_search.activities.rg._sandbox import Sandbox, sandbox_for

__all__ = [
    "IGNORE_FILES_SKIPPED",
    "Executor",
    "GrepArgvs",
    "IgnoreFiles",
    "RgRun",
    "Sandbox",
    "default_backstop",
    "for_glob",
    "for_grep",
    "for_grep_call",
    "for_probe",
    "grep_past_ignore_files",
    "over_budget",
    "sandbox_for",
    "check_exit",
]
