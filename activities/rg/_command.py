"""Pure: the fixed rg argv of each tool (never a shell string)."""

from __future__ import annotations

from fs_search.activities.workspace import VCS_DIRS

# Results never depend on the host's rg config file or global gitignore.
_ISOLATION = ("--no-config", "--no-ignore-global")
# VCS metadata directories are excluded at any depth. They come after the user's glob:
# rg lets the later of several matching globs win, so `**` cannot re-include them.
_VCS_EXCLUSIONS = tuple(f"--glob=!{name}" for name in VCS_DIRS)

# Argument checks belong to the request models (contract.py: ``req.check()``, which the
# activity runs first): the argv builders get accepted values only.


def for_glob(pattern: str, *, rg: str) -> list[str]:
    """rg's argv for a glob call; rg runs in the search root so the pattern is anchored there."""
    return [
        rg,
        *_ISOLATION,
        "--files",
        "--null",
        "--sort=modified",
        "--no-ignore",
        "--hidden",
        f"--glob={pattern}",
        *_VCS_EXCLUSIONS,
    ]


def for_grep(
    pattern: str,
    *,
    rg: str,
    include: str | None = None,
    file_arg: str | None = None,
    threads: int | None = None,
    ignore_files: bool = True,
) -> list[str]:
    """rg's argv for a grep call.

    The pattern follows ``-e`` so a leading ``-`` is searched literally; a file target is
    named after ``--`` so its name is never read as a flag. Ignore files above the search
    root are never consulted (``--no-ignore-parent``); ``ignore_files=False`` drops the
    rest too (the fallback when one of them made rg run out of memory).
    """
    argv = [rg, *_ISOLATION, "--json", "--hidden", "--no-ignore-parent"]
    if not ignore_files:
        argv.append("--no-ignore")
    if threads is not None:
        argv.append(f"--threads={threads}")
    if include:
        argv.append(f"--glob={include}")
    argv.extend(_VCS_EXCLUSIONS)
    argv += ["-e", pattern]
    if file_arg is not None:
        argv += ["--", file_arg]
    return argv


def for_probe(*, rg: str) -> list[str]:
    """rg's argv for the start-up probe."""
    return [rg, "--version"]
