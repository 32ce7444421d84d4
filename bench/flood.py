"""The flooding tenant of ``bench/fleet``'s fairness rows, as a process of its own.

Run by the benchmark (``python bench/flood.py --address ... --queue ... --workspace busy``):
its own Temporal client and workflow worker on its own workflow queue, as another tenant's
agents would have, and ``--calls`` agent workflows (``bench.Calls``) each making one grep on
the flooding workspace. With ``--sustained`` each one ended is started again until the process
gets SIGTERM; then it stops starting new ones, waits for those in flight, prints ``flood done``
with counts (and how often a call was handed back, from their histories), and exits 0. Without it the calls are made once and the process exits when they
have ended. Every failed call is printed (``flood failed: ...``).

Hostile tenants are different tenants: each runs its agent workflows on workflow workers of
its own (its own process, usually its own machine), so a flood's workflow tasks cannot queue
ahead of a quiet tenant's in one Python process. What the rows measure is the fs-search host
those tenants share.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from flows import WORKFLOWS, Call, CallsWorkflow, HostileGrepWorkflow, Spec  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from fs_search.activities._contract import WORKSPACE_BUSY  # noqa: E402
from fs_search.workflows import FsSearchPlugin  # noqa: E402

READY = "flood started"
# Ended flood workflows whose histories are read for the hand-back count, at most.
SAMPLE = 512
DONE = "flood done"


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", required=True)
    parser.add_argument("--queue", required=True, help="this tenant's workflow queue")
    parser.add_argument("--spill-url", required=True)
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--host", default=None, help="the host queue serving the workspace")
    parser.add_argument("--pattern", default="match")
    parser.add_argument("--calls", type=int, default=64)
    parser.add_argument("--sustained", action="store_true")
    parser.add_argument(
        "--ignore-pause",
        action="store_true",
        help="a hostile caller: max_attempts 1, every hand-back scheduled again at once",
    )
    args = parser.parse_args()
    client = await Client.connect(args.address, plugins=[FsSearchPlugin(spill_url=args.spill_url)])
    spec = Spec(
        workspace_id=args.workspace,
        calls=[Call(tool="grep", arguments={"pattern": args.pattern})],
        host=args.host,
    )
    stopping = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
    done = failed = 0
    ended: list[str] = []

    async def flooder() -> None:
        nonlocal done, failed
        while True:
            workflow_id = f"flood-{uuid.uuid4()}"
            [result] = await client.execute_workflow(
                HostileGrepWorkflow.run if args.ignore_pause else CallsWorkflow.run,
                spec,
                id=workflow_id,
                task_queue=args.queue,
            )
            ended.append(workflow_id)
            done += 1
            if result.is_error:
                failed += 1
                print(f"flood failed: {result.text[:300]!r}", flush=True)
            if not args.sustained or stopping.is_set():
                return

    async with Worker(client, task_queue=args.queue, workflows=WORKFLOWS):
        calls = [asyncio.create_task(flooder()) for _ in range(args.calls)]
        print(READY, flush=True)
        await asyncio.gather(*calls)
    sample = ended[-SAMPLE:]
    handed: list[int] = []
    for start in range(0, len(sample), 16):
        handed += await asyncio.gather(
            *(handed_back(client, w) for w in sample[start : start + 16])
        )
    print(
        f"{DONE}: {done} calls, {failed} failed, {sum(handed)} hand-backs "
        f"({sum(handed) / max(1, len(handed)):.2f} per call, {len(sample)} read)",
        flush=True,
    )
    return 0


async def handed_back(client: Client, workflow_id: str) -> int:
    """How many times the call of one ended flood workflow was handed back: hand-backs its
    workflow saw, and the server's retries (a real retry after a worker died counts too)."""
    busy = 0
    async for e in client.get_workflow_handle(workflow_id).fetch_history_events():
        if e.HasField("activity_task_failed_event_attributes"):
            failure = e.activity_task_failed_event_attributes.failure
            busy += failure.application_failure_info.type == WORKSPACE_BUSY
        elif e.HasField("activity_task_started_event_attributes"):
            # The server's retries of a call (the attempts before this one) leave no event.
            busy += e.activity_task_started_event_attributes.attempt - 1
    return busy


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
