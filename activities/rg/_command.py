"""Pure: the fixed rg argv of each tool (never a shell string)."""

from __future__ import annotations

from dataclasses import dataclass

from fs_search.activities._workspace import VCS_DIRS

# Results never depend on the host's rg config file or global gitignore.
_ISOLATION = ("--no-config", "--no-ignore-global")
# VCS metadata directories are excluded at any depth. They come after the user's glob:
# rg lets the later of several matching globs win, so `**` cannot re-include them.
_VCS_EXCLUSIONS = tuple(f"--glob=!{name}" for name in VCS_DIRS)

# Argument checks belong to the request models (_contract.py: ``req.check()``, which the
# activity runs first): the argv builders get accepted values only.


def for_glob(pattern: str, *, rg: str, sort: bool = True) -> list[str]:
    """rg's argv for a glob call; rg runs in the search root so the pattern is anchored there.

    ``sort``: rg lists the files oldest modified first (``--sort=modified``, which walks on
    one thread); else it walks on one thread unsorted, in the order its sort keeps for
    equal times, for the caller to sort by the files' times.
    """
    return [
        rg,
        *_ISOLATION,
        "--files",
        "--null",
        "--sort=modified" if sort else "--threads=1",
        "--no-ignore",
        "--hidden",
        f"--glob={pattern}",
        *_VCS_EXCLUSIONS,
    ]


@dataclass(frozen=True)
class IgnoreFiles:
    """Which of the workspace's ignore files a grep's rg reads and applies.

    rg runs in the search root and reads the ignore files of every directory it walks and
    of every directory above it: those between the workspace root and the search root must
    apply (a file is hidden or shown the same whatever the search root: docs/security.md), those
    above the workspace must not. rg has no flag to stop at a given directory; what keeps
    it from reading above the workspace is the kernel sandbox (or, without one, the
    worker's check that nothing up there could apply: :mod:`fs_search.activities._ignore_files`).

    Attributes:
        parents: apply the ignore files of the directories above the search root (False:
            ``--no-ignore-parent``, only those at and below it).
        dot: ``.ignore`` and ``.rgignore`` files.
        vcs: ``.gitignore`` files (and ``.git/info/exclude``).
        exclude: ``.git/info/exclude``.
    """

    parents: bool = True
    dot: bool = True
    vcs: bool = True
    exclude: bool = True

    def flags(self) -> list[str]:
        """rg's flags for this choice."""
        dropped = [
            (self.parents, "--no-ignore-parent"),
            (self.dot, "--no-ignore-dot"),
            (self.vcs, "--no-ignore-vcs"),
            (self.exclude, "--no-ignore-exclude"),
        ]
        return [flag for kept, flag in dropped if not kept]

    @property
    def complete(self) -> bool:
        """Every kind of ignore file is read (nothing was left out for safety)."""
        return self.dot and self.vcs and self.exclude


def for_grep(
    pattern: str,
    *,
    rg: str,
    include: str | None = None,
    file_arg: str | None = None,
    threads: int | None = None,
    ignore_files: IgnoreFiles | None = IgnoreFiles(),
) -> list[str]:
    """rg's argv for a grep call.

    The pattern follows ``-e`` so a leading ``-`` is searched literally; a file target is
    named after ``--`` so its name is never read as a flag. ``ignore_files`` says which
    ignore files apply; None applies none (``--no-ignore``: the fallback when one of them
    stopped rg, and the pattern check in an empty directory, which must read nothing). A
    blank ``include`` is none.
    """
    argv = [rg, *_ISOLATION, "--json", "--hidden"]
    argv += ["--no-ignore"] if ignore_files is None else ignore_files.flags()
    if threads is not None:
        argv.append(f"--threads={threads}")
    if include and include.strip():
        argv.append(f"--glob={include}")
    argv.extend(_VCS_EXCLUSIONS)
    argv += ["-e", pattern]
    if file_arg is not None:
        argv += ["--", file_arg]
    return argv


@dataclass(frozen=True)
class GrepArgvs:
    """The rg argvs of one grep call.

    Attributes:
        search: the search, with the ignore files chosen for it.
        without_ignore_files: the same search applying none (when one of them stopped rg).
        clean: the same search with no ignore file and no file operand, where a suspected
            pattern error is confirmed (in an empty directory).
    """

    search: list[str]
    without_ignore_files: list[str]
    clean: list[str]


def for_grep_call(
    pattern: str,
    *,
    rg: str,
    include: str | None,
    file_arg: str | None,
    threads: int | None,
    ignore_files: IgnoreFiles,
) -> GrepArgvs:
    """The argvs a grep call may run (see :class:`GrepArgvs` and :func:`for_grep`)."""

    def argv(*, ignore: IgnoreFiles | None, file: str | None) -> list[str]:
        return for_grep(
            pattern, rg=rg, include=include, file_arg=file, threads=threads, ignore_files=ignore
        )

    return GrepArgvs(
        search=argv(ignore=ignore_files, file=file_arg),
        without_ignore_files=argv(ignore=None, file=file_arg),
        clean=argv(ignore=None, file=None),
    )


def for_probe(*, rg: str) -> list[str]:
    """rg's argv for the start-up probe."""
    return [rg, "--version"]
