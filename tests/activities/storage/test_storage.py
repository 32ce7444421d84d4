"""The storage seam: one URL names artifacts and payloads together, each half checked by itself."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.converter import StorageDriverRetrieveContext, StorageDriverStoreContext
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from fs_search.activities._config import FsSearchConfig
from fs_search.activities._contract import GlobRequest
from fs_search.activities.storage import (
    FileSpillStore,
    LocalDirectoryDriver,
    Storage,
    open_storage,
    storage_for,
)
from fs_search.activities.storage._s3 import S3PayloadDriver, S3SpillStore
from fs_search.worker import build_activities
from tests.helpers import write_tree


def test_a_file_url_keeps_payloads_beside_the_artifacts(tmp_path):
    storage = open_storage(f"file://{tmp_path}/spill", ttl_hours=2, payload_threshold=1000)
    assert isinstance(storage.spill_store, FileSpillStore)
    assert storage.spill_store.directory == tmp_path / "spill"
    assert storage.spill_store.ttl_seconds == 2 * 3600
    assert isinstance(storage.payload_store, LocalDirectoryDriver)
    assert storage.payload_store.directory == tmp_path / "spill" / "payloads"
    (driver,) = storage.external_storage().drivers
    assert driver is storage.payload_store
    assert storage.external_storage().payload_size_threshold == 1000


def test_an_s3_url_keeps_payloads_in_the_same_bucket():
    storage = open_storage("s3://bucket-a/spill/x", s3_endpoint_url="http://127.0.0.1:1")
    assert isinstance(storage.spill_store, S3SpillStore)
    assert (storage.spill_store.bucket, storage.spill_store.prefix) == ("bucket-a", "spill/x")
    assert isinstance(storage.payload_store, S3PayloadDriver)
    assert storage.payload_store.bucket == "bucket-a"
    assert storage.payload_store.client.endpoint_url == "http://127.0.0.1:1"


def test_settings_name_the_storage(tmp_path):
    config = FsSearchConfig.load(
        getenv=lambda _: None,
        overrides={
            "spill_url": f"file://{tmp_path}",
            "payload_threshold_bytes": 4096,
            "sample_over_cap_glob_results": False,
        },
    )
    storage = storage_for(config)
    assert storage.payload_threshold == 4096
    assert isinstance(storage.spill_store, FileSpillStore)
    assert storage.spill_store.directory == tmp_path


@pytest.mark.parametrize("url", ["http://x/y", "ftp://host/dir", "s3:///no-bucket", "file://rel"])
def test_other_urls_are_refused_by_name(url):
    with pytest.raises(ValueError) as info:
        open_storage(url)
    assert url in str(info.value)


async def test_local_payloads_round_trip_and_are_verified(tmp_path):
    driver = LocalDirectoryDriver(tmp_path / "payloads")
    await driver.check()
    [claim] = await driver.store(StorageDriverStoreContext(), [Payload(data=b"big")])
    [back] = await driver.retrieve(StorageDriverRetrieveContext(), [claim])
    assert back.data == b"big"
    (tmp_path / "payloads" / f"{claim.claim_data['sha256']}.payload").write_bytes(b"forged")
    with pytest.raises(ValueError, match="integrity"):
        await driver.retrieve(StorageDriverRetrieveContext(), [claim])


async def test_an_unwritable_payload_directory_fails_its_check(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError):
        await LocalDirectoryDriver(tmp_path / "file" / "payloads").check()


async def test_s3_payload_check_asks_the_payload_bucket(s3):
    await S3PayloadDriver(s3.bucket, endpoint_url=s3.endpoint_url).check()
    missing = S3PayloadDriver("no-such-bucket-here", endpoint_url=s3.endpoint_url)
    with pytest.raises(Exception) as info:
        await missing.check()
    assert "404" in str(info.value) or "NoSuchBucket" in str(info.value)
    await missing.close()


@pytest.fixture
def wide(tmp_path: Path) -> Path:
    """A tree whose full glob result (spill: false) is well over a 4 KiB payload threshold."""
    return write_tree(tmp_path / "ws", {f"d/{'n' * 60}_{i:04}.txt": "" for i in range(200)})


async def _glob_everything(storage: Storage, workspace: Path):
    config = FsSearchConfig.load(
        getenv=lambda _: None,
        overrides={"sample_over_cap_glob_results": False, "payload_threshold_bytes": 4096},
    )
    acts = await build_activities(config, workspace, storage=storage)
    return await ActivityEnvironment().run(acts.glob, GlobRequest(pattern="*", spill=False))


async def test_a_large_result_checks_the_payload_half_not_the_artifacts(tmp_path, wide):
    """Payloads down, artifacts fine: one clear SEARCH_FAILED before the result is returned."""
    (tmp_path / "blocker").write_text("")
    storage = Storage(
        FileSpillStore(tmp_path / "spill"),
        LocalDirectoryDriver(tmp_path / "blocker" / "payloads"),
        payload_threshold=4096,
    )
    with pytest.raises(ApplicationError) as info:
        await _glob_everything(storage, wide)
    assert info.value.type == "SEARCH_FAILED"
    assert "payload store is unavailable" in info.value.message
    assert str(tmp_path) not in info.value.message


async def test_broken_artifacts_do_not_stop_a_large_unspilled_result(tmp_path, wide):
    """Artifacts down, payloads fine: spill: false never touches the artifact store."""
    (tmp_path / "blocker").write_text("")
    storage = Storage(
        FileSpillStore(tmp_path / "blocker" / "spill"),
        LocalDirectoryDriver(tmp_path / "payloads"),
        payload_threshold=4096,
    )
    result = await _glob_everything(storage, wide)
    assert result.total == 200 and len(result.paths) == 200
