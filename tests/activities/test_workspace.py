"""The search target beneath the held workspace root: confinement, VCS metadata, display
(the walk itself: test_held_root.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fs_search.activities._contract import ErrorCode
from fs_search.activities._errors import SearchError
from fs_search.activities._workspace import Workspace, join_display, normalise_display
from tests.helpers import Fifo, Link, write_tree


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A workspace with a nested source tree and a sibling directory outside it."""
    write_tree(
        tmp_path / "ws",
        {"src/a/x.py": "x\n", "src/b.py": "b\n", "docs/readme.md": "r\n", ".git/config": "c\n"},
    )
    write_tree(tmp_path / "outside", {"secret.txt": "s\n"})
    return tmp_path / "ws"


def code_of(call) -> ErrorCode:
    with pytest.raises(SearchError) as info:
        call()
    return info.value.code


# --- Workspace.target -----------------------------------------------------------------


def test_a_symlink_out_of_the_workspace_is_an_argument_error(ws):
    """A path whose link leads outside is INVALID_ARGUMENT, existing or not."""
    write_tree(ws, {"out": Link(ws.parent / "outside")})
    workspace = Workspace(ws)
    assert code_of(lambda: workspace.target(cwd=None, path="out", tool="grep")) == (
        ErrorCode.INVALID_ARGUMENT
    )
    assert code_of(lambda: workspace.target(cwd=None, path="out/none", tool="grep")) == (
        ErrorCode.INVALID_ARGUMENT
    )
    assert code_of(lambda: workspace.target(cwd=None, path="../outside", tool="glob")) == (
        ErrorCode.INVALID_ARGUMENT
    )


def test_a_missing_path_inside_is_search_failed(ws):
    """A path inside the workspace that does not exist is SEARCH_FAILED, not an argument error."""
    workspace = Workspace(ws)
    assert code_of(lambda: workspace.target(cwd=None, path="src/none", tool="grep")) == (
        ErrorCode.SEARCH_FAILED
    )


@pytest.mark.parametrize("path", [".git", "src/../.git", "vcs", "vcs/config", "src/.hg/x"])
def test_vcs_components_are_refused_directly_via_dotdot_or_a_symlink(ws, path):
    """A path naming VCS metadata, however it gets there, is INVALID_ARGUMENT."""
    write_tree(ws, {"vcs": Link(".git")})
    workspace = Workspace(ws)
    with pytest.raises(SearchError) as info:
        workspace.target(cwd=None, path=path, tool="grep")
    assert info.value.code == ErrorCode.INVALID_ARGUMENT and "VCS" in info.value.message


def test_a_vcs_cwd_is_refused(ws):
    """cwd is held to the same rule as path."""
    with pytest.raises(SearchError) as info:
        Workspace(ws).target(cwd=".git", path=None, tool="glob")
    assert info.value.code == ErrorCode.INVALID_ARGUMENT


def test_cwd_must_exist_and_be_a_directory(ws):
    """A missing cwd, or a file, is INVALID_ARGUMENT; the default is the workspace root."""
    workspace = Workspace(ws)
    for cwd in ("nope", "src/b.py"):
        assert code_of(lambda cwd=cwd: workspace.target(cwd=cwd, path=None, tool="glob")) == (
            ErrorCode.INVALID_ARGUMENT
        )
    root = workspace.target(cwd=None, path=None, tool="glob")
    assert (root.run_dir, root.file_arg, root.prefix, root.root) == (str(ws), None, "", ".")


def test_glob_on_a_file_is_an_argument_error_and_grep_runs_beside_it(ws):
    """glob wants a directory; grep on a file runs in its directory and names it."""
    workspace = Workspace(ws)
    assert code_of(lambda: workspace.target(cwd=None, path="src/b.py", tool="glob")) == (
        ErrorCode.INVALID_ARGUMENT
    )
    target = workspace.target(cwd=None, path="./src/b.py", tool="grep")
    assert (target.run_dir, target.file_arg, target.root) == (str(ws / "src"), "b.py", "src/b.py")
    assert target.display("b.py") == "src/b.py"


def test_a_fifo_target_is_search_failed(ws):
    """A FIFO named as the path would block rg: SEARCH_FAILED before rg runs."""
    write_tree(ws, {"pipe": Fifo()})
    with pytest.raises(SearchError) as info:
        Workspace(ws).target(cwd=None, path="pipe", tool="grep")
    assert info.value.code == ErrorCode.SEARCH_FAILED and "regular file" in info.value.message


def test_paths_are_shown_under_the_path_as_given(ws):
    """``./src/`` shows as ``src/...``; an absolute path keeps absolute display paths; cwd
    moves the base."""
    workspace = Workspace(ws)
    assert workspace.target(cwd=None, path="./src/", tool="glob").display("a/x.py") == (
        "src/a/x.py"
    )
    absolute = workspace.target(cwd=None, path=str(ws / "src"), tool="glob")
    assert absolute.display("./b.py") == f"{ws}/src/b.py"
    nested = workspace.target(cwd="src", path="a", tool="glob")
    assert (nested.run_dir, nested.display("x.py")) == (str(ws / "src" / "a"), "a/x.py")


def test_a_symlink_before_dotdot_keeps_the_path_as_given(ws):
    """When the lexical form names another place, paths are shown under the path as given."""
    write_tree(ws, {"docs/deep": Link(ws / "src" / "a")})
    target = Workspace(ws).target(cwd=None, path="docs/deep/..", tool="glob")
    assert target.run_dir == str(ws / "src")
    assert target.display("b.py") == "docs/deep/../b.py"


def test_a_workspace_must_exist_and_be_a_directory(tmp_path):
    """A missing or non-directory workspace is refused at construction."""
    write_tree(tmp_path, {"f": ""})
    for root in (tmp_path / "none", tmp_path / "f"):
        with pytest.raises(ValueError):
            Workspace(root)


@pytest.mark.parametrize(
    ("given", "shown"),
    [(None, ""), ("", ""), (".", ""), ("./src/", "src"), ("a//b/../c", "a/c"), ("/abs/", "/abs")],
)
def test_normalise_display(given, shown):
    """Display prefixes drop ``./``, trailing slashes and ``.``; absolute stays absolute."""
    assert normalise_display(given) == shown


def test_join_display_never_starts_with_dot_slash():
    """rg's ``./`` is dropped and a prefix ending in ``/`` is not doubled."""
    assert join_display("", "./a.py") == "a.py"
    assert join_display("src", "./a.py") == "src/a.py"
    assert join_display("/", "a.py") == "/a.py"
