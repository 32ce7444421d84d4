"""FsSearchPlugin: pydantic conversion and external storage, keeping what callers already have."""

from __future__ import annotations

import dataclasses

from temporalio.api.common.v1 import Payload
from temporalio.contrib.aws.s3driver import S3StorageDriver
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import (
    DataConverter,
    DefaultPayloadConverter,
    ExternalStorage,
    PayloadCodec,
)

from fs_search.activities.models import GrepResult
from fs_search.workflows.plugin import FsSearchPlugin
from fs_search.workflows.storage import LocalDirectoryDriver


class Rot13Codec(PayloadCodec):
    async def encode(self, payloads):
        return list(payloads)

    async def decode(self, payloads):
        return list(payloads)


def _configured(plugin: FsSearchPlugin, existing: DataConverter | None = None) -> DataConverter:
    config = plugin.configure_client({"data_converter": existing} if existing else {})  # type: ignore[typeddict-item]
    return config["data_converter"]


def test_default_converter_becomes_pydantic_with_local_storage(tmp_path):
    """With nothing configured: pydantic JSON and a local-directory store under the spill dir."""
    converter = _configured(FsSearchPlugin(spill_url=f"file://{tmp_path}", getenv=lambda _: None))
    assert converter.payload_converter_class is PydanticPayloadConverter
    storage = converter.external_storage
    assert isinstance(storage, ExternalStorage) and storage.payload_size_threshold == 256 * 1024
    [driver] = storage.drivers
    assert isinstance(driver, LocalDirectoryDriver) and driver.directory == tmp_path / "payloads"


def test_callers_settings_are_kept():
    """A caller's codec, custom payload converter and external storage survive the plugin."""

    class MyConverter(DefaultPayloadConverter):
        pass

    own_storage = ExternalStorage(drivers=[LocalDirectoryDriver("/tmp/elsewhere", name="mine")])
    existing = dataclasses.replace(
        DataConverter.default,
        payload_converter_class=MyConverter,
        payload_codec=Rot13Codec(),
        external_storage=own_storage,
    )
    converter = _configured(FsSearchPlugin(getenv=lambda _: None), existing)
    assert converter.payload_converter_class is MyConverter
    assert isinstance(converter.payload_codec, Rot13Codec)
    assert converter.external_storage is own_storage


def test_s3_store_from_environment():
    """FS_SEARCH_SPILL_URL=s3://... gives Temporal's S3 driver on that bucket; threshold from env."""
    env = {
        "FS_SEARCH_SPILL_URL": "s3://my-bucket/fs-search",
        "FS_SEARCH_S3_ENDPOINT_URL": "http://s3.local",
        "FS_SEARCH_PAYLOAD_THRESHOLD_BYTES": "100000",
    }
    converter = _configured(FsSearchPlugin(getenv=env.get))
    storage = converter.external_storage
    [driver] = storage.drivers
    assert isinstance(driver, S3StorageDriver) and storage.payload_size_threshold == 100_000
    assert driver._bucket == "my-bucket"


def test_no_external_storage_and_no_tracing_when_asked():
    """external_storage=False and tracing=False leave those out."""
    plugin = FsSearchPlugin(external_storage=False, tracing=False, getenv=lambda _: None)
    assert _configured(plugin).external_storage is None
    assert plugin.interceptors is None
    traced = FsSearchPlugin(getenv=lambda _: None)
    assert any(isinstance(i, TracingInterceptor) for i in traced.interceptors)


async def test_local_driver_round_trip_and_integrity(tmp_path):
    """The local-directory driver stores content-addressed payloads and verifies them on read."""
    from temporalio.converter import StorageDriverRetrieveContext, StorageDriverStoreContext

    driver = LocalDirectoryDriver(tmp_path)
    payload = Payload(
        data=GrepResult(matches=[], total=0, files=0, truncated=False, text="x")
        .model_dump_json()
        .encode()
    )
    [claim] = await driver.store(StorageDriverStoreContext(), [payload])
    [back] = await driver.retrieve(StorageDriverRetrieveContext(), [claim])
    assert back == payload
    path = tmp_path / f"{claim.claim_data['sha256']}.payload"
    path.write_bytes(b"tampered")
    import pytest

    with pytest.raises(ValueError, match="integrity"):
        await driver.retrieve(StorageDriverRetrieveContext(), [claim])
    with pytest.raises(ValueError, match="invalid"):
        from temporalio.converter import StorageDriverClaim

        await driver.retrieve(
            StorageDriverRetrieveContext(), [StorageDriverClaim({"sha256": "../../etc/passwd"})]
        )
