"""Nothing runs from the tree: digest helpers start isolated in ``/``, and executables are
found on absolute PATH entries only."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest

from fs_search.activities.results import _digest as digest
from fs_search.activities.results._offload import Offload
from fs_search.worker._binaries import find_binary
from tests.activities.results.test_offload import KW, rg_json
from tests.helpers import write_tree

# Modules a helper imports (or could), planted where a non-isolated Python would find them.
HOSTILE_MODULES = ("pickle.py", "json.py", "struct.py", "fs_search.py", "sitecustomize.py")


def plant(directory: Path, marker: Path) -> None:
    """Hostile modules in ``directory`` that record their import in ``marker``."""
    write_tree(
        directory,
        {
            name: f"open({str(marker)!r}, 'a').write({name!r} + '\\n')\nraise SystemExit(3)\n"
            for name in HOSTILE_MODULES
        },
    )


@pytest.mark.parametrize("where", ["cwd", "PYTHONPATH"])
async def test_helpers_never_import_from_the_cwd_or_pythonpath(tmp_path, monkeypatch, where):
    """A helper started from a worker whose cwd (or PYTHONPATH) holds hostile modules imports
    none of them, runs in /, and digests as a thread would."""
    marker = tmp_path / "imported"
    plant(tmp_path / "hostile", marker)
    monkeypatch.chdir(tmp_path / "hostile" if where == "cwd" else tmp_path)
    if where == "PYTHONPATH":
        monkeypatch.setenv("PYTHONPATH", str(tmp_path / "hostile"))
    data = rg_json(20, 50)
    expected = digest.digest_grep([data], **KW)
    offload = Offload(1, threshold=10)
    try:
        results = await asyncio.gather(
            *[offload.run(digest.digest_grep, [data], **KW) for _ in range(2)]
        )
        cwds = [os.readlink(f"/proc/{pid}/cwd") for pid in offload.helper_pids]
    finally:
        offload.shutdown()
    assert not marker.exists(), f"imported: {marker.read_text()}"
    assert results == [expected, expected] and cwds == ["/"]


def executable(path: Path) -> Path:
    """A script at ``path`` that would run if anything resolved it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\necho hostile\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.mark.parametrize("entry", ["", ".", "bin", "./bin"])
def test_relative_path_entries_are_never_searched(tmp_path, monkeypatch, entry):
    """PATH entries naming the cwd ('', '.', 'bin') are skipped: a planted rg or tool there is
    never found; the wheel's rg next to Python still is."""
    executable(tmp_path / "rg")
    executable(tmp_path / "fs-search-no-such-tool")
    executable(tmp_path / "bin" / "rg")
    executable(tmp_path / "bin" / "fs-search-no-such-tool")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", os.pathsep.join([entry, "/usr/bin", "/bin"]))
    assert find_binary("fs-search-no-such-tool") is None
    rg = find_binary("rg")
    assert rg is not None and os.path.isabs(rg) and not rg.startswith(str(tmp_path))


def test_absolute_path_entries_are_searched(tmp_path, monkeypatch):
    """An absolute PATH entry is searched and the result is absolute."""
    tool = executable(tmp_path / "tools" / "fs-search-no-such-tool")
    monkeypatch.chdir("/")
    monkeypatch.setenv("PATH", os.pathsep.join(["", str(tmp_path / "tools")]))
    assert find_binary("fs-search-no-such-tool") == str(tool)
