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


def test_the_glob_walk_is_the_sorted_argv_on_one_thread_unsorted():
    """Unsorted, the glob's argv walks on one thread (the order rg's sort keeps for equal
    times), and is otherwise the sorted one."""
    walk = command.for_glob("**", rg="/bin/rg", sort=False)
    assert "--threads=1" in walk and "--sort=modified" not in walk
    assert [a for a in walk if a != "--threads=1"] == [
        a for a in command.for_glob("**", rg="/bin/rg") if a != "--sort=modified"
    ]


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


def test_a_blank_include_is_none():
    """An include of only spaces adds no glob (rg would reject it as a pattern)."""
    assert command.for_grep("x", rg="/bin/rg", include="  ") == command.for_grep("x", rg="/bin/rg")


def test_a_grep_calls_argvs_differ_only_in_ignore_files_and_file_operand():
    """The search applies the chosen ignore files; the fallback none; the pattern check
    none and no file operand (it runs in an empty directory)."""
    chosen = command.IgnoreFiles(parents=False)
    argvs = command.for_grep_call(
        "x", rg="/bin/rg", include="*.py", file_arg="a.py", threads=2, ignore_files=chosen
    )
    assert argvs.search == command.for_grep(
        "x", rg="/bin/rg", include="*.py", file_arg="a.py", threads=2, ignore_files=chosen
    )
    assert "--no-ignore-parent" in argvs.search and "--no-ignore" not in argvs.search
    assert argvs.without_ignore_files == [
        "--no-ignore" if a == "--no-ignore-parent" else a for a in argvs.search
    ]
    assert argvs.clean == argvs.without_ignore_files[:-2]
