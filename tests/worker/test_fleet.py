"""One worker process for a workspaces root (docs/workers.md), on the real dev server with real rg."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.worker import Worker

from fs_search.activities._config import FsSearchConfig
from fs_search.activities._contract import ErrorCode, task_queue_for
from fs_search.activities.storage import local_storage
from fs_search.worker import build_services
from fs_search.worker._fleet import Fleet, scan_root
from fs_search.worker._queue_owner import QueueOwners
from tests.helpers import sparse_file, write_tree
from tests.oracles import running_for
from tests.procs import WorkerProcess, alive, rg_processes
from tests.workflows_under_test import CatalogueWorkflow, MixedCalls, MixedCallsWorkflow, Options

# --- scanning ------------------------------------------------------------------------------


def test_scan_finds_valid_ids_and_names_what_it_skips(tmp_path):
    root = tmp_path / "root"
    for name in ("a", "B-2", "x.y_z", "bad name", "-dash", ".hidden", "é"):
        (root / name).mkdir(parents=True)
    (root / "file.txt").write_text("not a workspace")
    (root / "bad\nline").mkdir()
    scan = scan_root(str(root))
    assert sorted(scan.found) == ["B-2", "a", "x.y_z"]
    assert scan.found["a"] == os.path.realpath(root / "a")
    assert sorted(scan.skipped) == ["-dash", "bad\nline", "bad name", "é"]
    assert all("not a valid workspace id" in why for why in scan.skipped.values())


def test_scan_resolves_links_that_stay_under_the_root(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "real").mkdir(parents=True)
    outside.mkdir()
    os.symlink(root / "real", root / "alias")
    os.symlink(outside, root / "escape")
    os.symlink(root, root / "itself")
    os.symlink(root / "missing", root / "dangling")
    scan = scan_root(str(root))
    assert scan.found == {
        "real": os.path.realpath(root / "real"),
        "alias": os.path.realpath(root / "real"),
    }
    assert sorted(scan.skipped) == ["escape", "itself"]
    assert "outside the workspaces root" in scan.skipped["escape"]


def test_scan_records_which_directory_each_entry_names(tmp_path):
    """Each found entry's (st_dev, st_ino): a link and its target are one directory; a
    directory replaced under the same name while the old one is held (as an attached
    workspace holds its root) is another."""
    root = tmp_path / "root"
    (root / "real").mkdir(parents=True)
    os.symlink(root / "real", root / "alias")
    st = os.stat(root / "real")
    assert scan_root(str(root)).identities == {
        "real": (st.st_dev, st.st_ino),
        "alias": (st.st_dev, st.st_ino),
    }
    held = os.open(root / "real", os.O_PATH)  # an unheld inode number may be reused at once
    try:
        shutil.rmtree(root / "real")
        (root / "real").mkdir()
        again = os.stat(root / "real")
        assert scan_root(str(root)).identities["real"] == (again.st_dev, again.st_ino)
        assert (again.st_dev, again.st_ino) != (st.st_dev, st.st_ino)
    finally:
        os.close(held)


# --- serving -------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _fleet(
    dev_env,
    root: Path,
    spill: Path,
    *,
    scan_interval: float = 0.2,
    host_id: str | None = None,
    owners: QueueOwners | None = None,
    client: Client | None = None,
    events: str | None = None,
    **settings,
) -> AsyncIterator[tuple[Fleet, str]]:
    """A Fleet over ``root`` (scanned every 0.2 s) and a workflow worker; yields its queue.

    ``client``: the fleet's client (default the dev server's; Temporal allows one worker per
    queue and client, so a second "host" on the same queues needs its own); ``events``: how
    the fleet learns of changes (default the config's: filesystem events)."""
    settings.setdefault("sample_over_cap_glob_results", False)
    config = FsSearchConfig.load(getenv=lambda _: None, overrides=settings)
    services = await build_services(config, storage=local_storage(spill), workspaces_root=True)
    fleet = Fleet(
        client or dev_env.client,
        services,
        root,
        scan_interval=scan_interval,
        host_id=host_id,
        owners=owners,
        events=events,  # type: ignore[arg-type]
    )
    stop = asyncio.Event()
    queue = f"wf-{uuid.uuid4()}"
    running = asyncio.create_task(fleet.run(stop))
    try:
        async with Worker(
            dev_env.client, task_queue=queue, workflows=[MixedCallsWorkflow, CatalogueWorkflow]
        ):
            yield fleet, queue
    finally:
        stop.set()
        await asyncio.wait_for(running, 60)
        await services.executor.kill_all()
        services.offload.shutdown()


async def _calls(dev_env, queue: str, calls, *, timeout_ms: int = 30_000, **options):
    spec = MixedCalls(calls=calls, timeout_ms=timeout_ms, **options)
    return await dev_env.client.execute_workflow(
        MixedCallsWorkflow.run, spec, id=f"wf-{uuid.uuid4()}", task_queue=queue
    )


async def _until(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


def _ids(prefix: str, n: int) -> list[str]:
    tag = uuid.uuid4().hex[:6]
    return [f"{prefix}-{tag}-{i}" for i in range(n)]


async def test_fifty_workspaces_each_answer_with_their_own_tree(dev_env, tmp_path):
    root = tmp_path / "root"
    ids = _ids("w", 50)
    for i, wid in enumerate(ids):
        write_tree(root / wid, {f"own_{i}.txt": f"marker {wid}\n"})
    async with _fleet(dev_env, root, tmp_path / "spill") as (fleet, queue):
        await _until(lambda: len(fleet.attached) == 50, 60)  # 50 queue checks, 10/s
        calls = [(wid, "glob", {"pattern": "*.txt"}) for wid in ids]
        calls += [(wid, "grep", {"pattern": "marker"}) for wid in ids]
        results = await _calls(dev_env, queue, calls)
    for i, wid in enumerate(ids):
        globbed, grepped = results[i], results[50 + i]
        assert globbed.result.paths == [f"own_{i}.txt"], globbed.text
        assert [m.line for m in grepped.result.matches] == [f"marker {wid}"], grepped.text


async def test_attach_by_creating_and_detach_by_removing_a_directory(dev_env, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (wid,) = _ids("late", 1)
    async with _fleet(dev_env, root, tmp_path / "spill") as (fleet, queue):
        write_tree(root / wid, {"hello.txt": "hello\n"})
        (result,) = await _calls(dev_env, queue, [(wid, "grep", {"pattern": "hello"})])
        assert result.result.total == 1
        catalogue = await dev_env.client.execute_workflow(
            CatalogueWorkflow.run,
            Options(workspace_id=wid),
            id=f"wf-{uuid.uuid4()}",
            task_queue=queue,
        )
        assert catalogue.available and catalogue.workspace_id == wid
        shutil.rmtree(root / wid)
        await _until(lambda: wid not in fleet.attached)
        spec = MixedCalls(calls=[(wid, "glob", {"pattern": "*"})], schedule_to_start_ms=1500)
        (gone,) = await dev_env.client.execute_workflow(
            MixedCallsWorkflow.run, spec, id=f"wf-{uuid.uuid4()}", task_queue=queue
        )
    assert gone.is_error and gone.error.code == ErrorCode.SEARCH_FAILED, gone.text


async def test_a_workspace_cannot_read_another_through_its_links(dev_env, tmp_path):
    root = tmp_path / "root"
    a, b = _ids("x", 2)
    write_tree(root / b, {"secret.txt": "the-canary-of-b\n"})
    write_tree(root / a, {"own.txt": "nothing\n"})
    os.symlink(root / b / "secret.txt", root / a / "leak.txt")
    os.symlink(root / b, root / a / "bdir")
    os.symlink(f"../{b}", root / a / "rel")
    async with _fleet(dev_env, root, tmp_path / "spill") as (fleet, queue):
        await _until(lambda: a in fleet.attached and b in fleet.attached)
        results = await _calls(
            dev_env,
            queue,
            [
                (a, "grep", {"pattern": "canary"}),
                (a, "grep", {"pattern": "canary", "path": "bdir"}),
                (a, "grep", {"pattern": "canary", "path": "rel"}),
                (a, "glob", {"pattern": "**/secret*"}),
                (b, "grep", {"pattern": "canary"}),
            ],
        )
    for r in results[:4]:
        assert "the-canary-of-b" not in r.text, r.text
        assert r.is_error or r.result.total == 0, r.text
    assert results[4].result.total == 1  # b itself reads its own file


async def test_a_flooding_workspace_leaves_room_for_a_quiet_one(dev_env, tmp_path):
    root = tmp_path / "root"
    busy, quiet = _ids("f", 2)
    sparse_file(root / busy / "huge.bin", gigabytes=20)
    # Named as the path, rg reads the zeros instead of skipping a binary file: each flood call
    # runs for its whole 4 s budget.
    flood_args = {"pattern": "x", "path": "huge.bin"}
    write_tree(root / quiet, {"q.txt": "quiet\n"})
    async with _fleet(
        dev_env, root, tmp_path / "spill", max_concurrent_searches=6, max_concurrent_per_workspace=2
    ) as (fleet, queue):
        await _until(lambda: len(fleet.attached) == 2)
        flood = [
            asyncio.create_task(
                _calls(dev_env, queue, [(busy, "grep", flood_args)], timeout_ms=4000)
            )
            for _ in range(8)
        ]
        slots = fleet.services.executor.running_slots
        # The worker takes the whole flood (it holds calls beyond those it runs) ...
        await _until(lambda: fleet.held_slots.held(task_queue_for(busy)) > 2)
        await _until(lambda: running_for(slots, busy) >= 2)
        started = time.monotonic()
        (answer,) = await _calls(dev_env, queue, [(quiet, "grep", {"pattern": "quiet"})])
        quiet_latency = time.monotonic() - started
        # ... and runs at most its per-workspace cap of them at once.
        assert running_for(slots, busy) <= 2
        assert len(fleet.services.executor.live_process_groups) <= 2
        for task in flood:
            task.cancel()
        await asyncio.gather(*flood, return_exceptions=True)
    assert answer.result.total == 1
    assert quiet_latency < 4, quiet_latency  # it did not wait for the flood's 4 s budgets


# --- an attached workspace keeps meaning the directory it attached --------------------------


async def _grep(dev_env, queue: str, wid: str, pattern: str, **options):
    (result,) = await _calls(dev_env, queue, [(wid, "grep", {"pattern": pattern})], **options)
    return result


def _open_paths() -> set[str]:
    """What this process's descriptors name."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            found.add(os.readlink(f"/proc/self/fd/{fd}"))
    return found


def _identity(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


async def test_a_root_entry_swapped_for_a_link_outside_never_serves_its_target(dev_env, tmp_path):
    """`root/a` renamed away and replaced by a symlink to a directory outside the root: no
    search on fs-search/a ever reads what the link leads to, nor the directory moved away —
    before the next scan (the workspace's path names no vetted directory: it cannot be read)
    nor after it (detached). Scanned only (no events): with events the swap detaches it at
    once (tests/worker/test_fleet_events.py)."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (wid,) = _ids("swap", 1)
    write_tree(root / wid, {"own.txt": "own words\n"})
    write_tree(outside, {"canary.txt": "the-canary-outside words\n"})
    async with _fleet(dev_env, root, tmp_path / "spill", scan_interval=3600, events="off") as (
        fleet,
        queue,
    ):
        await _until(lambda: wid in fleet.attached, 30)
        assert (await _grep(dev_env, queue, wid, "words")).result.total == 1
        os.rename(root / wid, root / ".moved")
        os.symlink(outside, root / wid)
        unscanned = [
            await _grep(dev_env, queue, wid, "words"),
            *await _calls(dev_env, queue, [(wid, "glob", {"pattern": "**"})]),
        ]
        await fleet.scan()
        assert wid not in fleet.attached
        scanned = await _grep(dev_env, queue, wid, "words", schedule_to_start_ms=1500)
        # Once drained, the detached workspace's root is no longer held open.
        await _until(lambda: str(root / ".moved") not in _open_paths(), 30)
    for result in [*unscanned, scanned]:
        assert "canary" not in result.text, result.text
    for result in unscanned:
        assert result.is_error and result.error.code == ErrorCode.SEARCH_FAILED, result.text
        assert "the workspace cannot be read" in result.text, result.text
    assert scanned.is_error and scanned.error.code == ErrorCode.SEARCH_FAILED, scanned.text


@pytest.mark.parametrize("how", ["replaced", "linked-inside"])
async def test_a_root_entry_naming_another_directory_is_attached_again(dev_env, tmp_path, how):
    """`rm -rf root/a && mkdir root/a` (or `root/a` swapped for a link to another directory
    under the root): after the next scan, fs-search/a searches the directory the name leads to
    now."""
    root = tmp_path / "root"
    (wid,) = _ids("again", 1)
    write_tree(root / wid, {"old.txt": "old words\n"})
    async with _fleet(dev_env, root, tmp_path / "spill", scan_interval=3600) as (fleet, queue):
        await _until(lambda: wid in fleet.attached, 30)
        assert (await _grep(dev_env, queue, wid, "words")).result.total == 1
        if how == "replaced":
            shutil.rmtree(root / wid)
            write_tree(root / wid, {"new.txt": "new words\n"})
        else:
            write_tree(root / ".store" / "x", {"new.txt": "new words\n"})
            os.rename(root / wid, root / ".old")
            os.symlink(root / ".store" / "x", root / wid)
        now = _identity(root / wid)
        await fleet.scan()
        await _until(lambda: wid in fleet.attached, 30)
        assert fleet.attached[wid].holds() == now
        assert fleet.attached[wid].path == os.path.realpath(root / wid)
        after = await _grep(dev_env, queue, wid, "words")
    assert [(m.path, m.line) for m in after.result.matches] == [("new.txt", "new words")], (
        after.text
    )


async def test_a_workspace_re_attached_while_a_call_runs_waits_for_it(dev_env, tmp_path):
    """The directory is replaced while a call searches the old one: the call finishes on the
    old worker (detached, draining), and the new worker starts only after it (Temporal allows one
    worker per queue and client), then serves the new directory."""
    root = tmp_path / "root"
    (wid,) = _ids("busy", 1)
    sparse_file(root / wid / "big.bin", gigabytes=3)
    async with _fleet(dev_env, root, tmp_path / "spill", scan_interval=3600) as (fleet, queue):
        await _until(lambda: wid in fleet.attached, 30)
        running = asyncio.create_task(
            _calls(dev_env, queue, [(wid, "grep", {"pattern": "needle", "path": "big.bin"})])
        )
        await _until(lambda: fleet.services.executor.live_process_groups, 20)
        os.rename(root / wid, root / ".old")
        write_tree(root / wid, {"new.txt": "new needle\n"})
        await fleet.scan()
        assert wid not in fleet.attached
        (searched,) = await running
        await _until(lambda: wid in fleet.attached, 30)
        after = await _grep(dev_env, queue, wid, "needle")
    assert not searched.is_error and searched.result.total == 0, searched.text
    assert [m.line for m in after.result.matches] == ["new needle"], after.text


# --- the worker process --------------------------------------------------------------------


async def test_sigterm_drains_every_workspace_and_leaves_no_rg(dev_env, tmp_path):
    """``fs-search worker --workspaces-root``: running calls finish, then the process exits."""
    root = tmp_path / "root"
    ids = _ids("d", 2)
    for wid in ids:
        sparse_file(root / wid / "big.bin", gigabytes=3)
        write_tree(root / wid, {"a.txt": "found me\n"})
    (root / "not valid!").mkdir()
    address = dev_env.client.service_client.config.target_host
    # Budgets far beyond the ~8 s of CPU each rg needs, so a busy machine finishes them too.
    # The drain as long as a call's budget.
    budget = {"FS_SEARCH_TIMEOUT_MS": "120000", "FS_SEARCH_DRAIN_TIMEOUT": "125"}
    worker = WorkerProcess(root, address, None, env=budget, ready_timeout=90)
    queue = f"wf-{uuid.uuid4()}"
    try:
        await _until(lambda: all(f"attached workspace {w}" in worker.log() for w in ids), 90)
        assert "skipping 'not valid!'" in worker.log()
        # The start-up log says whether rg runs confined.
        assert re.search(r"ripgrep: .*; sandbox: (landlock \(ABI \d+\)|none)", worker.log())
        async with Worker(dev_env.client, task_queue=queue, workflows=[MixedCallsWorkflow]):
            handles = [
                await dev_env.client.start_workflow(
                    MixedCallsWorkflow.run,
                    MixedCalls(
                        calls=[(w, "grep", {"pattern": "needle", "path": "big.bin"})],
                        timeout_ms=120_000,
                    ),
                    id=f"wf-{uuid.uuid4()}",
                    task_queue=queue,
                )
                for w in ids
            ]
            await _until(lambda: len(worker.rg_processes()) == 2, 60)
            worker.proc.send_signal(signal.SIGTERM)
            results = [(await h.result())[0] for h in handles]
            code = await asyncio.to_thread(worker.proc.wait, 180)
    finally:
        if worker.proc.poll() is None:
            worker.kill()
    assert [r.is_error for r in results] == [False, False], [r.text for r in results]
    assert all(r.result.total == 0 for r in results)
    assert code == 0, worker.log()[-3000:]
    assert "drained every workspace" in worker.log()
    assert not alive(rg_processes(root))


async def test_a_workspace_reads_its_own_spills_and_not_anothers(dev_env, tmp_path):
    """Through the fleet's shared store, read_spill on b's queue refuses a's locator."""
    root = tmp_path / "root"
    a, b = _ids("s", 2)
    for wid in (a, b):
        write_tree(root / wid, {f"f{i}.txt": f"needle {wid}\n" for i in range(4)})
    async with _fleet(dev_env, root, tmp_path / "spill", grep_max_matches=1) as (fleet, queue):
        await _until(lambda: a in fleet.attached and b in fleet.attached)
        grep = {"pattern": "needle"}
        found = await _calls(dev_env, queue, [(a, "grep", grep), (b, "grep", grep)])
        mine, theirs = (r.result.spill.locator for r in found)
        read = [(a, "read_spill", {"locator": mine}), (b, "read_spill", {"locator": mine})]
        read.append((b, "read_spill", {"locator": theirs}))
        own, refused, other = await _calls(dev_env, queue, read)
    assert mine.startswith(f"{tmp_path / 'spill'}/{a}--"), mine
    assert not own.is_error and own.text.count(f"needle {a}") == 4, own.text
    assert refused.is_error and refused.error.code == ErrorCode.INVALID_ARGUMENT, refused.text
    assert "another workspace" in refused.text and f"needle {a}" not in refused.text
    assert not other.is_error and other.text.count(f"needle {b}") == 4, other.text


def test_a_fleet_raises_its_open_files_limit_for_the_held_roots() -> None:
    """A root of ~1,000 workspaces holds ~1,000 directories open: a soft limit of 256 is raised
    (to the hard limit, or the wanted count if lower); one already high enough is left alone."""
    probe = (
        "import resource\n"
        "from fs_search.worker._fleet import raise_open_files_limit\n"
        "hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))\n"
        "print(raise_open_files_limit(4096), resource.getrlimit(resource.RLIMIT_NOFILE)[0], hard)\n"
        "print(raise_open_files_limit(1000), resource.getrlimit(resource.RLIMIT_NOFILE)[0])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    raised, now, hard = (int(v) for v in out[:3])
    expected = 4096 if hard < 0 or hard >= 4096 else hard
    assert raised == now == expected
    assert int(out[3]) == int(out[4]) == expected  # already above 1,000: unchanged
