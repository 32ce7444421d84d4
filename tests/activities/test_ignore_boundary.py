"""Ignore files: the workspace root is the boundary, both ways (docs/security.md, issue 38).

Every ignore file inside the workspace applies as rg applies it from the workspace root,
whatever ``path``/``cwd`` the model gives; none above the workspace is ever applied; and no
ignore file can hang, fail or leak a search — links to rg's own output, to another
process's descriptors, to ``/dev`` and ``/proc`` — with the kernel sandbox on and off.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from fs_search.activities._contract import GrepRequest, GrepResult
from fs_search.activities._ignore_files import PARENTS_SKIPPED, SOME_SKIPPED
from fs_search.activities.rg import IGNORE_FILES_SKIPPED
from fs_search.activities.rg._fork_child import landlock_abi
from tests.helpers import Fifo, Link, write_tree

needs_landlock = pytest.mark.skipif(landlock_abi() == 0, reason="this kernel has no Landlock")
MODES = [pytest.param("auto", marks=needs_landlock, id="landlock"), pytest.param("off", id="off")]
NOTES = (SOME_SKIPPED, PARENTS_SKIPPED, IGNORE_FILES_SKIPPED)


async def grep(acts, **fields) -> GrepResult:
    return await ActivityEnvironment().run(acts.grep, GrepRequest(pattern="needle", **fields))


def paths(result: GrepResult) -> list[str]:
    return sorted({m.path for m in result.matches})


def notes(result: GrepResult) -> list[str]:
    return [n for n in NOTES if n in result.text]


def git_workspace(base: Path) -> Path:
    """The issue's minimal case: a git workspace whose root .gitignore hides ``*.log``."""
    return write_tree(
        base / "ws",
        {
            ".git/HEAD": "ref: refs/heads/main\n",
            ".gitignore": "*.log\n/top-only.txt\n",
            "sub/a.log": "needle\n",
            "sub/b.txt": "needle\n",
            "sub/top-only.txt": "needle\n",
            "sub/deep/c.log": "needle\n",
            "top-only.txt": "needle\n",
            "kept.txt": "needle\n",
        },
    )


@pytest.mark.parametrize("mode", MODES)
async def test_root_ignore_files_apply_below_the_root(tmp_path, make_activities, mode):
    """A root .gitignore hides the same files from the root, with ``path`` below it and with
    ``cwd`` below it; an anchored pattern stays anchored at the root (``/top-only.txt``
    hides the root's file, not ``sub/top-only.txt``)."""
    ws = git_workspace(tmp_path)
    acts = await make_activities(ws, sandbox=mode)
    root = await grep(acts)
    assert paths(root) == ["kept.txt", "sub/b.txt", "sub/top-only.txt"]
    below = await grep(acts, path="sub")
    assert paths(below) == ["sub/b.txt", "sub/top-only.txt"]
    assert paths(await grep(acts, path="./sub/")) == ["sub/b.txt", "sub/top-only.txt"]
    assert paths(await grep(acts, cwd="sub")) == ["b.txt", "top-only.txt"]
    assert paths(await grep(acts, cwd="sub", path="deep")) == []
    assert paths(await grep(acts, path=str(ws / "sub"))) == [
        str(ws / "sub/b.txt"),
        str(ws / "sub/top-only.txt"),
    ]
    for result in (root, below):
        assert notes(result) == [], result.text
    # A file named explicitly is searched whatever the ignore files say (rg's rule).
    assert paths(await grep(acts, path="sub/a.log")) == ["sub/a.log"]


@pytest.mark.parametrize("mode", MODES)
async def test_gitignore_applies_only_inside_a_git_repository(tmp_path, make_activities, mode):
    """Without a .git, .gitignore is inert (rg's rule) — from the root and from below; an
    .ignore applies either way."""
    ws = write_tree(
        tmp_path / "ws",
        {
            ".gitignore": "*.log\n",
            ".ignore": "*.tmp\n",
            "sub/a.log": "needle\n",
            "sub/b.tmp": "needle\n",
        },
    )
    acts = await make_activities(ws, sandbox=mode)
    assert paths(await grep(acts)) == ["sub/a.log"]
    assert paths(await grep(acts, path="sub")) == ["sub/a.log"]


@pytest.mark.parametrize("mode", MODES)
async def test_nested_repository_and_negations_below_the_root(tmp_path, make_activities, mode):
    """A nested repository stops the outer .gitignore (rg's rule) but not the outer .ignore;
    a negation in a deeper file wins over the root's pattern, from anywhere."""
    ws = write_tree(
        tmp_path / "ws",
        {
            ".git/HEAD": "ref: refs/heads/main\n",
            ".gitignore": "*.gen\n",
            ".ignore": "*.tmp\n",
            "pkg/.gitignore": "!keep.gen\n",
            "pkg/src/keep.gen": "needle\n",
            "pkg/src/drop.gen": "needle\n",
            "vendor/inner/.git/HEAD": "ref: refs/heads/main\n",
            "vendor/inner/lib/x.gen": "needle\n",
            "vendor/inner/lib/y.tmp": "needle\n",
        },
    )
    acts = await make_activities(ws, sandbox=mode)
    assert paths(await grep(acts)) == ["pkg/src/keep.gen", "vendor/inner/lib/x.gen"]
    assert paths(await grep(acts, path="pkg/src")) == ["pkg/src/keep.gen"]
    assert paths(await grep(acts, path="vendor/inner/lib")) == ["vendor/inner/lib/x.gen"]
    assert paths(await grep(acts, cwd="vendor/inner", path="lib")) == ["lib/x.gen"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("where", ["root", "sub"])
async def test_ignore_files_above_the_workspace_never_apply(tmp_path, make_activities, mode, where):
    """An .ignore (and a .gitignore in a repository) above the workspace hide nothing in it.
    Under Landlock rg cannot read them; without it the worker sees them first and has rg
    apply none above the search root (saying so when that leaves out the workspace's own
    ones between its root and the search root)."""
    write_tree(
        tmp_path,
        {
            ".ignore": "b.txt\n",
            ".gitignore": "*.txt\n",
            ".git/HEAD": "ref: refs/heads/main\n",
            ".git/info/exclude": "*\n",
        },
    )
    ws = write_tree(tmp_path / "ws", {"sub/b.txt": "needle\n", "sub/c.md": "needle\n"})
    acts = await make_activities(ws, sandbox=mode)
    path = "sub" if where == "sub" else None
    result = await grep(acts, path=path)
    assert paths(result) == ["sub/b.txt", "sub/c.md"]
    expected = [PARENTS_SKIPPED] if (mode == "off" and path) else []
    assert notes(result) == expected, result.text


OWN_OUTPUT = ["/dev/stdout", "/dev/stderr", "/proc/self/fd/1", "/proc/self/fd/2", "/dev/fd/1"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("target", OWN_OUTPUT)
@pytest.mark.parametrize("name", [".ignore", "sub/.gitignore", "sub/.rgignore"])
async def test_an_ignore_file_linked_to_rgs_own_output_never_hangs(
    tmp_path, make_activities, mode, target, name
):
    """rg's output is a socket (it cannot be opened again): the link is unreadable, and the
    search answers at once — from the root and with ``path`` below it."""
    ws = write_tree(
        tmp_path / "ws",
        {".git/HEAD": "x\n", "sub/a.txt": "needle\n", "b.txt": "needle\n", name: Link(target)},
    )
    acts = await make_activities(ws, sandbox=mode)
    started = time.monotonic()
    whole = await grep(acts, timeout_ms=60_000)
    below = await grep(acts, path="sub", timeout_ms=60_000)
    assert time.monotonic() - started < 30  # a hang would take both whole budgets
    assert paths(whole) == ["b.txt", "sub/a.txt"]
    assert paths(below) == ["sub/a.txt"]
    # Without Landlock the worker never lets rg open it; under Landlock rg cannot.
    assert notes(whole) == ([SOME_SKIPPED] if mode == "off" else [])
    assert IGNORE_FILES_SKIPPED not in whole.text
    assert not acts.executor.live_process_groups


@pytest.mark.parametrize("mode", MODES)
async def test_an_ignore_file_linked_to_the_workers_descriptors_reads_nothing(
    tmp_path, make_activities, mode
):
    """``.ignore -> /proc/<worker>/fd/<pipe>``: the worker's pipe is neither read (its bytes
    stay) nor waited on. Landlock denies another process's descriptors; without it the
    worker refuses the link before rg starts."""
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, b"needle*\n")
        ws = write_tree(
            tmp_path / "ws",
            {"a.txt": "needle\n", ".ignore": Link(f"/proc/{os.getpid()}/fd/{read_end}")},
        )
        acts = await make_activities(ws, sandbox=mode)
        result = await grep(acts, timeout_ms=60_000)
        assert paths(result) == ["a.txt"]
        os.set_blocking(read_end, False)
        assert os.read(read_end, 100) == b"needle*\n"
    finally:
        os.close(read_end)
        os.close(write_end)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("secret_line", [True, False])
async def test_an_ignore_file_linked_outside_is_no_oracle(
    tmp_path, make_activities, mode, secret_line
):
    """`.ignore -> outside/secret`: whether the outside file holds the line ``guess.txt``
    (or exists at all) never changes what the model sees of the planted ``guess.txt``."""
    outside = write_tree(tmp_path / "outside", {"other": "x\n"})
    if secret_line:
        (outside / "secret").write_text("guess.txt\n")
    ws = write_tree(
        tmp_path / "ws",
        {
            "guess.txt": "needle\n",
            "sub/guess.txt": "needle\n",
            "sub/.ignore": Link(outside / "secret"),
        },
    )
    acts = await make_activities(ws, sandbox=mode)
    assert paths(await grep(acts)) == ["guess.txt", "sub/guess.txt"]
    assert paths(await grep(acts, path="sub")) == ["sub/guess.txt"]


@pytest.mark.parametrize("mode", MODES)
async def test_unsafe_kind_is_left_out_and_the_rest_applies(tmp_path, make_activities, mode):
    """A FIFO .gitignore deep in the tree: the .ignore files still apply, the search answers
    in time; without Landlock the .gitignore kind is left out (saying so) and never opened."""
    ws = write_tree(
        tmp_path / "ws",
        {
            ".git/HEAD": "x\n",
            ".ignore": "*.tmp\n",
            ".gitignore": "*.log\n",
            "deep/er/.gitignore": Fifo(),
            "a.tmp": "needle\n",
            "a.log": "needle\n",
            "a.txt": "needle\n",
        },
    )
    acts = await make_activities(ws, sandbox=mode)
    result = await grep(acts, timeout_ms=60_000)
    if mode == "off":
        assert paths(result) == ["a.log", "a.txt"]
        assert notes(result) == [SOME_SKIPPED]
    else:
        assert paths(result) == ["a.txt"]
        assert notes(result) == []


# --- issue 46: the minimal cases rg 14 got wrong below a repository's root ---------------


def git_repo(base: Path, files: dict[str, str]) -> Path:
    return write_tree(base / "ws", {".git/HEAD": "ref: refs/heads/main\n", **files})


@pytest.mark.parametrize("mode", MODES)
async def test_double_star_node_modules_hides_a_packages_dependencies(
    tmp_path, make_activities, mode
):
    """Root ``**/node_modules/**`` (pnpm's own .gitignore): ``path=pkg`` does not show
    ``pkg/node_modules/dep/index.js``, which a search from the root hides (rg 14 showed it)."""
    ws = git_repo(
        tmp_path,
        {
            ".gitignore": "**/node_modules/**\n",
            "pkg/index.js": "needle\n",
            "pkg/node_modules/dep/index.js": "needle\n",
            "pkg/node_modules/dep/sub/deep.js": "needle\n",
            "node_modules/top/index.js": "needle\n",
        },
    )
    acts = await make_activities(ws, sandbox=mode)
    assert paths(await grep(acts)) == ["pkg/index.js"]
    assert paths(await grep(acts, path="pkg")) == ["pkg/index.js"]
    assert paths(await grep(acts, cwd="pkg")) == ["index.js"]
    assert paths(await grep(acts, path="pkg/node_modules/dep")) == []


@pytest.mark.parametrize("mode", MODES)
async def test_a_directorys_files_pattern_applies_from_a_parent(tmp_path, make_activities, mode):
    """Root ``.ignore`` ``doc/book/src/commands/*`` with a negation (cargo's own):
    ``path=doc/book`` hides the files it hides from the root (rg 14 showed them)."""
    ws = write_tree(
        tmp_path / "ws",
        {
            ".ignore": "doc/book/src/commands/*\n!doc/book/src/commands/index.md\n",
            "doc/book/src/guide.md": "needle\n",
            **{f"doc/book/src/commands/cargo-{n}.md": "needle\n" for n in ("add", "build", "test")},
            "doc/book/src/commands/index.md": "needle\n",
        },
    )
    acts = await make_activities(ws, sandbox=mode)
    want = ["doc/book/src/commands/index.md", "doc/book/src/guide.md"]
    assert paths(await grep(acts)) == want
    assert paths(await grep(acts, path="doc/book")) == want
    assert paths(await grep(acts, cwd="doc/book", path="src")) == [
        "src/commands/index.md",
        "src/guide.md",
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_an_anchored_negation_deep_down_applies_from_a_parent(
    tmp_path, make_activities, mode
):
    """``/app/src/storage/*`` then ``!/app/src/storage/x.rs``: ``path=app`` keeps ``x.rs``,
    which the root search shows (rg 14 dropped it), and hides ``y.rs``."""
    ws = git_repo(
        tmp_path,
        {
            ".gitignore": "/app/src/storage/*\n!/app/src/storage/x.rs\n",
            "app/src/main.rs": "needle\n",
            "app/src/storage/x.rs": "needle\n",
            "app/src/storage/y.rs": "needle\n",
        },
    )
    acts = await make_activities(ws, sandbox=mode)
    want = ["app/src/main.rs", "app/src/storage/x.rs"]
    assert paths(await grep(acts)) == want
    assert paths(await grep(acts, path="app")) == want
    assert paths(await grep(acts, path="app/src")) == want
    assert paths(await grep(acts, cwd="app/src", path="storage")) == ["storage/x.rs"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_search_root_inside_an_ignored_directory_is_searched(
    tmp_path, make_activities, mode
):
    """``path=build``, ``path=.venv/lib``: the model named them, so they are searched (as
    rg searches a path it is given) though the root's ignore files hide them; beneath them
    those files still apply (``*.log``, ``**/node_modules/**``)."""
    ws = git_repo(
        tmp_path,
        {
            ".gitignore": "/build\n.venv/\n*.log\n**/node_modules/**\n",
            "src/a.py": "needle\n",
            "build/lib/a.py": "needle\n",
            "build/out.log": "needle\n",
            ".venv/lib/python3.11/site-packages/pkg/mod.py": "needle\n",
            ".venv/lib/python3.11/site-packages/pkg/node_modules/x.js": "needle\n",
        },
    )
    acts = await make_activities(ws, sandbox=mode)
    assert paths(await grep(acts)) == ["src/a.py"]
    assert paths(await grep(acts, path="build")) == ["build/lib/a.py"]
    assert paths(await grep(acts, cwd="build")) == ["lib/a.py"]
    assert paths(await grep(acts, path=".venv/lib")) == [
        ".venv/lib/python3.11/site-packages/pkg/mod.py"
    ]
    assert paths(await grep(acts, cwd=".venv", path="lib/python3.11")) == [
        "lib/python3.11/site-packages/pkg/mod.py"
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_a_case_insensitive_alternation_matches(tmp_path, make_activities, mode):
    """``(?i:e.x|ex)`` matches ``e-x`` (rg 14.1.0 missed it: upstream #2884)."""
    ws = write_tree(tmp_path / "ws", {"a.txt": "e-x\nE-X\nnothing\n"})
    acts = await make_activities(ws, sandbox=mode)
    result = await ActivityEnvironment().run(acts.grep, GrepRequest(pattern="(?i:e.x|ex)"))
    assert [(m.line_number, m.line) for m in result.matches] == [(1, "e-x"), (2, "E-X")]
