"""Digest offloading: helper processes for concurrent large outputs, threads otherwise."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading

import pytest

from fs_search.activities._workspace import SearchTarget
from fs_search.activities.results import _digest as digest
from fs_search.activities.results import _parse as parse
from fs_search.activities.results._helper import HEADER, frame, job_name
from fs_search.activities.results._offload import Offload, halves, mmap_large_allocations
from tests.procs import alive, group

TARGET = SearchTarget(run_dir="/tmp", file_arg=None, prefix="src", root="src")
KW = {"target": TARGET, "cap": 5, "max_line_bytes": 20, "artifact": True, "every": True}


def rg_json(files: int, lines: int) -> bytes:
    out = []
    for f in range(files):
        for n in range(1, lines + 1):
            msg = {
                "type": "match",
                "data": {
                    "path": {"text": f"f{f}.py"},
                    "lines": {"text": f"hit {n} {'x' * 40}\n"},
                    "line_number": n,
                    "absolute_offset": 0,
                    "submatches": [],
                },
            }
            out.append(json.dumps(msg, separators=(",", ":")))
    out.append('{"data":{"stats":{}},"type":"summary"}')
    return ("\n".join(out) + "\n").encode()


def chunks_of(data: bytes, size: int = 65536) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


async def test_concurrent_large_digests_use_helpers_with_identical_results():
    """Large digests running at once go to helper processes and give the thread's result."""
    data = rg_json(40, 100)
    expected = digest.digest_grep(chunks_of(data), **KW)
    offload = Offload(2, threshold=1024)
    try:
        results = await asyncio.gather(
            *[offload.run(digest.digest_grep, chunks_of(data), **KW) for _ in range(4)]
        )
        assert all(r == expected for r in results)
        assert len(offload.helper_pids) == 2
        assert expected.total == 4000 and expected.files == 40 and len(expected.page) == 5
    finally:
        offload.shutdown()


async def test_a_lone_or_small_digest_stays_in_a_thread():
    """One digest at a time, or a small one, never starts a helper."""
    offload = Offload(2, threshold=1024)
    await offload.run(digest.digest_grep, chunks_of(rg_json(40, 100)), **KW)
    await asyncio.gather(
        *[offload.run(digest.digest_grep, [rg_json(1, 1)], **KW) for _ in range(3)]
    )
    assert offload.helper_pids == []


async def test_errors_cross_back_and_the_helper_stays_usable():
    """A malformed output raises MalformedOutput from the helper; the helper keeps serving."""
    offload = Offload(1, threshold=10)
    try:
        outcomes = await asyncio.gather(
            *[offload.run(digest.digest_grep, [b"not json\n" * 100], **KW) for _ in range(2)],
            return_exceptions=True,
        )
        assert all(isinstance(o, parse.MalformedOutput) for o in outcomes)
        pids = offload.helper_pids
        good = await asyncio.gather(
            *[offload.run(digest.digest_grep, [rg_json(2, 3)], **KW) for _ in range(2)]
        )
        assert all(g.total == 6 for g in good) and offload.helper_pids == pids
    finally:
        offload.shutdown()


async def test_a_dead_helper_falls_back_to_a_thread():
    """A helper killed mid-request: the digest is redone in a thread, the helper replaced."""
    offload = Offload(1, threshold=10)
    try:
        await offload.warm()
        [pid] = offload.helper_pids
        os.killpg(pid, signal.SIGKILL)
        await asyncio.sleep(0.1)
        results = await asyncio.gather(
            *[offload.run(digest.digest_grep, [rg_json(3, 3)], **KW) for _ in range(2)]
        )
        assert [r.total for r in results] == [9, 9]
        assert pid not in offload.helper_pids
    finally:
        offload.shutdown()


async def test_cancelling_a_call_discards_its_helper():
    """A cancelled request kills its helper (its pipe holds a half-read answer)."""
    offload = Offload(1, threshold=10)
    big = [rg_json(200, 500)]
    try:
        blocker = asyncio.ensure_future(offload.run(digest.digest_grep, [rg_json(1, 1)], **KW))
        task = asyncio.ensure_future(offload.run(digest.digest_grep, big, **KW))
        await blocker
        await asyncio.sleep(0.05)
        pids = offload.helper_pids
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.2)
        assert pids and not any(alive(group(p)) for p in pids)
        assert offload.helper_pids == []
    finally:
        offload.shutdown()


async def test_shutdown_kills_helpers():
    """shutdown() leaves no helper running."""
    offload = Offload(2)
    await offload.warm()
    pids = offload.helper_pids
    assert len(pids) == 2 and all(alive(group(p)) for p in pids)
    offload.shutdown()
    await asyncio.sleep(0.2)
    assert not any(alive(group(p)) for p in pids)


def test_helper_exits_when_its_stdin_closes():
    """A helper whose parent is gone (stdin closed) exits by itself."""
    proc = subprocess.Popen(
        [sys.executable, "-I", "-m", "fs_search.activities.results._helper"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd="/",
    )
    assert proc.stdin is not None and proc.stdout is not None
    raw = rg_json(1, 2)
    proc.stdin.write(frame((job_name(digest.digest_grep), (), KW)) + HEADER.pack(len(raw)) + raw)
    proc.stdin.flush()
    size = HEADER.unpack(proc.stdout.read(HEADER.size))[0]
    import pickle

    status, result = pickle.loads(proc.stdout.read(size))
    assert status == "ok" and result.total == 2
    proc.stdin.close()
    assert proc.wait(timeout=10) == 0


async def test_glob_digests_stay_in_a_thread():
    """Large globs digested at once never start a helper (bulk byte work: a thread is cheaper)."""
    raw = b"".join(b"d%d/f%05d\0" % (i % 7, i) for i in range(20_000))
    offload = Offload(2, threshold=10)
    try:
        kw = {"target": KW["target"], "cap": 5, "sample": True, "artifact": True, "every": False}
        results = await asyncio.gather(
            *[offload.run(digest.digest_glob, [raw], **kw) for _ in range(3)]
        )
        assert offload.helper_pids == []
        assert all(r.total == 20_000 and len(r.shown) == 5 for r in results)
    finally:
        offload.shutdown()


# Frees 20 MB buffers on the main thread (which raises glibc's mmap threshold by default),
# then in a thread: prints the RSS still held once everything is freed.
RETAINED = """
import sys, threading
from fs_search.activities.results import _offload as offload
if sys.argv[1] == "mmap":
    assert offload.mmap_large_allocations()
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096
def churn():
    for _ in range(3):
        blob = b"x" * 20_000_000
        del blob
base = rss()
churn()
thread = threading.Thread(target=churn)
thread.start()
thread.join()
print(rss() - base)
"""


def retained(mode: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", RETAINED, mode], capture_output=True, check=True, text=True
    )
    return int(out.stdout)


def test_freed_large_buffers_return_to_the_os():
    """With mmap_large_allocations (every Offload applies it), a digest's freed outputs leave
    RSS; by default glibc keeps them resident in the thread's heap."""
    if not mmap_large_allocations():
        pytest.skip("no glibc mallopt")
    assert retained("default") >= 15_000_000  # the problem is real here
    assert retained("mmap") < 5_000_000


def count_nuls(chunks: list[bytes], *, scale: int = 1) -> int:
    """A job no helper knows (not in helper.JOBS)."""
    return sum(c.count(b"\0") for c in chunks) * scale


async def test_a_job_helpers_do_not_know_runs_in_a_thread():
    """Only registered digests cross to a helper: any other job, large and concurrent, runs
    in a thread with its arguments as given."""
    offload = Offload(2, threshold=10)
    try:
        results = await asyncio.gather(
            *[offload.run(count_nuls, [b"a\0" * 1000], scale=2) for _ in range(3)]
        )
        assert results == [2000, 2000, 2000] and offload.helper_pids == []
    finally:
        offload.shutdown()


# --- a lone large grep output, split across a helper and a thread ------------------------


@pytest.mark.parametrize("size", [1, 7, 4096, 1 << 20])
def test_halves_cut_at_a_line_end_past_the_middle(size):
    """The two halves hold the output in order, the head ending at a line end past half."""
    data = rg_json(3, 7)
    head, tail = halves(chunks_of(data, size), len(data))
    joined = b"".join(head)
    assert joined + b"".join(tail) == data
    assert joined.endswith(b"\n") and len(joined) >= len(data) // 2
    assert b"\n" not in joined[len(data) // 2 : -1]


def test_an_output_without_a_line_end_past_the_middle_is_not_halved():
    """With no line end past the middle there is no tail: the job runs whole."""
    data = b"x\n" + b"y" * 100
    assert halves(chunks_of(data, 7), len(data))[1] == []


async def test_a_lone_large_grep_is_split_between_a_helper_and_a_thread():
    """Alone but large, a grep digest has its output's second half parsed in a helper:
    the result is the thread's result, and a helper ran although nothing else did."""
    data = rg_json(40, 100)
    expected = digest.digest_grep(chunks_of(data), **KW)
    offload = Offload(1, split_threshold=64 * 1024)
    try:
        chunks = chunks_of(data)
        assert await offload.run(digest.digest_grep, chunks, **KW) == expected
        assert chunks == [] and len(offload.helper_pids) == 1
        # Lone and small: a thread, as before.
        assert (await offload.run(digest.digest_grep, [rg_json(1, 2)], **KW)).total == 2
    finally:
        offload.shutdown()


@pytest.mark.parametrize("shared", [False, True])
async def test_a_shared_process_digests_a_lone_large_grep_in_one_helper(monkeypatch, shared):
    """Serving many workspaces, a large grep digest alone goes to a helper whole: nothing
    of it is parsed in this process (split, as a one-workspace process does, its head is
    parsed on a thread here, holding the interpreter from other workspaces' calls, while a
    helper takes the other core). Its answer is the thread's; a small digest still runs
    here."""
    data = rg_json(40, 100)
    expected = digest.digest_grep(chunks_of(data), **KW)
    parsed_here: list[int] = []
    real = parse.parse_chunks

    def counted(chunks):
        parsed_here.append(sum(len(c) for c in chunks))
        return real(chunks)

    monkeypatch.setattr(parse, "parse_chunks", counted)
    offload = Offload(2, threshold=1024, split_threshold=64 * 1024, shared=shared)
    try:
        assert await offload.run(digest.digest_grep, chunks_of(data), **KW) == expected
        assert len(offload.helper_pids) == 1
        assert bool(parsed_here) is not shared, parsed_here
        parsed_here.clear()
        assert (await offload.run(digest.digest_grep, [rg_json(1, 2)], **KW)).total == 2
        assert parsed_here and len(offload.helper_pids) == 1
    finally:
        offload.shutdown()


@pytest.mark.parametrize("where", ["head", "tail"])
async def test_a_malformed_half_of_a_split_output_is_reported(where):
    """Garbage in either half raises MalformedOutput, and the offload keeps serving."""
    good, bad = rg_json(40, 100), b"not json\n" * 4000
    data = bad + good if where == "head" else good + bad
    offload = Offload(1, split_threshold=64 * 1024)
    try:
        with pytest.raises(parse.MalformedOutput):
            await offload.run(digest.digest_grep, chunks_of(data), **KW)
        assert (await offload.run(digest.digest_grep, chunks_of(good), **KW)).total == 4000
    finally:
        offload.shutdown()


async def test_cancelling_a_split_digest_leaves_the_offload_usable():
    """A split digest cancelled mid-way raises CancelledError; its helper is discarded and
    the next large digest is split and right again."""
    big = rg_json(200, 500)
    offload = Offload(1, split_threshold=64 * 1024)
    try:
        task = asyncio.ensure_future(offload.run(digest.digest_grep, chunks_of(big), **KW))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        data = rg_json(40, 100)
        assert await offload.run(digest.digest_grep, chunks_of(data), **KW) == digest.digest_grep(
            chunks_of(data), **KW
        )
        assert len(offload.helper_pids) == 1
    finally:
        offload.shutdown()


async def test_a_tiny_digest_runs_on_the_event_loop_and_a_larger_one_in_a_thread():
    """Under the inline threshold the job runs on the loop's own thread (no hop to a
    thread and back); from it, in a thread."""
    seen: list[int] = []

    def job(chunks: list[bytes]) -> int:
        seen.append(threading.get_ident())
        return sum(len(c) for c in chunks)

    offload = Offload(0, inline_threshold=1024)
    assert await offload.run(job, [b"x" * 100]) == 100
    assert await offload.run(job, [b"x" * 4096]) == 4096
    assert seen[0] == threading.get_ident() != seen[1]
