"""The executor: rg as a process group it always kills, started sandboxed by the fork server
(or directly, under the `timeout` backstop)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from fs_search.activities._contract import ErrorCode
from fs_search.activities._errors import SearchError
from fs_search.activities._held_root import HeldRoot
from fs_search.activities._progress import Progress
from fs_search.activities.rg._executor import Executor, default_backstop
from fs_search.activities.rg._fork_client import SERVER, ForkServerClient, _options
from fs_search.activities.rg._sandbox import FORK_CHILD, Sandbox, sandbox_for
from tests.helpers import sparse_file, write_tree
from tests.procs import alive, exe_of, group, rg_processes, wait_until

MEMORY_MB = 512


@pytest.fixture
def executor(rg_bin) -> Executor:
    """The worker's executor: coreutils `timeout` backstop and the configured sandbox."""
    backstop = default_backstop()
    assert backstop is not None
    return Executor(backstop=backstop, sandbox=sandbox_for("auto", MEMORY_MB, program=rg_bin))


@pytest.fixture
def huge(tmp_path: Path) -> Path:
    """A workspace holding a sparse file rg needs minutes to scan."""
    sparse_file(tmp_path / "ws" / "huge.bin")
    return tmp_path / "ws"


async def members_when_running(
    executor: Executor, rg: str, *, groups: int = 1
) -> list[tuple[int, list[psutil.Process]]]:
    """Each running search's group id and processes, once rg has exec'd in ``groups`` groups."""
    deadline = time.monotonic() + 20
    found: list[tuple[int, list[psutil.Process]]] = []
    while time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        found = [(pgid, alive(group(pgid))) for pgid in executor.live_process_groups]
        running = [(pgid, ps) for pgid, ps in found if any(exe_of(p) == rg for p in ps)]
        if len(running) >= groups:
            return running
    seen = [(pgid, [(p.pid, exe_of(p)) for p in ps]) for pgid, ps in found]
    raise AssertionError(f"rg never started in {groups} group(s): {seen}")


def grep_argv(rg: str, name: str = "huge.bin") -> list[str]:
    return [rg, "--no-config", "-e", "x", name]


async def test_budget_kills_the_whole_group(executor, huge, rg_bin):
    """A run past its budget is SEARCH_ABORTED and every process of its group is gone."""
    task = asyncio.ensure_future(
        executor.run(
            grep_argv(rg_bin), cwd=str(huge), timeout_s=1.0, max_stdout=1 << 20, tree=HeldRoot(huge)
        )
    )
    [(pgid, members)] = await members_when_running(executor, os.path.realpath(rg_bin))
    assert [p.pid for p in members] == [pgid]  # rg leads its own group
    with pytest.raises(SearchError) as info:
        await asyncio.wait_for(task, 10)
    assert info.value.code == ErrorCode.SEARCH_ABORTED and "1000 ms" in info.value.message
    assert alive(members) == [] and executor.live_process_groups == []


async def test_cancellation_kills_the_group_and_reraises(executor, huge, rg_bin):
    """Cancelling a run kills its group before CancelledError propagates."""
    task = asyncio.ensure_future(
        executor.run(
            grep_argv(rg_bin), cwd=str(huge), timeout_s=60, max_stdout=1 << 20, tree=HeldRoot(huge)
        )
    )
    [(_, members)] = await members_when_running(executor, os.path.realpath(rg_bin))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)
    assert alive(members) == [] and executor.live_process_groups == []


async def test_overflow_kills_the_group_at_the_cap(executor, tmp_path, rg_bin):
    """stdout past max_stdout kills the group at once: SEARCH_RAW_OUTPUT_OVERFLOW, with the
    bytes read reported in progress and far less than rg would have written."""
    ws = write_tree(tmp_path / "ws", {f"f{i}.txt": "hit\n" * 20_000 for i in range(100)})
    progress = Progress()
    with pytest.raises(SearchError) as info:
        await executor.run(
            [rg_bin, "--no-config", "--json", "-e", "hit"],
            cwd=str(ws),
            timeout_s=30,
            max_stdout=200_000,
            progress=progress,
            tree=HeldRoot(ws),
        )
    assert info.value.code == ErrorCode.SEARCH_RAW_OUTPUT_OVERFLOW
    assert 200_000 < progress.raw_bytes < 10_000_000
    assert executor.live_process_groups == []
    assert rg_processes(cwd_under=ws) == []


async def test_kill_all_stops_every_running_group(executor, huge, rg_bin):
    """Worker shutdown: kill_all leaves no process of any running search."""
    tasks = [
        asyncio.ensure_future(
            executor.run(
                grep_argv(rg_bin),
                cwd=str(huge),
                timeout_s=60,
                max_stdout=1 << 20,
                tree=HeldRoot(huge),
            )
        )
        for _ in range(2)
    ]
    running = await members_when_running(executor, os.path.realpath(rg_bin), groups=2)
    members = [p for _, ps in running for p in ps]
    await executor.kill_all()
    # SIGKILL reached every group; a big process's teardown may take the kernel a moment.
    await asyncio.to_thread(wait_until, lambda: alive(members) == [], 5)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_rg_leads_its_group_as_a_child_of_the_fork_server(executor, huge, rg_bin):
    """rg is the only member of its group, forked by the fork server (`python -I -S
    _fork_server.py` with the memory limit, the Landlock ABI and the loader's files), with
    the argv unchanged, the memory limit, and none of the worker's or the server's descriptors."""
    tree = HeldRoot(huge)
    task = asyncio.ensure_future(
        executor.run(grep_argv(rg_bin), cwd=str(huge), timeout_s=30, max_stdout=1 << 20, tree=tree)
    )
    try:
        [(pgid, members)] = await members_when_running(executor, os.path.realpath(rg_bin))
        sandbox = executor.sandbox
        assert sandbox is not None and executor.fork_server is not None
        [rg] = members
        assert rg.pid == pgid and rg.cmdline() == grep_argv(rg_bin)
        server = psutil.Process(rg.ppid())
        assert server.pid == executor.fork_server.pid
        assert server.cmdline()[:4] == [sandbox.python, "-I", "-S", SERVER]
        assert server.ppid() == os.getpid() and os.getsid(server.pid) == server.pid
        # Beyond 0-2, only what rg itself opened (the file it searches, under the tree).
        extra = [os.readlink(f"/proc/{rg.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{rg.pid}/fd")]
        assert all(t.startswith(str(huge)) for t in extra[3:] if not t.startswith("anon_inode"))
        assert os.readlink(f"/proc/{rg.pid}/cwd") == str(huge)
        limits = Path(f"/proc/{rg.pid}/limits").read_text()
        [line] = [li for li in limits.splitlines() if li.startswith("Max address space")]
        assert line.split()[3] == str(MEMORY_MB * 1024 * 1024)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_the_fork_server_kills_a_group_at_its_deadline(huge, rg_bin):
    """The backstop: a run nobody stops is SIGKILLed by the server at its deadline."""
    fork_server = ForkServerClient(sandbox_for("auto", MEMORY_MB, program=rg_bin))
    tree = HeldRoot(huge)
    started = time.monotonic()
    proc = await fork_server.spawn(
        grep_argv(rg_bin), cwd=tree.fd, readable=[tree.fd], env={}, deadline_s=0.5
    )
    try:
        assert await asyncio.wait_for(proc.wait(), 10) == -9
        assert time.monotonic() - started < 5
        assert alive(group(proc.pid)) == []
    finally:
        fork_server.close()


async def test_a_deadline_only_kills_its_own_run(huge, rg_bin):
    """A finished run's deadline passing never kills a later run (whose pidfd may have the
    finished one's number)."""
    fork_server = ForkServerClient(sandbox_for("auto", MEMORY_MB, program=rg_bin))
    tree = HeldRoot(huge)
    try:
        quick = await fork_server.spawn(
            [rg_bin, "--version"], cwd=tree.fd, readable=[tree.fd], env={}, deadline_s=0.3
        )
        assert await asyncio.wait_for(quick.wait(), 10) == 0
        slow = await fork_server.spawn(
            grep_argv(rg_bin), cwd=tree.fd, readable=[tree.fd], env={}, deadline_s=60
        )
        await asyncio.sleep(1.0)  # well past the quick run's deadline
        assert slow.returncode is None and alive(group(slow.pid)) != []
        os.killpg(slow.pid, 9)
        assert await asyncio.wait_for(slow.wait(), 10) == -9
    finally:
        fork_server.close()


async def test_rg_dies_with_the_fork_server_and_a_new_server_starts(executor, huge, rg_bin):
    """SIGKILL to the server (as when the worker is SIGKILLed): its rg dies at once
    (PR_SET_PDEATHSIG), the run ends, and the next run starts a new server."""
    task = asyncio.ensure_future(
        executor.run(
            grep_argv(rg_bin), cwd=str(huge), timeout_s=60, max_stdout=1 << 20, tree=HeldRoot(huge)
        )
    )
    [(_, members)] = await members_when_running(executor, os.path.realpath(rg_bin))
    assert executor.fork_server is not None
    first = executor.fork_server.pid
    assert first is not None
    os.kill(first, 9)
    await asyncio.to_thread(wait_until, lambda: alive(members) == [], 5)
    run = await asyncio.wait_for(task, 10)
    assert run.returncode == -9
    again = await executor.run(
        [rg_bin, "--version"], cwd=str(huge), timeout_s=10, max_stdout=1 << 20
    )
    assert again.returncode == 0 and executor.fork_server.pid not in (None, first)


def test_the_fork_server_is_told_the_loader_files_only_under_landlock():
    """The fork server's options: its parent and socket, the module its children confine
    themselves with, the memory limit and (with Landlock) the ABI and each loader file; the
    directory rg may read travels with each run, by descriptor."""
    head = ["--parent", str(os.getpid()), "--socket", "3", "--child-module", FORK_CHILD]
    with_landlock = Sandbox(landlock_abi=7, memory_mb=64, loader=("/ld", "/libc"), python="/py")
    assert _options(with_landlock) == [
        *head, "--memory-mb", "64", "--landlock-abi", "7", "--file", "/ld", "--file", "/libc",
    ]  # fmt: skip
    without = Sandbox(landlock_abi=0, memory_mb=64, loader=("/ld",), python="/py")
    assert _options(without) == [*head, "--memory-mb", "64"]


async def test_rg_sees_none_of_the_workers_environment(tmp_path, rg_bin, monkeypatch):
    """RIPGREP_CONFIG_PATH in the worker's environment does not reach rg."""
    write_tree(tmp_path, {"ws/a.txt": "hit\n", "rgrc": "--quiet\n"})
    ws, config = tmp_path / "ws", tmp_path / "rgrc"
    monkeypatch.setenv("RIPGREP_CONFIG_PATH", str(config))
    # The config would silence rg: this test can fail.
    direct = subprocess.run([rg_bin, "-e", "hit", "a.txt"], cwd=ws, capture_output=True)
    assert direct.stdout == b""
    run = await Executor(backstop=default_backstop()).run(
        [rg_bin, "-e", "hit", "a.txt"], cwd=str(ws), timeout_s=10, max_stdout=1 << 16
    )
    assert (run.returncode, run.stdout) == (0, b"hit\n")


@pytest.mark.parametrize(
    "backstop",
    [True, False],
)
async def test_a_missing_rg_is_search_failed(tmp_path, backstop):
    """An rg that cannot be executed is SEARCH_FAILED, with or without the backstop, in words
    that name no path of the worker's (the log has it)."""
    executor = Executor(backstop=default_backstop() if backstop else None)
    with pytest.raises(SearchError) as info:
        await executor.run(
            [str(tmp_path / "no-rg"), "-e", "x"], cwd=str(tmp_path), timeout_s=5, max_stdout=10
        )
    assert info.value.code == ErrorCode.SEARCH_FAILED and "ripgrep" in info.value.message
    assert "no-rg" not in info.value.message and str(tmp_path) not in info.value.message


async def test_stdout_is_kept_as_read_and_stderr_is_bounded(tmp_path):
    """Output comes back in chunks that join to stdout; stderr keeps its first 64 KiB."""
    script = "import sys; sys.stdout.write('o' * 600_000); sys.stderr.write('e' * 200_000)"
    run = await Executor().run(
        [sys.executable, "-c", script], cwd=str(tmp_path), timeout_s=10, max_stdout=1 << 20
    )
    assert run.returncode == 0 and run.stdout == b"o" * 600_000 and len(run.chunks) >= 1
    assert run.stderr == "e" * 64 * 1024


async def test_nice_lowers_every_thread_of_the_group(executor, huge, rg_bin):
    """``nice`` reaches rg and all its threads (the fork server's thread takes it before it forks rg)."""
    task = asyncio.ensure_future(
        executor.run(
            grep_argv(rg_bin),
            cwd=str(huge),
            timeout_s=60,
            max_stdout=1 << 20,
            tree=HeldRoot(huge),
            nice=7,
        )
    )
    try:
        [(_, members)] = await members_when_running(executor, os.path.realpath(rg_bin))
        rg = next(p for p in members if exe_of(p) == os.path.realpath(rg_bin))
        threads = os.listdir(f"/proc/{rg.pid}/task")
        niceness = {
            int(open(f"/proc/{rg.pid}/task/{t}/stat").read().rsplit(")", 1)[1].split()[16])
            for t in threads
        }
        assert niceness == {7}, niceness
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_runs_beyond_max_running_wait_queued_within_their_budget(huge, rg_bin):
    """With max_running=1, a second run waits (``phase: "queued"``) until the first ends; a
    third whose budget runs out while waiting is SEARCH_ABORTED without ever starting."""
    executor = Executor(backstop=default_backstop(), max_running=1)
    first = asyncio.ensure_future(
        executor.run(grep_argv(rg_bin), cwd=str(huge), timeout_s=60, max_stdout=1 << 20)
    )
    await members_when_running(executor, os.path.realpath(rg_bin))
    waiting = Progress()
    second = asyncio.ensure_future(
        executor.run(
            [rg_bin, "--version"], cwd=str(huge), timeout_s=60, max_stdout=1 << 20, progress=waiting
        )
    )
    with pytest.raises(SearchError) as info:
        await executor.run([rg_bin, "--version"], cwd=str(huge), timeout_s=0.3, max_stdout=1 << 20)
    assert info.value.code == ErrorCode.SEARCH_ABORTED and "waited" in info.value.message
    assert waiting.phase == "queued" and not second.done()
    assert len(executor.live_process_groups) == 1
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)
    assert (await second).returncode == 0 and waiting.phase == "rg"


async def test_each_run_is_confined_to_its_own_tree_and_the_server_to_none(
    executor, tmp_path, rg_bin
):
    """rg is started by a thread of the server that confined itself for that run alone: a
    run in one tree cannot read another, the next run (in the other tree) reads its own, and
    the server itself keeps no confinement and no workspace as its directory."""
    if executor.sandbox is None or not executor.sandbox.landlock_abi:
        pytest.skip("this kernel has no Landlock")
    a, b = tmp_path / "a", tmp_path / "b"
    write_tree(a, {"in_a.txt": "needle\n"})
    write_tree(b, {"in_b.txt": "needle\n"})
    argv = [rg_bin, "--no-config", "-l", "needle"]
    run = await executor.run([*argv, ".", str(b)], cwd=str(a), timeout_s=30,
                             max_stdout=1 << 20, tree=HeldRoot(a))  # fmt: skip
    assert b"".join(run.chunks).decode().split() == ["./in_a.txt"]
    assert run.returncode == 2 and "Permission denied" in run.stderr
    again = await executor.run([*argv, "."], cwd=str(b), timeout_s=30,
                               max_stdout=1 << 20, tree=HeldRoot(b))  # fmt: skip
    assert again.returncode == 0 and b"".join(again.chunks).decode().split() == ["./in_b.txt"]
    server = executor.fork_server.pid if executor.fork_server else None
    assert server is not None
    status = Path(f"/proc/{server}/status").read_text()
    assert "NoNewPrivs:\t0" in status and os.readlink(f"/proc/{server}/cwd") == "/"
