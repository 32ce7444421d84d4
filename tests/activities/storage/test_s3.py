"""The s3:// spill store against a real S3 server (SeaweedFS from the wheel)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from fs_search.activities._catalogue import READ_SPILL_PROMPT
from fs_search.activities._contract import GlobRequest, GrepRequest, ReadSpillRequest
from fs_search.activities._errors import SearchError
from fs_search.activities._identity import workspace_identity
from fs_search.activities.storage import SpillKey, directory_owner
from fs_search.activities.storage._s3 import S3SpillStore
from fs_search.activities.storage._s3_client import client_kwargs
from fs_search.worker import maintenance
from fs_search.worker._processes import free_port
from tests.conftest import start_s3
from tests.helpers import write_tree

# In-process S3 clients read their credentials from the environment, for each test only.
pytestmark = pytest.mark.usefixtures("aws_env")


def _store(s3, prefix: str | None = None) -> S3SpillStore:
    return S3SpillStore.from_url(s3.url(prefix), endpoint_url=s3.endpoint_url)


def _segment(workspace: str) -> str:
    """How a key spells ``workspace`` (its first segment)."""
    return SpillKey("wf", "run", "1", "glob", workspace=workspace).relpath().split("/")[0]


def _dead_store() -> S3SpillStore:
    return S3SpillStore("fs-search-test", "spill", endpoint_url=f"http://127.0.0.1:{free_port()}")


async def _put(s3, bucket: str, objects: dict[str, str], *, create: bool = False) -> None:
    """Write objects straight into the bucket, as another writer would."""
    import aioboto3

    async with aioboto3.Session().client("s3", **client_kwargs(s3.endpoint_url)) as client:
        if create:
            await client.create_bucket(Bucket=bucket)
        for key, body in objects.items():
            await client.put_object(Bucket=bucket, Key=key, Body=body.encode())


@pytest.fixture
def many(tmp_path: Path) -> Path:
    return write_tree(
        tmp_path / "ws", {f"d{i % 4}/f{i:03}.txt": f"needle {i}\n" for i in range(40)}
    )


async def test_round_trip_and_paging(s3, many, make_activities):
    """Over-cap results land in S3; read_spill pages through them by line."""
    store = _store(s3)
    acts = await make_activities(many, store=store, glob_max_results=5)
    r = await ActivityEnvironment().run(acts.glob, GlobRequest(pattern="*.txt"))
    assert r.spill is not None and r.spill.locator.startswith(f"s3://{s3.bucket}/{store.prefix}/")
    assert "read_spill" in r.spill.hint and r.spill.locator in r.text
    pages, offset = [], 0
    while offset is not None:
        page = await ActivityEnvironment().run(
            acts.read_spill, ReadSpillRequest(locator=r.spill.locator, offset=offset, limit=15)
        )
        pages += page.text.splitlines()
        offset = page.next_offset
        assert page.total_lines == 40
    assert pages == [f"d{i % 4}/f{i:03}.txt" for i in range(40)]
    catalogue = await ActivityEnvironment().run(acts.tools)
    assert [t.name for t in catalogue.tools] == ["glob", "grep", "read_spill"]
    assert catalogue.system_prompt[-1] == READ_SPILL_PROMPT


async def test_retry_overwrites_its_artifact(s3, tmp_path, make_activities):
    """The same workspace + workflow run + activity id + tool writes one key: a retry overwrites."""
    store = _store(s3)
    ws = write_tree(tmp_path / "ws", {f"a{i}.txt": "x" for i in range(6)})
    acts = await make_activities(ws, store=store, glob_max_results=2)
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info, workflow_id="wf-1", workflow_run_id="run-1", activity_id="7"
    )
    first = await env.run(acts.glob, GlobRequest(pattern="*"))
    write_tree(ws, {"b.txt": "x"}, start_mtime=1_700_000_000)
    env.info = dataclasses.replace(env.info, attempt=2)
    second = await env.run(acts.glob, GlobRequest(pattern="*"))
    assert first.spill.locator == second.spill.locator
    key = second.spill.locator.removeprefix(f"s3://{s3.bucket}/")
    assert await s3.keys(store.prefix + "/") == [key]
    owner = directory_owner(acts.spill_workspace, second.workspace.root)
    assert key.split("/")[1:] == [_segment(owner), "wf-1", "run-1", "7.glob.txt"]
    page = await env.run(acts.read_spill, ReadSpillRequest(locator=second.spill.locator))
    assert page.total_lines == 7


async def test_keys_never_carry_model_input(s3, many, make_activities):
    """Keys come from the workspace and Temporal ids only, percent-encoded: no slashes or '..'."""
    store = _store(s3)
    acts = await make_activities(many, store=store, grep_max_matches=1)
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, workflow_id="../../evil/..", activity_id="a/b")
    r = await env.run(acts.grep, GrepRequest(pattern="needle|\\.\\./\\.\\./x", path="d1"))
    key = r.spill.locator.removeprefix(f"s3://{s3.bucket}/")
    assert key.startswith(store.prefix + "/") and "needle" not in key
    assert key.split("/")[1:] == [
        _segment(directory_owner(acts.spill_workspace, r.workspace.root)),
        "%2E%2E%2F%2E%2E%2Fevil%2F%2E%2E",
        "test-run",
        "a%2Fb.grep.txt",
    ]


async def test_locator_confinement(s3, many, make_activities):
    """Locators outside the configured bucket/prefix are INVALID_ARGUMENT; a missing one fails."""
    store = _store(s3)
    acts = await make_activities(many, store=store)
    owner = directory_owner(acts.spill_workspace, workspace_identity(many))
    bad = [
        f"s3://other-bucket/{store.prefix}/x.txt",
        f"s3://{s3.bucket}/another-prefix/x.txt",
        f"s3://{s3.bucket}/{store.prefix}/../another-prefix/x.txt",
        f"s3://{s3.bucket}/{store.prefix}",
        "/etc/passwd",
        f"file:///{store.prefix}/x.txt",
    ]
    for locator in bad:
        with pytest.raises(ApplicationError) as info:
            await ActivityEnvironment().run(acts.read_spill, ReadSpillRequest(locator=locator))
        assert info.value.type == "INVALID_ARGUMENT", locator
    with pytest.raises(ApplicationError) as info:
        await ActivityEnvironment().run(
            acts.read_spill,
            ReadSpillRequest(locator=f"s3://{s3.bucket}/{store.prefix}/{owner}/wf/run/9.grep.txt"),
        )
    assert info.value.type == "SEARCH_FAILED" and "expired" in info.value.message


async def test_an_artifact_given_as_its_utf8_bytes_is_stored_as_is(s3):
    """A glob artifact built in place arrives as UTF-8 bytes: put as is, lines counted."""
    store = _store(s3)
    ref = await store.save(
        SpillKey("wf", "run", "2", "glob", workspace="ws"), bytearray("a\nb\u00e9\n".encode())
    )
    assert "2 lines" in ref.hint
    page = await store.read(ref.locator, offset=0, limit=10, workspace="ws")
    assert page.text == "a\nb\u00e9" and page.total_lines == 2


async def test_locators_with_nul_bad_escapes_or_foreign_names_are_invalid(s3):
    """NUL, undecodable escapes and keys of any other shape are INVALID_ARGUMENT, never read."""
    store = _store(s3)
    await store.save(SpillKey("wf", "run", "1", "glob", workspace="ws"), "mine\n")
    at = f"s3://{s3.bucket}/{store.prefix}"
    await _put(
        s3, s3.bucket, {f"{store.prefix}/notes.txt": "SECRET", f"{store.prefix}/ws/wf/x": "S"}
    )
    bad = [
        f"{at}/ws/wf/run/1.glob.txt\x00",
        f"{at}/ws/wf/run/%00.glob.txt",
        f"{at}/ws/wf/run/%FF.glob.txt",
        f"{at}/ws/wf/run/%zz.glob.txt",
        f"{at}/ws/wf/run/%41.glob.txt",
        f"{at}/ws/wf/run/1.glob.txt?x",
        f"{at}/ws/wf/run/1.glob.txt#x",
        f"{at}//ws/wf/run/1.glob.txt",
        f"{at}/notes.txt",
        f"{at}/ws/ws/wf/run/1.glob.txt",
        f"{at}/ws/wf/x",
        f"{at}/ws/wf/run/1.txt",
        f"S3://{s3.bucket}/{store.prefix}/ws/wf/run/1.glob.txt",
        f"s3://{s3.bucket}:1/{store.prefix}/ws/wf/run/1.glob.txt",
    ]
    for locator in bad:
        with pytest.raises(SearchError) as info:
            await store.read(locator, offset=0, limit=5)
        assert info.value.code == "INVALID_ARGUMENT", locator
        assert "SECRET" not in info.value.message and s3.endpoint_url not in info.value.message
    page = await store.read(f"{at}/ws/wf/run/1.glob.txt", offset=0, limit=5)
    assert page.text == "mine"
    await store.close()


async def test_bucket_without_prefix_reads_only_its_own_artifacts(s3, many, make_activities):
    """s3://bucket alone: Temporal's v0/ payloads and other writers' keys are never read."""
    bucket = f"shared-{uuid.uuid4().hex[:8]}"
    digest = "ab" * 32
    foreign = {
        "v0/something": "PAYLOAD",
        f"v0/d/sha256/{digest}": "PAYLOAD",
        f"v0/ns/default/wt/Agent/wi/wf/ri/run/d/sha256/{digest}": "PAYLOAD",
        "other/key": "OTHER",
        "a/b/1.glob.txt": "OTHER",  # the shape before workspaces
    }
    store = S3SpillStore.from_url(f"s3://{bucket}", endpoint_url=s3.endpoint_url)
    acts = await make_activities(many, store=store, glob_max_results=5)
    # The artifact shape in this workspace and another, but not written by the store.
    owner = directory_owner(acts.spill_workspace, workspace_identity(many))
    foreign[f"{_segment(owner)}/a/b/1.glob.txt"] = "OTHER"
    foreign["w/a/b/1.glob.txt"] = "OTHER"
    await _put(s3, bucket, foreign, create=True)
    r = await ActivityEnvironment().run(acts.glob, GlobRequest(pattern="*.txt"))
    assert r.spill is not None and r.spill.locator.startswith(f"s3://{bucket}/")
    page = await ActivityEnvironment().run(
        acts.read_spill, ReadSpillRequest(locator=r.spill.locator)
    )
    assert page.total_lines == 40
    for key in foreign:
        with pytest.raises(ApplicationError) as info:
            await ActivityEnvironment().run(
                acts.read_spill, ReadSpillRequest(locator=f"s3://{bucket}/{key}")
            )
        assert info.value.type == "INVALID_ARGUMENT", key
        assert "PAYLOAD" not in str(info.value.message) and "OTHER" not in info.value.message


async def test_store_down_at_start(many, make_activities, caplog):
    """An unreachable endpoint: the worker starts with a warning and searches return spill_error."""
    store = _dead_store()
    acts = await make_activities(many, store=store, glob_max_results=5)
    with caplog.at_level(logging.WARNING, logger="fs_search.worker"):
        async with maintenance(acts):
            started = time.monotonic()
            r = await ActivityEnvironment().run(acts.glob, GlobRequest(pattern="*"))
            elapsed = time.monotonic() - started
            for _ in range(100):  # the start-up check runs concurrently
                if "not usable right now" in caplog.text:
                    break
                await asyncio.sleep(0.1)
    assert "not usable right now" in caplog.text
    assert r.spill is None and r.spill_error and len(r.paths) == 5 and r.total == 40
    assert "Could not save the complete list" in r.text
    assert elapsed < 20


async def test_missing_bucket(s3, many, make_activities):
    """A bucket that does not exist degrades to spill_error too."""
    store = S3SpillStore(f"no-such-{uuid.uuid4().hex[:8]}", "p", endpoint_url=s3.endpoint_url)
    acts = await make_activities(many, store=store, grep_max_matches=2)
    r = await ActivityEnvironment().run(acts.grep, GrepRequest(pattern="needle"))
    assert r.spill is None and len(r.matches) == 2
    assert r.spill_error == "the spill store's bucket does not exist"


async def test_outage_mid_run_and_recovery(tmp_path, many, make_activities):
    """Stop S3 mid-run: spill_error while down; after a restart the same worker spills again."""
    own = await start_s3(tmp_path / "weed", bucket="outage-test")
    try:
        store = _store(own)
        acts = await make_activities(many, store=store, glob_max_results=5)
        ok = await ActivityEnvironment().run(acts.glob, GlobRequest(pattern="*"))
        assert ok.spill is not None
        own.server.stop()
        down = await ActivityEnvironment().run(acts.glob, GlobRequest(pattern="*"))
        assert down.spill is None and down.spill_error and len(down.paths) == 5
        await own.server.start()
        back = await ActivityEnvironment().run(acts.glob, GlobRequest(pattern="*"))
        assert back.spill is not None and back.spill_error is None
        page = await ActivityEnvironment().run(
            acts.read_spill, ReadSpillRequest(locator=back.spill.locator)
        )
        assert page.total_lines == 40
    finally:
        own.server.stop()


async def test_large_unspilled_result_with_store_down_fails_once_clearly(tmp_path, make_activities):
    """A spill: false result too big to inline, with its store down: one clear SEARCH_FAILED."""
    ws = write_tree(tmp_path / "ws", {f"dir/{'n' * 60}_{i:05}.txt": "" for i in range(5000)})
    acts = await make_activities(ws, store=_dead_store())
    with pytest.raises(ApplicationError) as info:
        await ActivityEnvironment().run(acts.glob, GlobRequest(pattern="*", spill=False))
    assert info.value.type == "SEARCH_FAILED" and info.value.non_retryable
    assert "payload store is unavailable" in info.value.message
    assert "http" not in info.value.message and "127.0.0.1" not in info.value.message
    small = await ActivityEnvironment().run(
        acts.glob, GlobRequest(pattern="*_0000?.txt", spill=False)
    )
    assert small.total == 10


async def test_denied_put_degrades_to_spill_error(tmp_path, many, make_activities, monkeypatch):
    """Credentials that may read but not write: spill_error and the page, never an error."""
    import json

    import aioboto3

    from fs_search.activities.storage._s3_client import client_kwargs
    from fs_search.worker._devstack import SeaweedS3

    config = tmp_path / "s3.json"
    config.write_text(
        json.dumps(
            {
                "identities": [
                    {
                        "name": "admin",
                        "credentials": [{"accessKey": "admin", "secretKey": "admin-secret"}],
                        "actions": ["Admin", "Read", "List", "Tagging", "Write"],
                    },
                    {
                        "name": "reader",
                        "credentials": [{"accessKey": "reader", "secretKey": "reader-secret"}],
                        "actions": ["Read", "List"],
                    },
                ]
            }
        )
    )
    server = await SeaweedS3(tmp_path / "weed", s3_config=config).start()
    try:
        admin = aioboto3.Session(
            aws_access_key_id="admin", aws_secret_access_key="admin-secret", region_name="us-east-1"
        )
        async with admin.client("s3", **client_kwargs(server.endpoint_url)) as s3:
            await s3.create_bucket(Bucket="read-only")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "reader")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "reader-secret")
        store = S3SpillStore("read-only", "spill", endpoint_url=server.endpoint_url)
        acts = await make_activities(many, store=store, glob_max_results=5)
        r = await ActivityEnvironment().run(acts.glob, GlobRequest(pattern="*"))
        assert r.spill is None and len(r.paths) == 5
        assert r.spill_error == "the spill store refused the write"
        assert "Could not save the complete list" in r.text
    finally:
        server.stop()
