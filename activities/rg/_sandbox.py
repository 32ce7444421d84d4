"""How rg is confined: Landlock (when the kernel has it) and resource limits, which the fork
server applies before it starts each rg (``_fork_child.py``)."""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass, field
from typing import Literal

from fs_search.activities._config import ConfigError
from fs_search.activities.rg._elf_loader import LoaderUnknown, loader_files
from fs_search.activities.rg._fork_child import landlock_abi

log = logging.getLogger(__name__)

# What the fork server loads and each of its children runs: the confinement.
FORK_CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_fork_child.py")
# A child's exit code when it could not confine itself (rg did not run).
CONFINEMENT_FAILED = 125
# The fork server is stdlib-only: any of these can run it when the worker's own interpreter
# cannot be executed again by its user (e.g. a venv linking into another user's home).
_SYSTEM_PYTHONS = ("/usr/bin/python3", "/bin/python3", "/usr/local/bin/python3")


def fork_server_python() -> str:
    """The interpreter that runs the fork server: this worker's, else the system's."""
    for candidate in (sys.executable, *_SYSTEM_PYTHONS):
        if candidate and os.path.isabs(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return sys.executable


class SandboxUnavailable(ConfigError):
    """``FS_SEARCH_SANDBOX=required`` on a kernel without Landlock (the worker will not start)."""


@dataclass(frozen=True)
class Sandbox:
    """The restrictions every rg runs under.

    Attributes:
        landlock_abi: the kernel's Landlock ABI (0: no ruleset is applied).
        memory_mb: rg's address-space limit.
        loader: the files rg's dynamic loader opens (granted one by one, never their
            directories).
        python: the interpreter that runs the fork server (isolated mode, no site).
    """

    landlock_abi: int
    memory_mb: int
    loader: tuple[str, ...] = ()
    python: str = field(default_factory=fork_server_python)

    @property
    def name(self) -> Literal["landlock", "none"]:
        """What ``fs_search.tools`` reports: ``"landlock"`` or ``"none"``."""
        return "landlock" if self.landlock_abi else "none"


def sandbox_for(
    setting: str, memory_mb: int, *, program: str | None, abi: int | None = None
) -> Sandbox:
    """The sandbox ``FS_SEARCH_SANDBOX`` asks for on this kernel, for running ``program``.

    ``abi`` is the kernel's Landlock ABI (probed when None; 0 means no Landlock). The files
    ``program``'s loader opens are listed once, here (None: no program, nothing to list).

    Raises:
        SandboxUnavailable: ``required`` and the kernel has no Landlock, or the loader's
            files could not be determined.
    """
    if setting == "off":
        abi = 0
    elif abi is None:
        abi = landlock_abi()
    loader: tuple[str, ...] = ()
    if abi and program is not None:
        try:
            loader = loader_files(program)
        except LoaderUnknown as e:
            if setting == "required":
                raise SandboxUnavailable(
                    f"FS_SEARCH_SANDBOX=required but the files {program}'s loader opens could "
                    f"not be determined ({e}); refusing to start"
                ) from None
            log.warning(
                "cannot list the files %s's loader opens (%s): rg runs without kernel "
                "confinement; set FS_SEARCH_SANDBOX=required to refuse this",
                program,
                e,
            )
            abi = 0
    if abi == 0 and setting == "required":
        raise SandboxUnavailable(
            "FS_SEARCH_SANDBOX=required but this kernel has no Landlock (Linux >= 5.13 with "
            "landlock in the lsm= boot list); refusing to start"
        )
    if abi == 0 and setting == "auto":
        log.warning(
            "this kernel has no Landlock: rg runs without kernel confinement (path checks "
            "and resource limits still apply); set FS_SEARCH_SANDBOX=required to refuse this"
        )
    return Sandbox(landlock_abi=abi, memory_mb=memory_mb, loader=loader)
