"""``fs-search dev``: the whole local stack in one command (Temporal + UI, S3, a worker)."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import aioboto3

from fs_search.activities.config import FsSearchConfig
from fs_search.activities.models import task_queue_for
from fs_search.activities.storage.s3_client import client_kwargs
from fs_search.worker.app import build_activities, default_workspace_id, run_until_signalled
from fs_search.worker.connect import connect
from fs_search.worker.services import DevServer, SeaweedS3
from fs_search.worker.telemetry import telemetry_from_env
from fs_search.workflows.plugin import FsSearchPlugin

log = logging.getLogger(__name__)

DEV_BUCKET = "fs-search"
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
) -> int:
    """Start Temporal (with UI), SeaweedFS S3 and a worker; print what a caller needs; run
    until Ctrl-C / SIGTERM, then stop everything."""
    workspace_id = workspace_id or default_workspace_id(workspace)
    temporal = DevServer(ui=True)
    s3 = SeaweedS3(data_dir)
    try:
        log.info("starting Temporal dev server and SeaweedFS S3 ...")
        await temporal.start()
        await s3.start()
        os.environ.update(DEV_AWS)
        session = aioboto3.Session()
        async with session.client("s3", **client_kwargs(s3.endpoint_url)) as client:
            await client.create_bucket(Bucket=DEV_BUCKET)
        spill_url = f"s3://{DEV_BUCKET}/spill"
        config = FsSearchConfig.load(
            overrides={
                "sample_over_cap_glob_results": sample,
                "spill_url": spill_url,
                "s3_endpoint_url": s3.endpoint_url,
            }
        )
        telemetry = telemetry_from_env()
        async with telemetry.running():
            activities = await build_activities(config, workspace, workspace_id=workspace_id)
            temporal_client = await connect(
                address=temporal.address,
                namespace="default",
                plugins=[FsSearchPlugin(external_storage=activities.storage)],
                runtime=telemetry.runtime,
            )
            env = {
                "TEMPORAL_ADDRESS": temporal.address,
                "TEMPORAL_NAMESPACE": "default",
                "FS_SEARCH_SPILL_URL": spill_url,
                "FS_SEARCH_S3_ENDPOINT_URL": s3.endpoint_url,
                **DEV_AWS,
            }

            def ready() -> None:
                print(
                    _banner(temporal, s3, activities.workspace.root, workspace_id, env), flush=True
                )

            await run_until_signalled(
                temporal_client, activities, workspace_id=workspace_id, on_ready=ready
            )
    finally:
        s3.close()
        temporal.stop()
        print("fs-search dev: stopped Temporal, S3 and the worker", file=sys.stderr, flush=True)
    return 0


def _banner(
    temporal: DevServer, s3: SeaweedS3, workspace: str, workspace_id: str, env: dict[str, str]
) -> str:
    exports = "\n".join(f"export {k}={v}" for k, v in env.items())
    return f"""fs-search dev is running (Ctrl-C stops everything)

  Temporal UI:  {temporal.ui_url}
  Temporal:     {temporal.address} (namespace default)
  S3:           {s3.endpoint_url} (bucket {DEV_BUCKET}, data in {s3.data_dir})
  Workspace:    {workspace}
  Workspace id: {workspace_id} (task queue {task_queue_for(workspace_id)})

Environment for callers (fs-search CLI, your workers and clients with FsSearchPlugin):

{exports}

Try:  fs-search grep TODO --address {temporal.address} --workspace-id {workspace_id}
"""
