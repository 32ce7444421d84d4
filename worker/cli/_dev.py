"""``fs-search dev``: the whole local stack in one command (Temporal + UI, S3, a worker).

The worker also serves the ``fs_search`` Nexus service on ``fs-search-nexus``, behind an
endpoint ``fs-search`` (the server runs with ``activity.enableCallbacks=true``), so
workflows in other namespaces of the dev server can call it
(docs/serving-other-namespaces.md)."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import aioboto3

from fs_search.activities import FsSearchConfig, host_queue_for, task_queue_for
from fs_search.activities.storage import client_kwargs
from fs_search.worker._app import build_services, default_workspace_id, run_until_signalled
from fs_search.worker._connect import TemporalUnreachable, connect
from fs_search.worker._devstack import DevServer, SeaweedS3
from fs_search.worker._fleet import serve_root
from fs_search.worker._operating import Operating
from fs_search.worker._otel_setup import telemetry_from_env
from fs_search.worker._processes import port_is_free, usual_port
from fs_search.worker._queue_owner import host_id_from_env
from fs_search.worker._service_handler import (
    CALLBACKS_DYNAMIC_CONFIG,
    create_endpoint,
    serving_service,
)
from fs_search.worker.cli._env_file import EnvFileError, write_env_file
from fs_search.workflows import DEFAULT_ENDPOINT, FsSearchPlugin

log = logging.getLogger(__name__)

DEV_BUCKET = "fs-search"
# Temporal's own defaults (`temporal server start-dev`): what every example connects to.
DEFAULT_PORT = 7233
DEFAULT_UI_PORT = 8233
# The dev worker's /livez, /readyz and /metrics: a free loopback port (printed).
DEV_HTTP = "127.0.0.1:0"
# Where the dev worker serves the fs_search Nexus service, behind the endpoint "fs-search".
DEV_NEXUS_QUEUE = "fs-search-nexus"
# Local-only credentials: the dev S3 accepts any key, callers need some key to sign with.
DEV_AWS = {
    "AWS_ACCESS_KEY_ID": "fs-search-dev",
    "AWS_SECRET_ACCESS_KEY": "fs-search-dev-secret",
    "AWS_REGION": "us-east-1",
}


async def run_dev(
    workspace: str,
    *,
    workspace_id: str | None = None,
    sample: bool = True,
    data_dir: Path | None = None,
    port: int | None = None,
    ui_port: int | None = None,
    env_file: Path | None = None,
    workspaces_root: str | None = None,
    queues: str | None = None,
    host_id: str | None = None,
    scan_interval: float | None = None,
) -> int:
    """Start Temporal (with UI), SeaweedFS S3 and a worker; print what a caller needs (and
    write it to ``env_file``); run until Ctrl-C / SIGTERM, then stop everything.

    Temporal listens on ``port`` and its UI on ``ui_port``; by default on Temporal's usual
    7233 and 8233 when they are free (else on free ports, said on stderr), so the
    ``localhost:7233`` every example names reaches it. The worker serves ``workspace``, or,
    with ``workspaces_root``, every workspace under it as ``fs-search worker
    --workspaces-root`` does (``queues``, ``host_id`` and ``scan_interval`` as there).

    Raises:
        PortTaken: ``port`` or ``ui_port`` was given and is in use.
    """
    workspace_id = workspace_id or default_workspace_id(workspace)
    host_id = host_id or host_id_from_env()
    temporal = await _start_temporal(port, ui_port)
    s3 = SeaweedS3(data_dir)
    try:
        await s3.start()
        os.environ.update(DEV_AWS)
        session = aioboto3.Session()
        async with session.client("s3", **client_kwargs(s3.endpoint_url)) as client:
            await client.create_bucket(Bucket=DEV_BUCKET)
        spill_url = f"s3://{DEV_BUCKET}/spill"
        overrides: dict[str, object] = {
            "sample_over_cap_glob_results": sample,
            "spill_url": spill_url,
            "s3_endpoint_url": s3.endpoint_url,
        }
        if queues:
            overrides["queues"] = queues
        config = FsSearchConfig.load(overrides=overrides)
        telemetry = telemetry_from_env()
        # The probes and metrics, at a free loopback port unless FS_SEARCH_HTTP names one.
        operating = Operating(
            config, workspaces_root=workspaces_root is not None, http=config.http or DEV_HTTP
        )
        operating.drain.on_exit += [s3.close, temporal.stop]
        operating.adopt(telemetry)
        async with telemetry.running(), operating.running():
            services = await build_services(
                config,
                workspaces_root=workspaces_root is not None,
                telemetry=operating.search_telemetry(),
            )
            operating.watch_services(services)
            temporal_client = await connect(
                address=temporal.address,
                namespace="default",
                plugins=[
                    FsSearchPlugin(external_storage=services.storage),
                    operating.drain.plugin(),
                ],
                runtime=telemetry.runtime,
            )
            operating.watch_client(temporal_client)
            env = {
                "TEMPORAL_ADDRESS": temporal.address,
                "TEMPORAL_NAMESPACE": "default",
                "FS_SEARCH_SPILL_URL": spill_url,
                "FS_SEARCH_S3_ENDPOINT_URL": s3.endpoint_url,
                **DEV_AWS,
            }

            def ready() -> None:
                operating.ready()
                if env_file is not None:
                    try:
                        write_env_file(env_file, env)
                    except OSError as e:
                        raise EnvFileError(
                            f"--env-file {str(env_file)!r}: cannot be written ({e.strerror})"
                        ) from e
                banner = _banner(temporal, s3, serving, env, env_file, try_call, operating.url)
                print(banner, flush=True)

            await create_endpoint(
                temporal_client,
                name=DEFAULT_ENDPOINT,
                target_namespace="default",
                target_queue=DEV_NEXUS_QUEUE,
            )
            async with serving_service(temporal_client, DEV_NEXUS_QUEUE, cap_ms=config.timeout_ms):
                if workspaces_root:
                    serving = _serving_root(workspaces_root, config.queues, host_id)
                    try_call = "grep TODO --workspace-id <a directory's name>" + (
                        f" --host {host_id}" if config.queues == "host" else ""
                    )
                    interval = {} if scan_interval is None else {"scan_interval": scan_interval}
                    await serve_root(
                        temporal_client,
                        services,
                        workspaces_root,
                        host_id=host_id,
                        queues=config.queues,
                        on_ready=ready,
                        stop=operating.stop,
                        drain=operating.drain_timeout,
                        watch=operating.watch_fleet,
                        **interval,
                    )
                    return 0
                activities = services.activities_for(workspace, workspace_id)
                serving = (
                    f"  Workspace:    {activities.workspace.root}\n"
                    f"  Workspace id: {workspace_id} (task queue {task_queue_for(workspace_id)})"
                )
                try_call = f"grep TODO --workspace-id {workspace_id}"
                operating.watch_workspace(activities)
                await run_until_signalled(
                    temporal_client,
                    activities,
                    workspace_id=workspace_id,
                    on_ready=ready,
                    host_id=host_id,
                    stop=operating.stop,
                    drain=operating.drain_timeout,
                )
    finally:
        s3.close()
        temporal.stop()
        print("fs-search dev: stopped Temporal, S3 and the worker", file=sys.stderr, flush=True)
    return 0


async def _start_temporal(port: int | None, ui_port: int | None) -> DevServer:
    """The dev server on the asked ports, else Temporal's usual ones, else free ones."""
    grpc, grpc_note = usual_port(port, DEFAULT_PORT, option="--port")
    ui, ui_note = usual_port(ui_port, DEFAULT_UI_PORT, option="--ui-port")
    for note in (grpc_note, ui_note):
        if note:
            print(f"fs-search dev: {note}", file=sys.stderr, flush=True)
    log.info("starting Temporal dev server and SeaweedFS S3 ...")
    try:
        return await DevServer(
            ui=True, port=grpc, ui_port=ui, dynamic_config=[CALLBACKS_DYNAMIC_CONFIG]
        ).start()
    except RuntimeError as e:
        asked = port is not None or ui_port is not None
        if asked or (port_is_free(grpc) and port_is_free(ui)):
            raise TemporalUnreachable(f"the Temporal dev server did not start: {e}") from e
    # A usual port was taken between the check and the server's start: free ones, then.
    temporal = DevServer(ui=True, dynamic_config=[CALLBACKS_DYNAMIC_CONFIG])
    print(
        f"fs-search dev: ports {grpc}/{ui} were taken while starting; Temporal is on "
        f"{temporal.port} (UI {temporal.ui_port})",
        file=sys.stderr,
        flush=True,
    )
    try:
        return await temporal.start()
    except RuntimeError as e:
        raise TemporalUnreachable(f"the Temporal dev server did not start: {e}") from e


def _env_file_lines(env_file: Path | None) -> str:
    if env_file is None:
        return "(or write them to a file with `fs-search dev --env-file PATH`)"
    return (
        f"(written to {env_file}: `fs-search --env-file {env_file} ...` reads them, as do "
        f"`docker run --env-file` and `set -a; . {env_file}; set +a`)"
    )


def _serving_root(root: str, queues: str, host_id: str) -> str:
    """The banner's lines for a worker serving every workspace under ``root``."""
    polled = {
        "workspace": "fs-search/<name> for each",
        "host": f"the host queue {host_queue_for(host_id)} for all",
        "both": f"fs-search/<name> for each, and the host queue {host_queue_for(host_id)}",
    }[queues]
    return (
        f"  Workspaces:   every directory under {os.path.realpath(root)} named by a valid id\n"
        f"  Queues:       {polled} (host id {host_id})"
    )


def _banner(
    temporal: DevServer,
    s3: SeaweedS3,
    serving: str,
    env: dict[str, str],
    env_file: Path | None,
    try_call: str,
    http: str | None = None,
) -> str:
    exports = "\n".join(f"export {k}={v}" for k, v in env.items())
    nexus = DEV_NEXUS_QUEUE
    probes = f"\n  Worker HTTP:  {http}/livez /readyz /metrics (Prometheus)" if http else ""
    return f"""fs-search dev is running (Ctrl-C stops everything)

  Temporal UI:  {temporal.ui_url}
  Temporal:     {temporal.address} (namespace default)
  S3:           {s3.endpoint_url} (bucket {DEV_BUCKET}, data in {s3.data_dir})
{serving}
  Nexus:        endpoint {DEFAULT_ENDPOINT} -> namespace default, task queue {nexus}{probes}

Environment for callers (fs-search CLI, your workers and clients with FsSearchPlugin):

{exports}

{_env_file_lines(env_file)}

Try:  {_try(temporal, try_call, env_file)}
"""


def _try(temporal: DevServer, call: str, env_file: Path | None) -> str:
    if env_file is None:
        return f"fs-search {call} --address {temporal.address}"
    return f"fs-search --env-file {env_file} {call}"
