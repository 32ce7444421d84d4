"""glob's and grep's rg rules, with real rg: argv, retries, notes, the confirming argv."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from fs_search.activities._config import FsSearchConfig
from fs_search.activities._contract import ErrorCode, GlobRequest, GrepRequest
from fs_search.activities._search import RgStatus, SearchActivities
from fs_search.activities._workspace import Workspace
from fs_search.activities.rg import IGNORE_FILES_SKIPPED
from fs_search.activities.rg._executor import Executor, RgRun, default_backstop
from fs_search.activities.rg._sandbox import Sandbox
from fs_search.activities.storage import FileSpillStore, Storage
from tests.helpers import write_tree

CONFIG = FsSearchConfig.load(
    getenv=lambda _: None, overrides={"sample_over_cap_glob_results": False}
)


class Recording(Executor):
    """The real executor, noting every argv it runs and its finished run (with its
    output as rg wrote it: the digest consumes the run's chunks)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.argvs: list[list[str]] = []
        self.runs: list[RgRun] = []
        self.stdouts: list[bytes] = []

    async def run(self, argv, **kwargs) -> RgRun:
        self.argvs.append(list(argv))
        streamed = bytearray()
        sink = kwargs.get("sink")
        if sink is not None:  # the output handed to the sink as read (a glob's walk)

            def noted(piece: bytes) -> None:
                streamed.extend(piece)
                sink(piece)

            kwargs["sink"] = noted
        found = await super().run(argv, **kwargs)
        self.runs.append(found)
        self.stdouts.append(found.stdout + bytes(streamed))
        return found


@pytest.fixture
def executor() -> Recording:
    """rg under the backstop and a 256 MiB memory limit, without Landlock (so a link to
    /dev/zero is readable and exhausts rg)."""
    return Recording(backstop=default_backstop(), sandbox=Sandbox(landlock_abi=0, memory_mb=256))


def activities(ws: Path, executor: Executor, rg: str, tmp_path: Path) -> SearchActivities:
    store = FileSpillStore(tmp_path / "spill", ttl_hours=CONFIG.spill_ttl_hours)
    return SearchActivities(
        CONFIG, Workspace(ws), executor=executor, storage=Storage.beside(store), rg=RgStatus(rg)
    )


async def test_grep_on_a_file_confirms_pattern_errors_without_the_file(tmp_path, executor, rg_bin):
    """A file target is named after ``--``; the confirming argv is the same search without
    it; a finished search is complete (not partial) and carries no note."""
    ws = write_tree(tmp_path / "ws", {"src/b.py": "hit\n", "src/c.py": "hit\n"})
    acts = activities(ws, executor, rg_bin, tmp_path)
    env = ActivityEnvironment()
    r = await env.run(acts.grep, GrepRequest(pattern="hit", path="src/b.py"))
    [argv] = executor.argvs
    assert argv[-2:] == ["--", "b.py"]
    assert executor.runs[0].returncode == 0 and not r.partial
    assert IGNORE_FILES_SKIPPED not in r.text and [m.path for m in r.matches] == ["src/b.py"]
    assert b"c.py" not in executor.stdouts[0]
    with pytest.raises(ApplicationError) as info:
        await env.run(acts.grep, GrepRequest(pattern="(", path="src/b.py"))
    assert info.value.type == ErrorCode.SEARCH_INVALID_PATTERN
    _, asked, confirming = executor.argvs
    # The confirming run reads no ignore file (it runs in an empty directory).
    assert asked[-2:] == ["--", "b.py"] and "--no-ignore" not in asked
    assert [a for a in confirming if a != "--no-ignore"] == asked[:-2]
    assert "--no-ignore" in confirming


async def test_grep_retries_without_ignore_files_when_one_exhausts_rg(tmp_path, executor, rg_bin):
    """An ignore file too large for rg's memory (a regular file in the tree: nothing the
    worker refuses to let rg read) makes rg abort: the search runs again with --no-ignore
    and the result says ignore files were not applied."""
    huge = "".join(f"x{i}*y\n" for i in range(300_000))
    ws = write_tree(tmp_path / "ws", {"a.txt": "hit\n", ".ignore": huge})
    acts = activities(ws, executor, rg_bin, tmp_path)
    r = await ActivityEnvironment().run(acts.grep, GrepRequest(pattern="hit"))
    argvs = executor.argvs
    assert len(argvs) == 2 and "--no-ignore" not in argvs[0] and "--no-ignore" in argvs[1]
    assert r.text.endswith(f"\n{IGNORE_FILES_SKIPPED}")
    assert executor.runs[1].returncode == 0 and b"a.txt" in executor.stdouts[1]
    assert [m.path for m in r.matches] == ["a.txt"]


async def test_one_files_matches_past_rgs_memory_are_an_overflow(tmp_path, executor, rg_bin):
    """When rg aborts again without ignore files, one file's matches were too many:
    SEARCH_RAW_OUTPUT_OVERFLOW naming the memory limit."""
    ws = write_tree(tmp_path / "ws", {"big.txt": "hit\n" * 3_000_000, "small.txt": "hit\n"})
    acts = activities(ws, executor, rg_bin, tmp_path)
    with pytest.raises(ApplicationError) as info:
        await ActivityEnvironment().run(acts.grep, GrepRequest(pattern="hit"))
    assert info.value.type == ErrorCode.SEARCH_RAW_OUTPUT_OVERFLOW
    assert "FS_SEARCH_RG_MEMORY_MB" in info.value.message


async def test_glob_runs_once_and_confirms_with_its_own_argv(tmp_path, executor, rg_bin):
    """glob has no retry: one run, complete by its exit code, confirmed with the same argv."""
    ws = write_tree(tmp_path / "ws", {"a/x.py": "", "b.txt": ""})
    acts = activities(ws, executor, rg_bin, tmp_path)
    env = ActivityEnvironment()
    r = await env.run(acts.glob, GlobRequest(pattern="**/*.py"))
    [argv] = executor.argvs
    assert executor.stdouts[0] == b"a/x.py\0" and not r.partial and r.paths == ["a/x.py"]
    with pytest.raises(ApplicationError) as info:
        await env.run(acts.glob, GlobRequest(pattern="a/{x"))
    assert info.value.type == ErrorCode.SEARCH_INVALID_PATTERN
    _, asked, confirming = executor.argvs
    assert confirming == asked
