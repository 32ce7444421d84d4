"""read_spill locators: only the store's own artifact names, every other string INVALID_ARGUMENT."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from fs_search.activities._contract import GlobRequest, ReadSpillRequest
from fs_search.activities._errors import SearchError
from fs_search.activities.storage import FileSpillStore, SpillKey
from tests.helpers import write_tree

KEY = SpillKey("wf", "run", "1", "glob", workspace="ws")
ODD = SpillKey("../a/b é", "r-1", "7", "grep", workspace="ws")


@pytest.fixture
async def store(tmp_path: Path) -> FileSpillStore:
    """A file store holding two artifacts and, beside them, files the store did not write."""
    store = FileSpillStore(tmp_path / "spill")
    await store.save(KEY, "a\nb\n")
    await store.save(ODD, "odd\n")
    write_tree(
        tmp_path / "spill",
        {
            "ws/wf/run/notes.txt": "not an artifact\n",
            "ws/wf/run/1.glob.txt.txt": "not an artifact\n",
            "wf/run/1.glob.txt": "the layout before workspaces\n",
        },
    )
    return store


@pytest.mark.parametrize(
    "key",
    [
        KEY,
        ODD,
        SpillKey("", "", "", "glob", workspace=""),
        SpillKey("日本/%41", "null", "a.b", "grep", workspace="../ws/é"),
        SpillKey("wf", "run", "1", "glob"),  # the default workspace
        SpillKey("wf", "run", "1", "glob", workspace="repo.main"),
    ],
)
def test_from_relpath_inverts_relpath(key):
    """Every name the store writes parses back to its key (empty ids read back as 'null')."""
    parsed = SpillKey.from_relpath(key.relpath())
    assert parsed is not None and parsed.relpath() == key.relpath()


# Ids as Temporal and the workspaces root may give them: any text without NUL or surrogates
# (Temporal's ids are UTF-8; NUL is refused in every segment), never empty (empty reads back
# as 'null').
_IDS = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1)


@given(workspace=_IDS, workflow_id=_IDS, run_id=_IDS, activity_id=_IDS, tool=_IDS)
def test_from_relpath_is_the_exact_inverse_of_relpath(
    workspace, workflow_id, run_id, activity_id, tool
):
    """Any key's name parses back to that very key, its workspace included."""
    key = SpillKey(workflow_id, run_id, activity_id, tool, workspace=workspace)
    assert SpillKey.from_relpath(key.relpath()) == key


@given(st.text(st.sampled_from("ab-_.%2AEFfé/\x00 "), max_size=30))
def test_a_name_that_parses_is_the_name_of_its_key(relpath):
    """from_relpath accepts only a key's own name: parse then spell gives the same string."""
    key = SpillKey.from_relpath(relpath)
    assert key is None or key.relpath() == relpath


@pytest.mark.parametrize(
    "relpath",
    [
        "v0/something",
        "v0/d/sha256/" + "ab" * 32,
        "v0/ns/default/wt/Agent/wi/wf/ri/run/d/sha256/" + "ab" * 32,
        "other/key",
        "wf/run/1.glob.txt",  # the layout before workspaces
        "ws/x/wf/run/1.glob.txt",
        "ws/wf/run/1.glob",
        "ws/wf/run/1.glob.json",
        "ws/wf/run/1.glob.txt/x",
        "ws/wf/run/.glob.txt",
        "ws/wf//1.glob.txt",
        "/wf/run/1.glob.txt",
        "%00/wf/run/1.glob.txt",
        "%2e/wf/run/1.glob.txt",
        "ws/wf/run/%00.glob.txt",
        "ws/wf/run/%C3.glob.txt",
        "ws/wf/run/%c3%a9.glob.txt",
        "ws/wf/run/%2.glob.txt",
        "ws/wf/run/a b.glob.txt",
        "ws/wf/run/1.glob.txt\x00",
        "../wf/run/1.glob.txt",
        "ws/../run/1.glob.txt",
    ],
)
def test_from_relpath_refuses_every_other_name(relpath):
    """Temporal's payload keys and near misses of the artifact shape are not artifact names."""
    assert SpillKey.from_relpath(relpath) is None


def _bad_file_locators(root: str) -> list[str]:
    return [
        # NUL, raw or escaped.
        f"{root}/ws/wf/run/1.glob.txt\x00",
        f"file://{root}/ws/wf/run/1.glob.txt%00",
        f"file://{root}/ws/wf/run/%00.glob.txt",
        f"{root}/ws/wf/run/%00.glob.txt",
        # Escapes that do not decode (not UTF-8, or not an escape at all).
        f"file://{root}/ws/wf/run/%ff.glob.txt",
        f"file://{root}/ws/wf/run/%zz.glob.txt",
        f"file://{root}/ws/wf/run/1.glob.txt%",
        f"{root}/ws/wf/run/%FF.glob.txt",
        f"{root}/ws/wf/run/%zz.glob.txt",
        # Names the store never writes, even inside its directory.
        f"{root}/ws/wf/run/%41.glob.txt",
        f"{root}/ws/wf/run/%2e.glob.txt",
        f"{root}/ws/wf/run/notes.txt",
        f"{root}/ws/wf/run/1.glob.txt.txt",
        f"{root}/ws/wf/run/1.txt",
        f"{root}/ws/wf/1.glob.txt",
        f"{root}/ws/wf/run/x/1.glob.txt",
        f"{root}//ws/wf/run/1.glob.txt",
        f"{root}/./ws/wf/run/1.glob.txt",
        f"{root}/ws/wf/run/../run/1.glob.txt",
        f"{root}/ws/wf/run/1.glob.txt/",
        f"{root}/ws/wf/run/.1.glob.txt",
        f"{root}/ws/ws/wf/run/1.glob.txt",
        f"{root}/../spill/ws/wf/run/1.glob.txt",
        f"{root}/ws/wf/run/1.glob.txt?x",
        f"file://{root}/ws/wf/run/1.glob.txt?x",
        f"file://{root}/ws/wf/run/1.glob.txt#x",
        f"file://elsewhere{root}/ws/wf/run/1.glob.txt",
        f"{root}",
        f"{root}/",
        "",
        "/etc/passwd",
        "ws/wf/run/1.glob.txt",
        "s3://bucket/ws/wf/run/1.glob.txt",
        # The layout before workspaces: a file is there, but no longer an artifact name.
        f"{root}/wf/run/1.glob.txt",
        f"file://{root}/wf/run/1.glob.txt",
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
    [
        "{root}/ws/wf/run/1.glob.txt%00",
        "file://{root}/ws/wf/run/1.glob.txt%00",
        "{root}/%ff.glob.txt",
        "{root}/ws/wf/run/1.glob.txt",
        "{root}/wf/run/1.glob.txt",
    ],
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
