"""The process cap holds however many queues poll (docs/workers.md): never more rg groups at once than
``FS_SEARCH_MAX_CONCURRENT_SEARCHES``; a task delivered beyond it waits in the worker."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from temporalio.worker import Worker

from fs_search.activities._config import FsSearchConfig
from fs_search.activities.storage import local_storage
from fs_search.worker import build_services
from fs_search.worker._fleet import Fleet
from tests.workflows_under_test import MixedCalls, MixedCallsWorkflow

WORKSPACES = 10
CAP = 2


async def test_ten_queues_at_once_never_run_more_rg_groups_than_the_cap(dev_env, tmp_path: Path):
    """10 workspaces, a 256 MB scan each, all fired at once against a cap of 2: the peak of live
    rg groups (sampled every 10 ms) is exactly 2, and every call still succeeds."""
    root = tmp_path / "root"
    ids = [f"cap-{uuid.uuid4().hex[:6]}-{i}" for i in range(WORKSPACES)]
    for wid in ids:
        (root / wid).mkdir(parents=True)
        with open(root / wid / "big.bin", "wb") as f:
            f.truncate(256 * 1024**2)  # sparse: no disk, ~0.7 s for rg to scan
    config = FsSearchConfig.load(
        getenv=lambda _: None,
        overrides={
            "sample_over_cap_glob_results": False,
            "max_concurrent_searches": CAP,
            "max_concurrent_per_workspace": 1,
        },
    )
    services = await build_services(
        config, storage=local_storage(tmp_path / "spill"), workspaces_root=True
    )
    fleet = Fleet(dev_env.client, services, root, scan_interval=0.2)
    stop = asyncio.Event()
    running = asyncio.create_task(fleet.run(stop))
    queue = f"wf-{uuid.uuid4()}"
    peak = 0
    try:
        async with Worker(dev_env.client, task_queue=queue, workflows=[MixedCallsWorkflow]):
            while len(fleet.attached) < WORKSPACES:
                await asyncio.sleep(0.05)
            calls = [
                asyncio.create_task(
                    dev_env.client.execute_workflow(
                        MixedCallsWorkflow.run,
                        MixedCalls(
                            calls=[(wid, "grep", {"pattern": "x", "path": "big.bin"})],
                            timeout_ms=120_000,
                        ),
                        id=f"wf-{uuid.uuid4()}",
                        task_queue=queue,
                    )
                )
                for wid in ids
            ]
            while not all(c.done() for c in calls):
                peak = max(peak, len(services.executor.live_process_groups))
                await asyncio.sleep(0.01)
            results = [r for c in calls for r in c.result()]
    finally:
        stop.set()
        await asyncio.wait_for(running, 60)
        await services.executor.kill_all()
        services.offload.shutdown()
    assert [r.text for r in results if r.is_error] == []
    assert all(r.result.total == 0 for r in results)
    assert peak == CAP, peak
