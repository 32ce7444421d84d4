"""The local payload driver on a full file system (a real tmpfs): the readiness check sees it,
a failed write leaves no temp file, and inside an activity it is one plain SEARCH_FAILED."""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.converter import StorageDriverStoreContext
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from fs_search.activities.storage import LocalDirectoryDriver
from tests.helpers import small_filesystem

MB = 1024 * 1024


def _payload(size: int) -> Payload:
    return Payload(metadata={"encoding": b"binary/plain"}, data=os.urandom(size))


def _temp_files(store: Path) -> list[str]:
    return [p.name for p in store.rglob("*") if p.name.startswith(".tmp-")]


async def test_the_check_sees_a_full_disk(tmp_path):
    """Writable is not enough: a payload of about the store's free space or more is ENOSPC."""
    with small_filesystem(tmp_path / "store", "1m") as store:
        driver = LocalDirectoryDriver(store / "payloads")
        await driver.check()
        await driver.check(200_000)
        with pytest.raises(OSError) as info:
            await driver.check(1 * MB)
        assert info.value.errno == errno.ENOSPC


async def test_a_write_that_fills_the_store_leaves_no_temp_file(tmp_path):
    """Outside an activity (a caller, a workflow worker) the failure stays an OSError, and the
    partly written temp file is removed; the store still takes what fits afterwards."""
    with small_filesystem(tmp_path / "store", "1m") as store:
        driver = LocalDirectoryDriver(store / "payloads")
        with pytest.raises(OSError) as info:
            await driver.store(StorageDriverStoreContext(), [_payload(2 * MB)])
        assert info.value.errno == errno.ENOSPC
        assert _temp_files(store) == []
        small = _payload(100_000)
        [claim] = await driver.store(StorageDriverStoreContext(), [small])
        digest = hashlib.sha256(small.SerializeToString()).hexdigest()
        assert claim.claim_data == {"sha256": digest}
        assert (store / "payloads" / f"{digest}.payload").exists()
        assert _temp_files(store) == []


async def test_in_an_activity_a_full_store_is_one_plain_search_failed(tmp_path):
    """The SDK stores a large result after the activity returned, still in its context:
    there the failure is the contract's non-retryable SEARCH_FAILED, in plain words."""
    with small_filesystem(tmp_path / "store", "1m") as store:
        driver = LocalDirectoryDriver(store / "payloads")

        async def store_a_result() -> None:
            await driver.store(StorageDriverStoreContext(), [_payload(2 * MB)])

        with pytest.raises(ApplicationError) as info:
            await ActivityEnvironment().run(store_a_result)
        left = _temp_files(store)
    assert info.value.type == "SEARCH_FAILED" and info.value.non_retryable
    assert "the payload store is full" in info.value.message
    for detail in ("Errno", "No space", str(tmp_path), "OSError"):
        assert detail not in info.value.message, info.value.message
    assert left == []
