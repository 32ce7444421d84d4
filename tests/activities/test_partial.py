"""Unreadable paths deep in a tree give partial results, not failures.

Permission bits do not stop root, so as root the search runs in a child process that keeps
uid 0 but has lost the capabilities that bypass them (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH,
dropped from the bounding set by ``setpriv``): no second user is needed, so the test runs
wherever the suite does (a checkout under a 0700 home included). Other users need nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.helpers import Dir, write_tree

AS_ROOT = os.geteuid() == 0
pytestmark = pytest.mark.skipif(
    AS_ROOT and shutil.which("setpriv") is None,
    reason="as root, needs setpriv to drop the capabilities that bypass permission bits",
)
# Run by root: the same uid, without the capabilities that ignore permission bits.
_DROP_DAC = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"] if AS_ROOT else []

CHILD = r"""
import asyncio, json, sys
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment
from fs_search.activities._config import FsSearchConfig
from fs_search.activities._contract import GlobRequest, GrepRequest
from fs_search.activities.storage import local_storage
from fs_search.worker import build_activities

async def main(ws, spill, requests):
    config = FsSearchConfig.load(getenv=lambda _: None, overrides={"sample_over_cap_glob_results": False})
    acts = await build_activities(config, ws, storage=local_storage(spill))
    out = []
    for tool, req in requests:
        fn, model = (acts.glob, GlobRequest) if tool == "glob" else (acts.grep, GrepRequest)
        try:
            r = await ActivityEnvironment().run(fn, model(**req))
            out.append(r.model_dump())
        except ApplicationError as e:
            out.append({"error": e.type, "message": e.message})
    print(json.dumps(out))

asyncio.run(main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3])))
"""


def _run_unprivileged(ws: Path, spill: Path, requests: list) -> list[dict]:
    proc = subprocess.run(
        [*_DROP_DAC, sys.executable, "-c", CHILD, str(ws), str(spill), json.dumps(requests)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(proc.stdout)


@pytest.fixture
def open_tree():
    base = Path(tempfile.mkdtemp(prefix="fs-search-partial-"))
    base.chmod(0o755)
    yield base
    for dirpath, dirnames, _ in os.walk(base):
        for d in dirnames:
            os.chmod(os.path.join(dirpath, d), 0o755)
    shutil.rmtree(base)


def test_unreadable_file_and_directory_give_partial_results(open_tree: Path):
    """One unreadable file or directory deep in the tree: results with partial=true."""
    ws = write_tree(
        open_tree / "ws",
        {
            "a.txt": "needle one\n",
            "locked.txt": "needle locked\n",
            "closed/b.txt": "needle two\n",
            "z/c.txt": "needle three\n",
        },
    )
    for dirpath, dirnames, filenames in os.walk(ws):
        for d in dirnames:
            os.chmod(os.path.join(dirpath, d), 0o755)
        for f in filenames:
            os.chmod(os.path.join(dirpath, f), 0o644)
    ws.chmod(0o755)
    spill = write_tree(open_tree, {"spill": Dir(mode=0o777)}) / "spill"
    (ws / "locked.txt").chmod(0o000)
    (ws / "closed").chmod(0o000)
    grep, glob, named = _run_unprivileged(
        ws,
        spill,
        [
            ("grep", {"pattern": "needle"}),
            ("glob", {"pattern": "*.txt"}),
            ("grep", {"pattern": "needle", "path": "locked.txt"}),
        ],
    )
    assert grep["partial"] is True
    assert [m["path"] for m in grep["matches"]] == ["a.txt", "z/c.txt"]
    assert "could not be read" in grep["text"]
    assert glob["partial"] is True and sorted(glob["paths"]) == ["a.txt", "locked.txt", "z/c.txt"]
    # The named target itself unreadable is a failure, not a partial result.
    assert named["error"] == "SEARCH_FAILED"
