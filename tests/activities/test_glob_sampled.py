"""Recursive balanced sampling through the glob activity, with real rg over a real tree."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from temporalio.testing import ActivityEnvironment

from fs_search.activities.contract import GlobRequest
from tests.helpers import write_tree


def issue_files() -> dict[str, str]:
    """The issue's tree, oldest first: a/huge (300 files), a/s00..a/s19 (3 each), b/x (40),
    b/y (10), c.z."""
    files = {f"a/huge/old{i:03}.z": "" for i in range(300)}
    files |= {f"a/s{s:02}/f{i}.z": "" for s in range(20) for i in range(3)}
    files |= {f"b/x/f{i:02}.z": "" for i in range(40)} | {f"b/y/f{i}.z": "" for i in range(10)}
    return files | {"c.z": ""}


async def test_a_sampled_glob_reaches_every_subdirectory(tmp_path, make_activities):
    """On the issue's tree each of a's 21 subdirectories is reached, a/huge takes its fair
    share, b/y all 10 and b/x the rest of b's; the artifact keeps the full mtime order."""
    files = issue_files()
    ws = write_tree(tmp_path / "ws", files)
    acts = await make_activities(ws, sample_over_cap_glob_results=True)
    r = await ActivityEnvironment().run(acts.glob, GlobRequest(pattern="*.z"))
    per_dir = Counter(p.rpartition("/")[0] for p in r.paths)
    assert len(r.paths) == 100 and r.sampled and r.total == 411
    assert per_dir["a/huge"] == 3 and all(per_dir[f"a/s{s:02}"] >= 2 for s in range(20))
    assert (per_dir["b/y"], per_dir["b/x"], per_dir[""]) == (10, 39, 1)
    firsts = [next(i for i, p in enumerate(r.paths) if p.startswith(t)) for t in ("a/", "b/")]
    assert firsts == [0, 50] and r.paths[-1] == "c.z"
    assert "Reached 3 of 3 top-level entries and 24 directories." in r.text
    assert r.spill is not None
    assert Path(r.spill.locator).read_text().splitlines() == list(files)


async def test_a_sampled_glob_below_a_path_balances_inside_it(tmp_path, make_activities):
    """With `path`, the entries of the search root are balanced, and inside each of them
    their own entries; paths are shown with the prefix."""
    files = issue_files()
    ws = write_tree(tmp_path / "ws", {f"repo/{k}": v for k, v in files.items()})
    acts = await make_activities(ws, sample_over_cap_glob_results=True)
    r = await ActivityEnvironment().run(acts.glob, GlobRequest(pattern="*.z", path="repo/a"))
    per_dir = Counter(p.rpartition("/")[0] for p in r.paths)
    # 100 turns over a's 21 subdirectories: each a/sNN gives its 3, a/huge the rest.
    assert per_dir["repo/a/huge"] == 40 and len(per_dir) == 21
    assert all(per_dir[f"repo/a/s{s:02}"] == 3 for s in range(20))
    assert "Reached 21 of 21 top-level entries and 21 directories." in r.text
    assert Path(r.spill.locator).read_text().splitlines() == [
        f"repo/{k}" for k in files if k.startswith("a/")
    ]
