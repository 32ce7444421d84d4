"""Recursive balanced sampling through the glob activity, with real rg over a real tree."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from unittest import mock

from temporalio.testing import ActivityEnvironment

from fs_search.activities._contract import GlobRequest
from fs_search.activities.results import _glob_members as glob_members
from tests.activities.results.scattered import issue_136, plain_page
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


async def test_a_scattered_listing_is_sampled_by_the_rule(tmp_path, make_activities):
    """The issue's example through real rg: 136 paths in t0..t2/s0..s2, written in name
    order and their times then scattered (os.utime), cap 100. t0's 34 paths go 11/12/11
    to s0, s1 and s2 (s1 is modified first), not 29/3/2 as t0's 34 oldest would give;
    the footer names the directories reached."""
    names = issue_136()
    ws = write_tree(tmp_path / "ws", {n.decode(): "" for n in sorted(names)})
    for i, name in enumerate(names):  # modification order: the listing's
        os.utime(ws / name.decode(), (1_700_000_000 + i, 1_700_000_000 + i))
    acts = await make_activities(ws, sample_over_cap_glob_results=True)
    r = await ActivityEnvironment().run(acts.glob, GlobRequest(pattern="*.z"))
    assert r.total == 136 and r.sampled and len(r.paths) == 100
    per_dir = Counter(p.rpartition("/")[0] for p in r.paths)
    assert [per_dir[f"t0/s{s}"] for s in range(3)] == [11, 12, 11]
    expected = plain_page(names, 100)
    assert r.paths == [names[i].decode() for i in expected.indices]
    assert "Reached 3 of 3 top-level entries and 9 directories. 36 more not shown." in r.text
    assert "inside each directory, across its entries" in r.text
    assert Path(r.spill.locator).read_text().splitlines() == [n.decode() for n in names]


async def test_past_the_samplers_budget_the_footer_says_top_level_only(tmp_path, make_activities):
    """Through real rg, with the names' index made too costly for the budget: the page is
    balanced between the top-level entries only and its footer says just that."""
    names = issue_136()
    ws = write_tree(tmp_path / "ws", {n.decode(): "" for n in names})
    acts = await make_activities(ws, sample_over_cap_glob_results=True)
    with mock.patch.object(glob_members, "cost", lambda *_: 1 << 40):
        r = await ActivityEnvironment().run(acts.glob, GlobRequest(pattern="*.z"))
    per_dir = Counter(p.rpartition("/")[0] for p in r.paths)
    assert r.sampled and [per_dir[f"t0/s{s}"] for s in range(3)] == [29, 3, 2]
    assert (
        "(Showing 100 of 136 files, sampled across the top-level entries of the search root "
        "only: one file per entry per round, oldest modified first. Reached 3 of 3 top-level "
        "entries. 36 more not shown.)"
    ) in r.text
