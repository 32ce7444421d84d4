"""The per-tool specs' rg rules, with real rg: argv, retries, notes, the confirming argv."""

from __future__ import annotations

from pathlib import Path

import pytest

from fs_search.activities.beneath import Tree
from fs_search.activities.config import FsSearchConfig
from fs_search.activities.errors import SearchError
from fs_search.activities.executor import Executor, RgRun, default_backstop
from fs_search.activities.models import ErrorCode, GlobRequest, GrepRequest
from fs_search.activities.paths import Workspace
from fs_search.activities.pipeline import SearchSpec
from fs_search.activities.sandbox import Sandbox
from fs_search.activities.specs import IGNORE_FILES_SKIPPED, GlobSpec, GrepSpec
from tests.helpers import Link, write_tree

CONFIG = FsSearchConfig.load(
    getenv=lambda _: None, overrides={"sample_over_cap_glob_results": False}
)


@pytest.fixture
def executor() -> Executor:
    """rg under the backstop and a 256 MiB memory limit, without Landlock (so a link to
    /dev/zero is readable and exhausts rg)."""
    return Executor(backstop=default_backstop(), sandbox=Sandbox(landlock_abi=0, memory_mb=256))


async def search(spec: SearchSpec, req, ws: Path, executor: Executor, rg: str):
    """The spec's search over ``ws`` through the real executor; also every argv it ran."""
    target = Workspace(ws).target(cwd=req.cwd, path=req.path, tool=spec.name)
    argvs: list[list[str]] = []

    async def run(argv: list[str]) -> RgRun:
        argvs.append(argv)
        return await executor.run(
            argv, cwd=target.run_dir, timeout_s=30, max_stdout=1 << 31, tree=Tree(ws)
        )

    return await spec.search(req, target=target, rg=rg, run=run), argvs


async def test_grep_on_a_file_confirms_pattern_errors_without_the_file(tmp_path, executor, rg_bin):
    """A file target is named after ``--``; the confirming argv is the same search without
    it; a finished search is complete and carries no note."""
    ws = write_tree(tmp_path / "ws", {"src/b.py": "hit\n", "src/c.py": "hit\n"})
    searched, argvs = await search(
        GrepSpec(CONFIG), GrepRequest(pattern="hit", path="src/b.py"), ws, executor, rg_bin
    )
    [argv] = argvs
    assert argv[-2:] == ["--", "b.py"] and searched.clean_argv == argv[:-2]
    assert searched.run.returncode == 0 and searched.complete and searched.note is None
    assert b"c.py" not in searched.run.stdout


async def test_grep_retries_without_ignore_files_when_one_exhausts_rg(tmp_path, executor, rg_bin):
    """An endless ignore file makes rg abort: the search runs again with --no-ignore and the
    result says ignore files were not applied."""
    ws = write_tree(tmp_path / "ws", {"a.txt": "hit\n", ".ignore": Link("/dev/zero")})
    searched, argvs = await search(
        GrepSpec(CONFIG), GrepRequest(pattern="hit"), ws, executor, rg_bin
    )
    assert len(argvs) == 2 and "--no-ignore" not in argvs[0] and "--no-ignore" in argvs[1]
    assert searched.note == IGNORE_FILES_SKIPPED
    assert searched.run.returncode == 0 and b"a.txt" in searched.run.stdout
    assert "--no-ignore" not in searched.clean_argv  # the confirmation sees the ask itself


async def test_one_files_matches_past_rgs_memory_are_an_overflow(tmp_path, executor, rg_bin):
    """When rg aborts again without ignore files, one file's matches were too many:
    SEARCH_RAW_OUTPUT_OVERFLOW naming the memory limit."""
    ws = write_tree(tmp_path / "ws", {"big.txt": "hit\n" * 3_000_000, "small.txt": "hit\n"})
    with pytest.raises(SearchError) as info:
        await search(GrepSpec(CONFIG), GrepRequest(pattern="hit"), ws, executor, rg_bin)
    assert info.value.code == ErrorCode.SEARCH_RAW_OUTPUT_OVERFLOW
    assert "FS_SEARCH_RG_MEMORY_MB" in info.value.message


async def test_glob_runs_once_and_confirms_with_its_own_argv(tmp_path, executor, rg_bin):
    """glob has no retry: one run, complete by its exit code, confirmed with the same argv."""
    ws = write_tree(tmp_path / "ws", {"a/x.py": "", "b.txt": ""})
    searched, argvs = await search(
        GlobSpec(CONFIG), GlobRequest(pattern="**/*.py"), ws, executor, rg_bin
    )
    assert argvs == [searched.clean_argv] and searched.complete and searched.note is None
    assert searched.run.stdout == b"a/x.py\0"
