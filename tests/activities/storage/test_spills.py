"""A failing spill store: the results still come back, and the model reads only our own words."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from fs_search.activities._contract import GlobRequest, GrepRequest, ReadSpillRequest
from fs_search.activities._errors import SearchError
from fs_search.activities._identity import workspace_identity
from fs_search.activities.storage import FileSpillStore, SpillKey, directory_owner
from fs_search.activities.storage._s3 import S3SpillStore
from fs_search.worker._processes import free_port
from tests.conftest import AWS_ENV
from tests.helpers import Dir, write_tree

BUCKET = "fs-search-hidden-bucket"


def assert_no_host_detail(text: str, *details: str) -> None:
    """``text`` names no endpoint, port, path, home, key, exception class or traceback."""
    assert not re.search(r"https?:|:\d{2,5}\b|/|\\\\|Errno|Error\b|Exception|Traceback", text), text
    for detail in (os.path.expanduser("~"), BUCKET, "test-run", *details):
        assert detail not in text, (detail, text)


@pytest.fixture(autouse=True)
def aws_env(monkeypatch) -> None:
    """Credentials, so only the endpoint being down can fail an S3 call."""
    for key, value in AWS_ENV.items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "ws", {f"d{i % 3}/f{i:02}.txt": "needle\n" for i in range(12)})


@pytest.mark.parametrize("tool", ["glob", "grep"])
async def test_unreachable_s3_store_is_reported_in_plain_words(ws, make_activities, caplog, tool):
    """An S3 endpoint that is down: the page and 'the spill store is unreachable', nothing more."""
    port = free_port()
    store = S3SpillStore(BUCKET, "spill", endpoint_url=f"http://127.0.0.1:{port}")
    acts = await make_activities(ws, store=store, glob_max_results=3, grep_max_matches=3)
    with caplog.at_level(logging.WARNING):
        if tool == "glob":
            r = await ActivityEnvironment().run(acts.glob, GlobRequest(pattern="*.txt"))
            assert len(r.paths) == 3
        else:
            r = await ActivityEnvironment().run(acts.grep, GrepRequest(pattern="needle"))
            assert len(r.matches) == 3
    assert r.spill is None and r.total == 12
    assert r.spill_error == "the spill store is unreachable"
    assert_no_host_detail(r.spill_error, str(port))
    footer = r.text.split("\n\n")[-1]
    assert "the spill store is unreachable" in footer
    assert_no_host_detail(footer, str(port))
    assert str(port) in caplog.text  # the details are for the worker's log
    await store.close()


async def test_unwritable_file_store_is_reported_in_plain_words(ws, tmp_path, make_activities):
    """A store directory that cannot be created: the page and our words, no path."""
    blocker = tmp_path / "spill"
    blocker.write_text("a file where the spill directory should be")
    acts = await make_activities(ws, glob_max_results=3)
    r = await ActivityEnvironment().run(acts.glob, GlobRequest(pattern="*.txt"))
    assert r.spill is None and len(r.paths) == 3 and r.total == 12
    assert r.spill_error == "the spill store refused the write"
    assert_no_host_detail(r.spill_error, str(tmp_path))
    assert_no_host_detail(r.text.split("\n\n")[-1], str(tmp_path))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through permission bits")
async def test_read_only_file_store_is_reported_in_plain_words(ws, tmp_path, make_activities):
    """A store directory without write permission: the page and our words, no path."""
    store_dir = write_tree(tmp_path, {"spill": Dir(mode=0o500)}) / "spill"
    acts = await make_activities(ws, glob_max_results=3)
    try:
        r = await ActivityEnvironment().run(acts.glob, GlobRequest(pattern="*.txt"))
    finally:
        store_dir.chmod(0o700)
    assert r.spill is None and len(r.paths) == 3
    assert r.spill_error == "the spill store refused the write"


async def test_read_spill_failures_name_only_the_locator(tmp_path):
    """An artifact that is gone or cannot be read: messages carry the locator, no host detail."""
    store = FileSpillStore(tmp_path / "spill")
    relpath = SpillKey("wf", "run", "1", "glob").relpath()
    # a directory where the artifact should be
    unreadable = write_tree(tmp_path / "spill", {relpath: Dir()}) / relpath
    missing = tmp_path / "spill" / SpillKey("wf", "run", "2", "glob").relpath()
    for locator in (str(unreadable), f"file://{unreadable}", str(missing), f"file://{missing}"):
        with pytest.raises(SearchError) as info:
            await store.read(locator, offset=0, limit=5)
        assert info.value.code == "SEARCH_FAILED"
        assert_no_host_detail(info.value.message.replace(repr(locator), "LOCATOR"))


async def test_read_spill_with_s3_down_names_no_endpoint(tmp_path, make_activities, ws):
    """read_spill while the S3 endpoint is down: SEARCH_FAILED in our words."""
    port = free_port()
    store = S3SpillStore(BUCKET, "spill", endpoint_url=f"http://127.0.0.1:{port}")
    acts = await make_activities(ws, store=store)
    owner = directory_owner(acts.spill_workspace, workspace_identity(ws))
    key = SpillKey("wf", "run", "1", "glob", workspace=owner)
    locator = f"s3://{BUCKET}/spill/{key.relpath()}"
    with pytest.raises(ApplicationError) as info:
        await ActivityEnvironment().run(acts.read_spill, ReadSpillRequest(locator=locator))
    assert info.value.type == "SEARCH_FAILED"
    assert "the spill store is unreachable" in info.value.message
    assert_no_host_detail(info.value.message.replace(repr(locator), "LOCATOR"), str(port))
    await store.close()
