"""The workspace itself gone or unreadable (the held root removed, replaced or made
unsearchable): SEARCH_FAILED "the workspace cannot be read", through the real activities and
real rg, never a broken-rg message or a path of the worker's installation.

Through the real worker process (single and ``--workspaces-root``):
tests/worker/test_workspace_gone.py.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from fs_search.activities._contract import GlobRequest, GrepRequest
from tests.helpers import sparse_file, write_tree
from tests.procs import wait_for_rg

GONE = "the workspace cannot be read"


def _remove(ws: Path) -> None:
    shutil.rmtree(ws)


def _replace_by_a_file(ws: Path) -> None:
    shutil.rmtree(ws)
    ws.write_text("a file where the workspace was\n")


def _replace_by_a_directory(ws: Path) -> None:
    shutil.rmtree(ws)
    write_tree(ws, {"a.txt": "needle in another directory\n"})


REQUESTS = [
    GrepRequest(pattern="needle"),
    GrepRequest(pattern="needle", path="a.txt"),
    GrepRequest(pattern="needle", cwd="sub"),
    GlobRequest(pattern="*"),
    GlobRequest(pattern="*.txt", path="sub"),
]


async def _failure(method, req) -> ApplicationError:
    with pytest.raises(ApplicationError) as raised:
        await ActivityEnvironment().run(method, req)
    return raised.value


def _rename_away(ws: Path) -> None:
    ws.rename(ws.with_name("elsewhere"))


@pytest.mark.parametrize(
    "how", [_remove, _replace_by_a_file, _rename_away], ids=lambda f: f.__name__
)
@pytest.mark.parametrize(
    "req", REQUESTS, ids=["grep", "grep-file", "grep-cwd", "glob", "glob-path"]
)
async def test_a_workspace_gone_before_the_call_cannot_be_read(tmp_path, make_activities, how, req):
    ws = write_tree(tmp_path / "ws", {"a.txt": "needle\n", "sub/b.txt": "needle\n"})
    acts = await make_activities(ws)
    how(ws)
    error = await _failure(getattr(acts, "grep" if isinstance(req, GrepRequest) else "glob"), req)
    assert error.type == "SEARCH_FAILED" and error.non_retryable
    assert GONE in error.message, error.message
    assert "ripgrep" not in error.message


async def test_a_workspace_removed_while_rg_runs_cannot_be_read(tmp_path, make_activities):
    """rg is reading a large file when the whole workspace is emptied and removed: whatever
    rg made of it, the call says the workspace is gone."""
    ws = write_tree(tmp_path / "ws", {"a.txt": "needle\n"})
    sparse_file(ws / "huge.bin", gigabytes=20)
    acts = await make_activities(ws)
    call = asyncio.ensure_future(
        ActivityEnvironment().run(
            acts.grep, GrepRequest(pattern="needle", path="huge.bin", timeout_ms=60_000)
        )
    )
    await wait_for_rg(acts)
    # The workspace goes first, while rg still reads the file (held open, by rg and by us);
    # only then is the file emptied, so rg ends (at EOF, or SIGBUS if mapped) once the
    # workspace is surely gone.
    held = os.open(ws / "huge.bin", os.O_WRONLY)
    try:
        await asyncio.to_thread(shutil.rmtree, ws)
        os.ftruncate(held, 0)
    finally:
        os.close(held)
    with pytest.raises(ApplicationError) as raised:
        await asyncio.wait_for(call, 90)
    assert raised.value.type == "SEARCH_FAILED"
    assert GONE in raised.value.message, raised.value.message


async def test_a_workspace_renamed_away_and_back_is_refused_then_served(tmp_path, make_activities):
    """Each call runs in the directory the workspace's path names: renamed away, nothing is
    searched (the held directory is not, under its new name); back again, it is served as
    the same directory (same identity)."""
    ws = write_tree(tmp_path / "ws", {"a.txt": "needle\n"})
    acts = await make_activities(ws)
    before = await ActivityEnvironment().run(acts.grep, GrepRequest(pattern="needle"))
    ws.rename(tmp_path / "elsewhere")
    away = await _failure(acts.grep, GrepRequest(pattern="needle"))
    (tmp_path / "elsewhere").rename(ws)
    back = await ActivityEnvironment().run(acts.grep, GrepRequest(pattern="needle"))
    assert GONE in away.message and away.type == "SEARCH_FAILED", away.message
    assert [m.path for m in back.matches] == ["a.txt"]
    assert back.workspace == before.workspace and back.workspace.root


async def test_a_workspace_re_created_at_its_path_is_served_as_a_new_directory(
    tmp_path, make_activities
):
    """Removed and re-created (or another directory moved in): the next call searches the new
    directory, and its result names a new identity (the old one is gone for good)."""
    ws = write_tree(tmp_path / "ws", {"a.txt": "needle in the first\n"})
    acts = await make_activities(ws)
    first = await ActivityEnvironment().run(acts.grep, GrepRequest(pattern="needle"))
    _replace_by_a_directory(ws)
    second = await ActivityEnvironment().run(acts.grep, GrepRequest(pattern="needle"))
    assert [m.line for m in first.matches] == ["needle in the first"]
    assert [m.line for m in second.matches] == ["needle in another directory"]
    assert first.workspace.id == second.workspace.id
    assert first.workspace.root != second.workspace.root
