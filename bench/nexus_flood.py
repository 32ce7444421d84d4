"""A hostile caller namespace flooding the fs_search endpoint, as a process of its own.

Run by ``bench/fleet``'s Nexus row and tests/workflows/test_service_fairness.py:
``python bench/nexus_flood.py --address ... --namespace agents --endpoint NAME``. Its own
client and workflow worker (``bench.NexusFlood``) keep ``--operations`` operations open on
the endpoint (in workflows of 30, the server's limit per workflow), each on a made-up
workspace and asking the handler to check its queue first; each workflow that ends is
started again, until SIGTERM. Then it prints ``nexus flood done: <n> operations`` and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from flows import NEXUS_PER_WORKFLOW, NexusFlood, NexusFloodWorkflow  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from fs_search.workflows import FsSearchPlugin  # noqa: E402

READY = "nexus flood started"
DONE = "nexus flood done"


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", required=True)
    parser.add_argument("--namespace", required=True, help="the flooding caller's namespace")
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--operations", type=int, default=600)
    parser.add_argument("--schedule-to-start-ms", type=int, default=2_000)
    args = parser.parse_args()
    client = await Client.connect(
        args.address,
        namespace=args.namespace,
        plugins=[FsSearchPlugin(external_storage=False, getenv=lambda _: None)],
    )
    stopping = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
    queue = f"nexus-flood-{uuid.uuid4().hex[:6]}"
    ended = 0

    async def flooder(w: int) -> None:
        nonlocal ended
        while not stopping.is_set():
            flood = NexusFlood(
                endpoint=args.endpoint,
                prefix=f"made-up-{uuid.uuid4().hex[:8]}-{w}",
                schedule_to_start_ms=args.schedule_to_start_ms,
            )
            ended += await client.execute_workflow(
                NexusFloodWorkflow.run, flood, id=f"{queue}-{w}-{uuid.uuid4()}", task_queue=queue
            )

    async with Worker(client, task_queue=queue, workflows=[NexusFloodWorkflow]):
        tasks = [
            asyncio.create_task(flooder(w))
            for w in range(max(1, args.operations // NEXUS_PER_WORKFLOW))
        ]
        print(READY, flush=True)
        await stopping.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    print(f"{DONE}: {ended} operations", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
