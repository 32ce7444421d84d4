"""read_spill locators: only the store's own artifact names, every other string INVALID_ARGUMENT."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from fs_search.activities.errors import SearchError
from fs_search.activities.models import GlobRequest, ReadSpillRequest
from fs_search.activities.storage import FileSpillStore, SpillKey
from tests.helpers import write_tree

KEY = SpillKey("wf", "run", "1", "glob")
ODD = SpillKey("../a/b é", "r-1", "7", "grep")


@pytest.fixture
async def store(tmp_path: Path) -> FileSpillStore:
    """A file store holding two artifacts and, beside them, a file the store did not write."""
    store = FileSpillStore(tmp_path / "spill")
    await store.save(KEY, "a\nb\n")
    await store.save(ODD, "odd\n")
    write_tree(
        tmp_path / "spill/wf/run",
        {"notes.txt": "not an artifact\n", "1.glob.txt.txt": "not an artifact\n"},
    )
    return store


@pytest.mark.parametrize(
    "key",
    [KEY, ODD, SpillKey("", "", "", "glob"), SpillKey("日本/%41", "null", "a.b", "grep")],
)
def test_from_relpath_inverts_relpath(key):
    """Every name the store writes parses back to its key (empty ids read back as 'null')."""
    parsed = SpillKey.from_relpath(key.relpath())
    assert parsed is not None and parsed.relpath() == key.relpath()


@pytest.mark.parametrize(
    "relpath",
    [
        "v0/something",
        "v0/d/sha256/" + "ab" * 32,
        "v0/ns/default/wt/Agent/wi/wf/ri/run/d/sha256/" + "ab" * 32,
        "other/key",
        "wf/run/1.glob",
        "wf/run/1.glob.json",
        "wf/run/1.glob.txt/x",
        "wf/run/.glob.txt",
        "wf//1.glob.txt",
        "wf/run/%00.glob.txt",
        "wf/run/%C3.glob.txt",
        "wf/run/%c3%a9.glob.txt",
        "wf/run/%2.glob.txt",
        "wf/run/a b.glob.txt",
        "wf/run/1.glob.txt\x00",
        "../run/1.glob.txt",
    ],
)
def test_from_relpath_refuses_every_other_name(relpath):
    """Temporal's payload keys and near misses of the artifact shape are not artifact names."""
    assert SpillKey.from_relpath(relpath) is None


def _bad_file_locators(root: str) -> list[str]:
    return [
        # NUL, raw or escaped.
        f"{root}/wf/run/1.glob.txt\x00",
        f"file://{root}/wf/run/1.glob.txt%00",
        f"file://{root}/wf/run/%00.glob.txt",
        f"{root}/wf/run/%00.glob.txt",
        # Escapes that do not decode (not UTF-8, or not an escape at all).
        f"file://{root}/wf/run/%ff.glob.txt",
        f"file://{root}/wf/run/%zz.glob.txt",
        f"file://{root}/wf/run/1.glob.txt%",
        f"{root}/wf/run/%FF.glob.txt",
        f"{root}/wf/run/%zz.glob.txt",
        # Names the store never writes, even inside its directory.
        f"{root}/wf/run/%41.glob.txt",
        f"{root}/wf/run/%2e.glob.txt",
        f"{root}/wf/run/notes.txt",
        f"{root}/wf/run/1.glob.txt.txt",
        f"{root}/wf/run/1.txt",
        f"{root}/wf/1.glob.txt",
        f"{root}/wf/run/x/1.glob.txt",
        f"{root}//wf/run/1.glob.txt",
        f"{root}/./wf/run/1.glob.txt",
        f"{root}/wf/run/../run/1.glob.txt",
        f"{root}/wf/run/1.glob.txt/",
        f"{root}/wf/run/.1.glob.txt",
        f"{root}/wf/run/1.glob.txt?x",
        f"file://{root}/wf/run/1.glob.txt?x",
        f"file://{root}/wf/run/1.glob.txt#x",
        f"file://elsewhere{root}/wf/run/1.glob.txt",
        f"{root}",
        f"{root}/",
        "",
        "/etc/passwd",
        "wf/run/1.glob.txt",
        "s3://bucket/wf/run/1.glob.txt",
    ]


async def test_file_store_refuses_every_locator_but_its_artifact_names(store, tmp_path):
    """NUL, undecodable escapes and foreign names are INVALID_ARGUMENT, never read."""
    root = str(tmp_path / "spill")
    for locator in _bad_file_locators(root):
        with pytest.raises(SearchError) as info:
            await store.read(locator, offset=0, limit=5)
        assert info.value.code == "INVALID_ARGUMENT", locator


async def test_file_store_reads_its_artifacts_by_path_or_file_url(store, tmp_path):
    """The locator a save returns, and the same path as a file:// URL, both read the artifact."""
    root = tmp_path / "spill"
    odd = str(root / ODD.relpath())
    for locator in [
        str(root / KEY.relpath()),
        f"file://{root / KEY.relpath()}",
        f"file://localhost{root / KEY.relpath()}",
        odd,
        "file://" + quote(odd),
    ]:
        page = await store.read(locator, offset=0, limit=5)
        assert page.text in ("a\nb", "odd") and page.locator == locator, locator


@pytest.mark.parametrize(
    "locator",
    ["{root}/wf/run/1.glob.txt%00", "file://{root}/wf/run/1.glob.txt%00", "{root}/%ff.glob.txt"],
)
async def test_read_spill_activity_says_invalid_argument_in_its_own_words(
    tmp_path, make_activities, locator
):
    """Through the activity: INVALID_ARGUMENT with our message, never 'failed unexpectedly'."""
    ws = write_tree(tmp_path / "ws", {f"f{i}.txt": "x" for i in range(6)})
    acts = await make_activities(ws, glob_max_results=2)
    r = await ActivityEnvironment().run(acts.glob, GlobRequest(pattern="*"))
    assert r.spill is not None
    locator = locator.format(root=tmp_path / "spill")
    with pytest.raises(ApplicationError) as info:
        await ActivityEnvironment().run(acts.read_spill, ReadSpillRequest(locator=locator))
    err = info.value
    assert err.type == "INVALID_ARGUMENT" and err.non_retryable
    assert "unexpectedly" not in err.message and "Error" not in err.message
