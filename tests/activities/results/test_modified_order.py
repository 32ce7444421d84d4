"""A glob's listing put in modification order by the worker (times read on two cores, a
NumPy stable sort) gives exactly ``rg --files --sort=modified``'s order, reads nothing
outside the search root, and survives a helper's death."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import threading
from array import array
from pathlib import Path

import numpy as np
import pytest

from fs_search.activities.results import _modified_order as modified_order
from fs_search.activities.results._modified import UNREADABLE, times
from fs_search.activities.results._modified_order import ModifiedOrder, in_order, places_of
from fs_search.activities.results._offload import Offload, _Helper
from tests.procs import wait_until


def rg_files(rg: str, root: Path, *flags: str) -> bytes:
    argv = [rg, "--no-config", "--files", "--null", "--no-ignore", "--hidden", *flags]
    return subprocess.run(argv, cwd=root, capture_output=True, check=True).stdout


def tree(root: Path, files: int, *, seed: int = 7, long: int = 40) -> Path:
    """``files`` files in nested directories, their times drawn from a few values (many
    ties, as a checkout gives) in no relation to their names."""
    rnd = random.Random(seed)
    for i in range(files):
        path = root / f"d{i % 17}" / f"e{i % 5}" / f"{'n' * (i % long)}{i:06}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
        t = 1_600_000_000 + rnd.randrange(40)
        os.utime(path, ns=(t * 10**9, t * 10**9 + rnd.choice((0, 0, 0, 123))))
    return root


def pieces(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize(
    "limits",
    [{}, {"_WINDOW": 7, "_GATHER_BYTES": 3}, {"_BUCKET_BYTES": 1, "_MIN_BUCKETS": 1}],
    ids=["default", "small-windows", "a-bucket-a-name"],
)
def test_in_order_is_a_stable_sort_by_time(limits, monkeypatch):
    """Names sorted by time; equal times keep the listing's order, whatever the windows
    and however many buckets the names go through."""
    for key, value in limits.items():
        monkeypatch.setattr(modified_order, key, value)
    rnd = random.Random(3)
    names = [f"{'x' * rnd.randrange(1, 30)}{i}".encode() for i in range(3000)]
    mtimes = [rnd.randrange(5) for _ in names]
    raw = bytearray(b"".join(n + b"\0" for n in names))
    places = places_of(np.argsort(np.array(mtimes, dtype=np.int64), kind="stable"))
    got = in_order(raw, places)
    want = [n for _, n in sorted(zip(mtimes, names, strict=True), key=lambda p: p[0])]
    assert got is raw and bytes(got) == b"".join(n + b"\0" for n in want)
    got += b"more\0"  # no view of it is left: it can grow (the glob's artifact does)


def test_in_order_never_holds_the_listing_twice():
    """Sorting 4 MB of names grows the process's peak memory by a small part of it: the
    names are never held twice (the sorted copy made from the whole listing held them
    twice, and more)."""
    rnd = random.Random(5)
    count = 250_000
    raw = bytearray(b"".join(b"d%03d/f%07d.x\0" % (rnd.randrange(100), i) for i in range(count)))
    places = places_of(np.argsort(np.array([rnd.randrange(10**6) for _ in range(count)])))
    try:
        before = resident_kb("VmRSS")
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pytest.skip("the peak memory cannot be reset here")
    in_order(raw, places)
    grown = (resident_kb("VmHWM") - before) * 1024
    # Places by bucket (4 bytes a name), a bucket, a window's temporaries, small change.
    assert grown <= 0.25 * len(raw) + 4 * count + (2 << 20), grown / len(raw)


def resident_kb(key: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":"))


def test_in_order_refuses_a_listing_that_is_not_its_order():
    """More or fewer names than the order has is an error, never a silent page."""
    with pytest.raises(ValueError, match="2 names but 3 ordered"):
        in_order(bytearray(b"a\0b\0"), places_of(np.arange(3)))
    with pytest.raises(ValueError, match="more names"):
        in_order(bytearray(b"a\0b\0c\0"), places_of(np.arange(2)))


def test_times_reads_beneath_the_root_and_follows_no_link(tmp_path):
    """A file's own time; a name through a symlinked directory, a ``..``, a link's target or
    a vanished file is unreadable (sorted last, as rg sorts what it cannot read), so nothing
    outside the root decides the order."""
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "d").mkdir(parents=True)
    outside.mkdir()
    (outside / "a.txt").write_bytes(b"secret")
    os.utime(outside / "a.txt", ns=(5, 5))
    (root / "d" / "a.txt").write_bytes(b"")
    os.utime(root / "d" / "a.txt", ns=(100, 100))
    (root / "top.txt").write_bytes(b"")
    os.utime(root / "top.txt", ns=(7, 7))
    os.symlink(outside, root / "swapped")  # a directory rg walked, swapped for a link since
    os.symlink(outside / "a.txt", root / "d" / "link.txt")
    os.utime(root / "d" / "link.txt", ns=(9, 9), follow_symlinks=False)
    (root / "d" / os.fsdecode(b"\xff.txt")).write_bytes(b"")
    os.utime(root / "d" / os.fsdecode(b"\xff.txt"), ns=(11, 11))
    names = [
        b"d/a.txt",
        b"swapped/a.txt",
        b"../outside/a.txt",
        b"d/../../outside/a.txt",
        b"top.txt",
        b"d/link.txt",
        b"d/gone.txt",
        b"d/\xff.txt",
    ]
    fd = os.open(root, os.O_PATH)
    try:
        got = array("q")
        got.frombytes(times([b"\0".join(names) + b"\0"], dir_fd=fd))
    finally:
        os.close(fd)
    assert list(got) == [100, UNREADABLE, UNREADABLE, UNREADABLE, 7, 9, UNREADABLE, 11]


async def order_of(
    listing: bytes, root: Path, offload: Offload, piece: int, reserve: int = 0
) -> bytes:
    fd = os.open(root, os.O_PATH)
    try:
        order = ModifiedOrder(offload, fd, reserve=reserve)
        for chunk in pieces(listing, piece):
            order.feed(chunk)
            await asyncio.sleep(0)  # the lanes read while the walk goes on
        return b"".join(await order.finish())
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    "files,piece,reserve",
    [(1, 4096, 0), (300, 999, 0), (300, 999, 1000), (9000, 65536, 0), (9000, 65536, 4 << 20)],
)
async def test_the_order_is_rgs_own(tmp_path, rg_bin, files, piece, reserve, monkeypatch):
    """rg's single-threaded walk sorted here equals ``rg --sort=modified``: byte for byte,
    ties included, from one name to several hundred kilobytes (both lanes at work), fed
    into room reserved for it or not, or into room it outgrows."""
    calls = []
    real_call = _Helper.call

    async def counted(self, *args, **kwargs):
        calls.append(args[0])
        return await real_call(self, *args, **kwargs)

    monkeypatch.setattr(_Helper, "call", counted)
    root = tree(tmp_path / "ws", files)
    walk = rg_files(rg_bin, root, "--threads=1")
    offload = Offload(2)
    await offload.warm()
    try:
        got = await order_of(walk, root, offload, piece, reserve)
    finally:
        offload.shutdown()
    assert got == rg_files(rg_bin, root, "--sort=modified")
    assert got.count(b"\0") == files
    if len(walk) > 4 * modified_order.UNIT_BYTES:
        assert calls, "a large listing has a helper read some of its times"


async def test_a_helper_that_dies_leaves_its_units_to_a_thread(tmp_path, rg_bin):
    """The helper reading times is killed mid-listing: the answer is the same."""
    root = tree(tmp_path / "ws", 9000)
    walk = rg_files(rg_bin, root, "--threads=1")
    offload = Offload(1)
    await offload.warm()
    [pid] = offload.helper_pids
    fd = os.open(root, os.O_PATH)
    try:
        order = ModifiedOrder(offload, fd)
        for i, chunk in enumerate(pieces(walk, 32768)):
            order.feed(chunk)
            await asyncio.sleep(0)
            if i == 8:
                os.kill(pid, signal.SIGKILL)
        got = b"".join(await order.finish())
    finally:
        os.close(fd)
        offload.shutdown()
    assert got == rg_files(rg_bin, root, "--sort=modified")
    assert pid not in offload.helper_pids


async def test_a_discarded_listing_leaves_its_helper_usable(tmp_path, rg_bin):
    """A listing dropped midway (its rg failed) stops its lanes after their unit in hand:
    the helper goes back to the pool and serves the next listing."""
    root = tree(tmp_path / "ws", 9000)
    walk = rg_files(rg_bin, root, "--threads=1")
    offload = Offload(1)
    await offload.warm()
    pids = offload.helper_pids
    fd = os.open(root, os.O_PATH)
    try:
        order = ModifiedOrder(offload, fd)
        for chunk in pieces(walk, 65536)[:4]:
            order.feed(chunk)
            await asyncio.sleep(0)
        await order.discard()
        assert offload.helper_pids == pids
        got = await order_of(walk, root, offload, 65536)
    finally:
        os.close(fd)
        offload.shutdown()
    assert got == rg_files(rg_bin, root, "--sort=modified")


async def test_a_cancelled_reading_thread_keeps_reading_its_own_tree(tmp_path, monkeypatch):
    """The thread reading a unit's times goes on after its lane is cancelled; the call then
    closes its descriptor, and the number may be another call's tree by the time the thread
    reads on. It reads beneath a descriptor of its own, so never that other tree (issue 47:
    before, it read beneath the number)."""
    ours = tmp_path / "ours"
    theirs = tmp_path / "theirs"
    for root in (ours, theirs):
        root.mkdir()
        for i in range(40):
            (root / f"f{i:03}.txt").write_bytes(b"")
    held = os.open(ours, os.O_PATH | os.O_DIRECTORY)
    seen: list[str] = []
    reading, resume = threading.Event(), threading.Event()
    real_stat = os.stat

    def stat(path, *, dir_fd=None, follow_symlinks=True):
        if dir_fd is not None:
            seen.append(os.readlink(f"/proc/self/fd/{dir_fd}"))
            reading.set()
            resume.wait(10)
        return real_stat(path, dir_fd=dir_fd, follow_symlinks=follow_symlinks)

    monkeypatch.setattr(os, "stat", stat)
    order = ModifiedOrder(Offload(0), held)
    order.feed(b"".join(f"f{i:03}.txt\0".encode() for i in range(40)))
    order._cut(final=True)
    assert await asyncio.to_thread(reading.wait, 10)
    for lane in order._lanes:
        lane.cancel()
    await asyncio.gather(*order._lanes, return_exceptions=True)
    # The call is over: its descriptor closed, the number now another tree's.
    other = os.open(theirs, os.O_PATH | os.O_DIRECTORY)
    os.close(held)
    os.dup2(other, held)
    os.close(other)
    try:
        resume.set()
        await asyncio.to_thread(wait_until, lambda: len(seen) == 40, 10)
        assert set(seen) == {str(ours)}, sorted(set(seen))
    finally:
        os.close(held)
