"""Pure argv building (the argument checks are the request models': test_models)."""

from __future__ import annotations

from fs_search.activities.rg import _command as command


def test_glob_argv_is_fixed_with_exclusions_after_user_glob():
    """The user's glob comes before the VCS exclusions, so it cannot re-include them."""
    argv = command.for_glob("**", rg="/bin/rg")
    assert argv[:8] == [
        "/bin/rg",
        "--no-config",
        "--no-ignore-global",
        "--files",
        "--null",
        "--sort=modified",
        "--no-ignore",
        "--hidden",
    ]
    user = argv.index("--glob=**")
    exclusions = [a for a in argv if a.startswith("--glob=!")]
    assert exclusions == [f"--glob=!{d}" for d in (".git", ".svn", ".hg", ".bzr", ".jj", ".sl")]
    assert all(argv.index(e) > user for e in exclusions)


def test_grep_argv_puts_pattern_after_e_and_file_after_double_dash():
    """A leading-dash pattern follows -e; a file target follows --."""
    argv = command.for_grep("-foo", rg="/bin/rg", include="*.py", file_arg="-x.py", threads=2)
    assert argv[argv.index("-e") + 1] == "-foo"
    assert argv[-2:] == ["--", "-x.py"]
    assert "--json" in argv and "--hidden" in argv and "--threads=2" in argv
    assert argv.index("--glob=*.py") < argv.index("--glob=!.git")
    assert "--no-config" in argv and "--no-ignore-global" in argv


def test_grep_argv_without_file_has_no_path_argument():
    """A directory search runs rg in that directory with no path argument."""
    argv = command.for_grep("x", rg="/bin/rg")
    assert argv[-2:] == ["-e", "x"]
