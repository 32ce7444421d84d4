"""Large `spill: false` results cross Temporal through external storage, never PayloadsTooLarge."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.client import Client
from temporalio.worker import Worker

from fs_search.workflows import FsSearchPlugin
from tests.helpers import big_tree
from tests.procs import WorkerProcess
from tests.worker.cli.test_main import cli
from tests.workflows_under_test import Calls, CallsWorkflow, Options

FILES, MATCHES = 200_000, 100_000


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def big(tmp_path_factory) -> Path:
    """A workspace with 200,000 files and a file with 100,000 matching lines."""
    return big_tree(tmp_path_factory.mktemp("big") / "ws", files=FILES, matches=MATCHES)


async def test_s3_external_storage_between_processes(dev_env, s3, big):
    """A worker process and a caller client on S3: 200k paths and 100k matches come through."""
    address = dev_env.client.service_client.config.target_host
    prefix = f"spill-{uuid.uuid4().hex[:8]}"
    wsid = f"big-{uuid.uuid4()}"
    worker = WorkerProcess(
        big, address, wsid, env=s3.env(prefix), args=("--no-sample-over-cap-glob-results",)
    )
    try:
        before = set(await s3.keys("v0/"))
        caller = await Client.connect(
            address,
            plugins=[
                FsSearchPlugin(
                    spill_url=s3.url(prefix), s3_endpoint_url=s3.endpoint_url, getenv=lambda _: None
                )
            ],
        )
        queue = f"caller-{uuid.uuid4()}"
        # debug_mode: no deadlock detector. Decoding 200,000 paths and 100,000 matches in
        # one workflow task took over its 2 s on a loaded machine, and the task was retried
        # until the test's timeout; what is tested here is the payloads' way through S3.
        async with Worker(caller, task_queue=queue, workflows=[CallsWorkflow], debug_mode=True):
            glob, grep = await caller.execute_workflow(
                CallsWorkflow.run,
                Calls(
                    options=Options(workspace_id=wsid, spill=False, timeout_ms=60_000),
                    calls=[
                        ("glob", {"pattern": "*.f"}),
                        ("grep", {"pattern": "^match", "path": "big.txt"}),
                    ],
                ),
                id=f"big-{uuid.uuid4()}",
                task_queue=queue,
            )
        assert not glob.is_error, glob.text
        assert glob.result.total == FILES and len(glob.result.paths) == FILES
        assert len(set(glob.result.paths)) == FILES and glob.result.spill is None
        assert not grep.is_error, grep.text
        assert grep.result.total == MATCHES and len(grep.result.matches) == MATCHES
        assert grep.result.matches[-1].line == f"match {MATCHES - 1}"
        assert set(await s3.keys("v0/")) - before, "no payload went through S3"
    finally:
        worker.terminate()


def test_embedded_cli_local_directory_storage(big, tmp_path):
    """The embedded CLI returns 200k paths with --no-spill through the local-directory driver."""
    p = cli(
        "glob",
        "*.f",
        "--no-spill",
        "--json",
        "--workspace",
        str(big),
        env={"FS_SEARCH_SPILL_URL": f"file://{tmp_path}/spill"},
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout)
    assert out["result"]["total"] == FILES and len(out["result"]["paths"]) == FILES
    assert list((tmp_path / "spill" / "payloads").glob("*.payload")), (
        "no payload went to the directory"
    )


@pytest.mark.parametrize("spill", [True, False])
async def test_in_process_worker_large_grep(dev_env, make_activities, big, spill):
    """In-process (file:// store): 100k matches inline-paged with spill, whole without."""
    from fs_search.worker import new_worker

    acts = await make_activities(big)
    wsid, queue = f"big-{uuid.uuid4()}", f"wf-{uuid.uuid4()}"
    async with (
        new_worker(dev_env.client, acts, workspace_id=wsid),
        # debug_mode: 100,000 matches decoded in one workflow task (see the test above).
        Worker(dev_env.client, task_queue=queue, workflows=[CallsWorkflow], debug_mode=True),
    ):
        [grep] = await dev_env.client.execute_workflow(
            CallsWorkflow.run,
            Calls(
                options=Options(workspace_id=wsid, spill=spill, timeout_ms=60_000),
                calls=[("grep", {"pattern": "^match", "path": "big.txt"})],
            ),
            id=f"wf-{uuid.uuid4()}",
            task_queue=queue,
        )
    assert grep.result.total == MATCHES
    assert len(grep.result.matches) == (250 if spill else MATCHES)
    assert (grep.result.spill is not None) is spill
