# nexus_caller.py
"""An agent workflow in another namespace greps a workspace through the Nexus endpoint.

Run against `fs-search dev` (docs/serving-other-namespaces.md, "Try it"):
TEMPORAL_NAMESPACE=agents python nexus_caller.py WORKSPACE_ID
"""

import asyncio
import os
import sys
import uuid

from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import Worker

from fs_search.workflows import FsSearchPlugin, FsSearchTools


@workflow.defn
class NexusCaller:
    @workflow.run
    async def run(self, workspace_id: str, pattern: str) -> str:
        tools = FsSearchTools(workspace_id, endpoint="fs-search")  # the endpoint, not a queue
        result = await tools.call("grep", {"pattern": pattern})
        return result.text


async def main(workspace_id: str, pattern: str) -> None:
    client = await Client.connect(
        os.environ.get("TEMPORAL_ADDRESS", "localhost:7233"),
        namespace=os.environ["TEMPORAL_NAMESPACE"],  # the callers' namespace, not the workers'
        plugins=[FsSearchPlugin(external_storage=False)],  # no store: pages come via Nexus
    )
    async with Worker(client, task_queue="agents", workflows=[NexusCaller]):
        text = await client.execute_workflow(
            NexusCaller.run,
            args=[workspace_id, pattern],
            id=f"nexus-caller-{uuid.uuid4()}",
            task_queue="agents",
        )
    print(text)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "TODO"))
