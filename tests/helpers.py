"""Test helpers: deterministic trees and sparse files (processes: tests/procs.py)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def write_tree(
    root: Path, files: Mapping[str, str | bytes], *, start_mtime: int = 1_600_000_000
) -> Path:
    """Create ``files`` under ``root``; mtimes increase in the mapping's order (1 s apart)."""
    for i, (rel, content) in enumerate(files.items()):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8", newline="")
        os.utime(path, (start_mtime + i, start_mtime + i))
    return root


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
