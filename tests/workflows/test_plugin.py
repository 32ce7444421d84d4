"""FsSearchPlugin: pydantic conversion and external storage, keeping what callers already have."""

from __future__ import annotations

import dataclasses
import logging
import uuid
from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.contrib.aws.s3driver import S3StorageDriver
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.contrib.pydantic import PydanticPayloadConverter, pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverter,
    DefaultPayloadConverter,
    ExternalStorage,
    PayloadCodec,
)
from temporalio.worker import UnsandboxedWorkflowRunner, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from fs_search.activities._config import ConfigError
from fs_search.activities._contract import ErrorCode, GrepResult
from fs_search.activities.storage import LocalDirectoryDriver
from fs_search.workflows import FsSearchPlugin
from tests.workflows import sandbox_workflows
from tests.workflows.sandbox_workflows import HOST_PROBE, Probe, TopLevelImportWorkflow


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
    """A caller's codec, failure converter, pydantic converter and external storage survive."""

    class MyPydantic(PydanticPayloadConverter):
        pass

    class MyFailures(DefaultFailureConverter):
        pass

    own_storage = ExternalStorage(drivers=[LocalDirectoryDriver("/tmp/elsewhere", name="mine")])
    existing = dataclasses.replace(
        DataConverter.default,
        payload_converter_class=MyPydantic,
        payload_codec=Rot13Codec(),
        failure_converter_class=MyFailures,
        external_storage=own_storage,
    )
    converter = _configured(FsSearchPlugin(getenv=lambda _: None), existing)
    assert converter.payload_converter_class is MyPydantic
    assert isinstance(converter.payload_codec, Rot13Codec)
    assert converter.failure_converter_class is MyFailures
    assert converter.external_storage is own_storage


def test_non_pydantic_converter_is_replaced_with_a_warning(caplog):
    """A payload converter that cannot carry our models is replaced, and the log names it;
    the rest of the caller's converter is kept."""

    class MyConverter(DefaultPayloadConverter):
        pass

    existing = dataclasses.replace(
        DataConverter.default, payload_converter_class=MyConverter, payload_codec=Rot13Codec()
    )
    with caplog.at_level(logging.WARNING, logger="fs_search.workflows._plugin"):
        converter = _configured(FsSearchPlugin(getenv=lambda _: None), existing)
    assert converter.payload_converter_class is PydanticPayloadConverter
    assert isinstance(converter.payload_codec, Rot13Codec)
    [record] = caplog.records
    assert "MyConverter" in record.getMessage() and "PydanticPayloadConverter" in record.message
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fs_search.workflows._plugin"):
        _configured(FsSearchPlugin(getenv=lambda _: None))  # the SDK default: replaced quietly
    assert caplog.records == []


def test_sandbox_passes_fs_search_through_keeping_the_callers_restrictions():
    """Workers get fs_search passed through on top of their own sandbox settings; an
    unsandboxed runner is left alone."""
    plugin = FsSearchPlugin(tracing=False, external_storage=False, getenv=lambda _: None)
    own = SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules("my_models")
    )
    runner = plugin.configure_worker({"workflow_runner": own})["workflow_runner"]  # type: ignore[typeddict-item]
    assert isinstance(runner, SandboxedWorkflowRunner)
    assert {"fs_search", "my_models"} <= runner.restrictions.passthrough_modules
    unsandboxed = UnsandboxedWorkflowRunner()
    config = plugin.configure_worker({"workflow_runner": unsandboxed})  # type: ignore[typeddict-item]
    assert config["workflow_runner"] is unsandboxed


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


# --- on a real Temporal test server ----------------------------------------------------------


@pytest.fixture
def host_probe(monkeypatch):
    """Marks every fs_search module of the host, so a workflow can tell a sandbox re-import."""
    import sys

    for name, module in list(sys.modules.items()):
        if name.split(".")[0] == "fs_search":
            monkeypatch.setattr(module, HOST_PROBE, True, raising=False)


async def _probe(client: Client) -> Probe:
    queue = f"wf-{uuid.uuid4()}"
    async with Worker(
        client,
        task_queue=queue,
        workflows=[TopLevelImportWorkflow],
        workflow_failure_exception_types=[Exception],  # fail the run, never retry the task
    ):
        return await client.execute_workflow(
            TopLevelImportWorkflow.run, f"ws-{uuid.uuid4()}", id=queue, task_queue=queue
        )


async def test_workflow_code_imports_fs_search_at_top_level(ts_env, host_probe):
    """A worker built from a plugin-installed client passes fs_search through the sandbox:
    a workflow module importing it at top level (no imports_passed_through) runs on the host's
    modules, and a client without the plugin does re-import them (the check can fail)."""
    assert "unsafe" not in Path(sandbox_workflows.__file__).read_text()
    probe = await _probe(ts_env.client)
    assert probe.reimported == []
    assert probe.result["error"]["code"] == ErrorCode.INVALID_ARGUMENT
    plain = Client(
        ts_env.client.service_client,
        namespace=ts_env.client.namespace,
        data_converter=pydantic_data_converter,
    )
    assert (await _probe(plain)).reimported != []


async def test_a_non_pydantic_converter_is_replaced_on_a_real_client(ts_env, caplog):
    """A client configured with a plain JSON converter still runs fs-search workflows: the
    plugin swapped in pydantic conversion (and logged it), keeping the caller's codec."""

    class PlainJson(DefaultPayloadConverter):
        pass

    with caplog.at_level(logging.WARNING, logger="fs_search.workflows._plugin"):
        client = Client(
            ts_env.client.service_client,
            namespace=ts_env.client.namespace,
            data_converter=dataclasses.replace(
                DataConverter.default, payload_converter_class=PlainJson, payload_codec=Rot13Codec()
            ),
            plugins=[FsSearchPlugin(external_storage=False, tracing=False, getenv=lambda _: None)],
        )
    assert any("PlainJson" in r.getMessage() for r in caplog.records)
    assert isinstance(client.data_converter.payload_codec, Rot13Codec)
    probe = await _probe(client)
    assert isinstance(probe, Probe) and probe.result["text"] == "Error: pattern must not be blank"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        (
            "s3:/x",
            "an S3 store is written s3://bucket/prefix, two slashes after 's3:'; did you mean 's3://x'?",
        ),
        ("s3://", "no bucket: an S3 store is written s3://bucket/prefix"),
        ("https://minio:9000/b", "an S3-compatible server's address goes in s3_endpoint_url="),
        ("file://relative", "a file store is an absolute directory, written file:///absolute/dir"),
    ],
)
def test_a_bad_spill_url_argument_is_named_as_the_argument(url, says):
    """FsSearchPlugin(spill_url=...) errors name the argument, never FS_SEARCH_SPILL_URL
    (which the user did not set), in one line saying what a right URL looks like."""
    with pytest.raises(ConfigError) as info:
        FsSearchPlugin(spill_url=url, getenv=lambda _: None)
    message = str(info.value)
    assert message.startswith(f"FsSearchPlugin(spill_url={url!r}): ") and says in message
    assert "FS_SEARCH" not in message and "\n" not in message


def test_environment_values_are_named_by_their_variables():
    """Read from the environment, the same mistakes name the variables."""
    env = {"FS_SEARCH_SPILL_URL": "s3:/x"}
    with pytest.raises(ConfigError, match=r"^FS_SEARCH_SPILL_URL='s3:/x': an S3 store"):
        FsSearchPlugin(getenv=env.get)
    env = {"FS_SEARCH_SPILL_URL": "s3://b/p", "FS_SEARCH_S3_ENDPOINT_URL": "minio:9000"}
    with pytest.raises(
        ConfigError, match=r"^FS_SEARCH_S3_ENDPOINT_URL='minio:9000': an S3 endpoint"
    ):
        FsSearchPlugin(getenv=env.get)
    with pytest.raises(ConfigError, match=r"^FsSearchPlugin\(s3_endpoint_url='minio'\)"):
        FsSearchPlugin(spill_url="s3://b/p", s3_endpoint_url="minio", getenv=lambda _: None)
    env = {"FS_SEARCH_PAYLOAD_THRESHOLD_BYTES": "lots"}
    with pytest.raises(
        ConfigError, match=r"^FS_SEARCH_PAYLOAD_THRESHOLD_BYTES='lots': expected a number"
    ):
        FsSearchPlugin(getenv=env.get)
