"""Test helpers: deterministic trees, sparse files and small file systems (processes:
tests/procs.py)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.api.taskqueue.v1 import PollerInfo
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from fs_search.workflows._task_queues import list_pollers


@dataclass(frozen=True)
class Link:
    """A symlink to ``target``, created exactly as given: relative or absolute, dangling or not."""

    target: str | os.PathLike[str]


@dataclass(frozen=True)
class Fifo:
    """A named pipe."""


@dataclass(frozen=True)
class Dir:
    """A directory (empty unless later entries go inside it); ``mode`` is set once the whole
    tree is written, so a read-only directory can still be given contents."""

    mode: int | None = None


Entry = str | bytes | Link | Fifo | Dir


def write_tree(root: Path, files: Mapping[str, Entry], *, start_mtime: int = 1_600_000_000) -> Path:
    """Create ``files`` under ``root`` (which may already hold a tree); return ``root``.

    Keys are paths relative to ``root`` (non-UTF-8 names via ``os.fsdecode``); parents are
    made as needed. A ``str`` or ``bytes`` value is a regular file with that content; its
    mtime is ``start_mtime`` plus the entry's index in the mapping, so mtimes increase in
    the mapping's order (1 s apart). ``Link``, ``Fifo`` and ``Dir`` values are created as
    new entries (an existing name is an error) and their times are left alone.

    Nothing is ever written through a planted link: a key that is absolute, has a ``..``
    component or passes through a symlink is refused, and files are opened with
    ``O_NOFOLLOW``.
    """
    modes: list[tuple[Path, int]] = []
    for i, (rel, entry) in enumerate(files.items()):
        path = _inside(root, rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        match entry:
            case str() | bytes():
                data = entry.encode("utf-8") if isinstance(entry, str) else entry
                flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
                with os.fdopen(os.open(path, flags, 0o666), "wb") as f:
                    f.write(data)
                    f.flush()
                    os.utime(f.fileno(), (start_mtime + i, start_mtime + i))
            case Link(target):
                os.symlink(target, path)
            case Fifo():
                os.mkfifo(path)
            case Dir(mode):
                path.mkdir()
                if mode is not None:
                    modes.append((path, mode))
            case _:
                raise TypeError(f"write_tree: {rel!r}: not a tree entry: {entry!r}")
    for path, mode in reversed(modes):  # innermost first: a closed parent still lets us in
        os.chmod(path, mode)  # a directory made above: never a link
    return root


def _inside(root: Path, rel: str) -> Path:
    """``root / rel``, refusing any key that could lead out of ``root`` or through a link."""
    parts = Path(rel).parts
    if not parts or Path(rel).is_absolute() or ".." in parts:
        raise ValueError(f"write_tree: {rel!r} is not a path inside the tree")
    for n in range(1, len(parts)):
        if (root.joinpath(*parts[:n])).is_symlink():
            raise ValueError(f"write_tree: {rel!r} passes through the symlink {parts[n - 1]!r}")
    return root / rel


def sparse_file(path: Path, gigabytes: int = 100) -> Path:
    """A huge sparse file: rg needs well over a second per GB to scan it, using no disk."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.truncate(gigabytes * 1024**3)
    return path


def big_tree(
    root: Path, *, files: int = 200_000, per_dir: int = 1000, matches: int = 100_000
) -> Path:
    """``files`` empty ``*.f`` files in directories of ``per_dir``, plus ``big.txt`` with
    ``matches`` matching lines (``match <n>``)."""
    for d in range(files // per_dir):
        directory = root / f"d{d:04}"
        directory.mkdir(parents=True)
        for i in range(per_dir):
            os.close(os.open(directory / f"file_{i:05}.f", os.O_CREAT | os.O_WRONLY, 0o644))
    (root / "big.txt").write_text("".join(f"match {n}\n" for n in range(matches)))
    return root


@contextlib.contextmanager
def small_filesystem(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``mount -o size=``, e.g. ``"2m"``) at ``path``, unmounted after
    the block; skips the test where it cannot be mounted (root is needed)."""
    path.mkdir(parents=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (root needed): {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)


# A DescribeTaskQueue a busy dev server did not answer in time (two copies of the suite on a
# shared 2-core machine): the tests' own polling asks again instead of failing on it.
_TRANSIENT_RPC = (
    RPCStatusCode.CANCELLED,
    RPCStatusCode.DEADLINE_EXCEEDED,
    RPCStatusCode.UNAVAILABLE,
)


async def pollers_of(client: Client, queue: str, attempts: int = 3) -> list[PollerInfo]:
    """The queue's pollers (``list_pollers``), asked again on a transient RPC failure."""
    for attempt in range(1, attempts + 1):
        try:
            return await list_pollers(client, queue)
        except RPCError as e:
            if attempt == attempts or e.status not in _TRANSIENT_RPC:
                raise
            await asyncio.sleep(0.5)
    raise AssertionError("unreachable")
