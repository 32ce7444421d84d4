"""Spill artifacts belong to a workspace: over one shared store (file:// and s3://), as a
workspaces root shares it, read_spill reads this workspace's artifacts and refuses another's
without opening them."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from fs_search.activities._config import FsSearchConfig
from fs_search.activities._contract import GlobRequest, ReadSpillRequest
from fs_search.activities._search import SearchActivities
from fs_search.activities._telemetry import SearchTelemetry
from fs_search.activities.storage import FileSpillStore, Storage
from fs_search.activities.storage._s3 import S3SpillStore
from fs_search.activities.storage._s3_client import MARKER, client_kwargs
from fs_search.activities.storage._spills import UNLABELLED, spill_workspace
from fs_search.worker import build_services
from tests.conftest import aws_session
from tests.helpers import write_tree

# --- what a store touches ------------------------------------------------------------------

_opened: list[str] | None = None
_hooked = False


def _record_open(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and _opened is not None and isinstance(args[0], (str, bytes)):
        _opened.append(os.fsdecode(args[0]))


@contextlib.contextmanager
def _files_opened() -> Iterator[list[str]]:
    """Every path this process opens meanwhile, in any thread (Python's ``open`` audit event)."""
    global _opened, _hooked
    if not _hooked:
        sys.addaudithook(_record_open)  # cannot be removed: it records only inside this block
        _hooked = True
    _opened = []
    try:
        yield _opened
    finally:
        _opened = None


@contextlib.asynccontextmanager
async def _requests_sent(store: S3SpillStore) -> AsyncIterator[list[str]]:
    """Every S3 operation the store's client sends meanwhile."""
    sent: list[str] = []

    def record(model: Any, **_: Any) -> None:
        sent.append(model.name)

    events = (await store.client.get()).meta.events
    events.register("before-call.s3", record)
    try:
        yield sent
    finally:
        events.unregister("before-call.s3", record)


@dataclasses.dataclass
class Shared:
    """One store, as every workspace of a ``--workspaces-root`` process shares it."""

    store: FileSpillStore | S3SpillStore
    where: str  # the store's directory or s3://bucket/prefix

    @contextlib.asynccontextmanager
    async def touched(self) -> AsyncIterator[list[str]]:
        """What the store reads meanwhile: files under its directory, or S3 requests."""
        if isinstance(self.store, FileSpillStore):
            with _files_opened() as opened:
                yield opened
                opened[:] = [p for p in opened if p.startswith(str(self.store.directory))]
        else:
            async with _requests_sent(self.store) as sent:
                yield sent


@pytest.fixture(params=["file", "s3"])
def s3_or_none(request) -> Any:
    """The S3 server for the s3 run (its fixture set up outside the test's event loop)."""
    return request.getfixturevalue("s3") if request.param == "s3" else None


@pytest.fixture
async def shared(s3_or_none, tmp_path) -> AsyncIterator[Shared]:
    if s3_or_none is None:
        yield Shared(FileSpillStore(tmp_path / "spill"), str(tmp_path / "spill"))
        return
    url = s3_or_none.url()
    store = S3SpillStore.from_url(url, endpoint_url=s3_or_none.endpoint_url)
    yield Shared(store, url)
    await store.close()


async def _workspaces(
    tmp_path: Path, shared: Shared, *names: str, named: bool = True
) -> list[SearchActivities]:
    """The activities of one process over directories ``names`` of a root, each with its
    name as id (as the fleet attaches them) or, ``named=False``, built without an id."""
    config = FsSearchConfig.load(
        getenv=lambda _: None,
        overrides={
            "sample_over_cap_glob_results": False,
            "glob_max_results": 2,
            "parse_processes": 0,
        },
    )
    services = await build_services(config, storage=Storage.beside(shared.store))
    return [
        services.activities_for(
            write_tree(tmp_path / "root" / name, {f"{name}-{i}.txt": "x" for i in range(5)}),
            name if named else None,
        )
        for name in names
    ]


async def _spill(acts: SearchActivities) -> str:
    """The locator of an over-cap glob's artifact (the same Temporal ids for every workspace)."""
    r = await ActivityEnvironment().run(acts.glob, GlobRequest(pattern="*"))
    assert r.spill is not None, r.spill_error
    return r.spill.locator


async def _read(acts: SearchActivities, locator: str) -> str:
    page = await ActivityEnvironment().run(acts.read_spill, ReadSpillRequest(locator=locator))
    return page.text


# --- the tests -----------------------------------------------------------------------------


async def test_a_workspace_reads_its_own_spill_and_not_anothers(tmp_path, shared):
    """Workspace a's artifact is readable by a's read_spill, refused by b's without a read."""
    a, b = await _workspaces(tmp_path, shared, "a", "b")
    mine, theirs = await _spill(a), await _spill(b)
    assert mine != theirs  # the same workflow, run and activity ids: only the workspace differs
    async with shared.touched() as touched:
        assert await _read(a, mine) == "a-0.txt\na-1.txt\na-2.txt\na-3.txt\na-4.txt"
    assert touched  # what a read touches is seen
    assert await _read(b, theirs) == "b-0.txt\nb-1.txt\nb-2.txt\nb-3.txt\nb-4.txt"
    for reader, locator in ((b, mine), (a, theirs)):
        async with shared.touched() as touched:
            with pytest.raises(ApplicationError) as info:
                await _read(reader, locator)
        assert touched == [], touched
        assert info.value.type == "INVALID_ARGUMENT" and info.value.non_retryable
        message = info.value.message
        assert "another workspace" in message
        # Nothing beyond the locator the model gave: no other tree, no store path or key.
        rest = message.replace(repr(locator), "LOCATOR")
        assert str(tmp_path) not in rest and "/" not in rest and "-0.txt" not in rest


async def test_the_layout_before_workspaces_is_refused_clearly(tmp_path, shared):
    """A locator of the earlier three-segment layout is INVALID_ARGUMENT, saying why, unread."""
    (a,) = await _workspaces(tmp_path, shared, "a")
    old = "wf/run/1.glob.txt"  # <workflow>/<run>/<activity>.<tool>.txt
    if isinstance(shared.store, FileSpillStore):
        write_tree(shared.store.directory, {old: "saved before\n"})
        locator = str(shared.store.directory / old)
    else:
        s3 = shared.store
        async with aws_session().client("s3", **client_kwargs(s3.client.endpoint_url)) as client:
            key = f"{s3.prefix}/{old}"
            await client.put_object(
                Bucket=s3.bucket, Key=key, Body=b"saved before\n", Metadata=MARKER
            )
        locator = f"s3://{s3.bucket}/{key}"
    async with shared.touched() as touched:
        with pytest.raises(ApplicationError) as info:
            await _read(a, locator)
    assert touched == [], touched
    assert info.value.type == "INVALID_ARGUMENT"
    assert "saved before artifacts were kept per workspace" in info.value.message
    assert "run the search again" in info.value.message


async def test_two_unnamed_workspaces_sharing_a_store_keep_their_spills_apart(tmp_path, shared):
    """Activities built without an id spill under _unnamed-<digest of host and directory>."""
    a, b = await _workspaces(tmp_path, shared, "x", "y", named=False)
    assert a.telemetry.workspace_id == b.telemetry.workspace_id == SearchTelemetry().workspace_id
    mine, theirs = await _spill(a), await _spill(b)
    segment = (mine.removeprefix(shared.where + "/")).split("/")[0]
    assert re.fullmatch(r"_unnamed-[0-9a-f]{16}--[0-9a-f]{32}", segment), mine
    assert segment.startswith(spill_workspace(UNLABELLED, a.workspace.root) + "--")
    assert mine != theirs
    assert await _read(a, mine) == "x-0.txt\nx-1.txt\nx-2.txt\nx-3.txt\nx-4.txt"
    with pytest.raises(ApplicationError) as info:
        await _read(b, mine)
    assert info.value.type == "INVALID_ARGUMENT"


async def test_a_spill_of_a_directory_re_created_since_is_refused_unread(tmp_path, shared):
    """Spills belong to the directory: workspace a re-created at its path (rm -rf, mkdir)
    between a spill and its read gets INVALID_ARGUMENT for the old locator, and the store is
    not touched; the new directory's own spills are read. Moved away and back, a directory
    reads its spills again (the same directory)."""
    (a,) = await _workspaces(tmp_path, shared, "a")
    old = await _spill(a)
    ws = tmp_path / "root" / "a"
    ws.rename(tmp_path / "away")
    (tmp_path / "away").rename(ws)
    assert await _read(a, old) == "a-0.txt\na-1.txt\na-2.txt\na-3.txt\na-4.txt"
    shutil.rmtree(ws)
    write_tree(ws, {f"new-{i}.txt": "x" for i in range(5)})
    async with shared.touched() as touched:
        with pytest.raises(ApplicationError) as info:
            await _read(a, old)
    assert touched == [], touched
    assert info.value.type == "INVALID_ARGUMENT" and info.value.non_retryable
    assert "made in another directory" in info.value.message, info.value.message
    new = await _spill(a)
    assert new != old
    assert await _read(a, new) == "new-0.txt\nnew-1.txt\nnew-2.txt\nnew-3.txt\nnew-4.txt"


async def test_a_spill_read_while_the_workspace_is_moved_away_is_refused_unread(tmp_path, shared):
    """The workspace's path names nothing: read_spill says the workspace cannot be read and
    touches no artifact."""
    (a,) = await _workspaces(tmp_path, shared, "a")
    locator = await _spill(a)
    (tmp_path / "root" / "a").rename(tmp_path / "away")
    async with shared.touched() as touched:
        with pytest.raises(ApplicationError) as info:
            await _read(a, locator)
    assert touched == [], touched
    assert info.value.type == "SEARCH_FAILED"
    assert "the workspace cannot be read" in info.value.message
