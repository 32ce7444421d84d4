"""The Temporal side of the benchmark: a dev server, the project's worker, workflow runs.

One dev server (``worker.services.DevServer``) and one client with ``FsSearchPlugin`` serve
every row. The project's activity worker runs in-process (``build_activities`` +
``new_worker`` + ``maintenance``, exactly as the embedded CLI assembles it) with one extra
activity, ``bench.noop``, so the no-op reference shares the worker and its options. The
benchmark's workflows run on their own queue in the same process. The memory row starts
the worker as a child process instead (``fs-search worker``), see :func:`child_worker`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from flows import NOOP_ACTIVITY, PLAIN_RG_ACTIVITY, WORKFLOWS, PlainRg, Spec
from temporalio import activity
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker

from fs_search.activities._config import FsSearchConfig
from fs_search.activities._contract import GrepRequest, GrepResult
from fs_search.activities._search import SearchActivities
from fs_search.worker import build_activities, maintenance, new_worker
from fs_search.worker._devstack import DevServer
from fs_search.worker._service_handler import CALLBACKS_DYNAMIC_CONFIG
from fs_search.workflows import FsSearchPlugin

WORKFLOW_TIMEOUT = timedelta(minutes=5)
# Where the Nexus row's caller workflows run (service_rows.py).
CALLER_NAMESPACE = "bench-agents"


class BenchActivities(SearchActivities):
    """The project's four activities plus ``bench.noop``, registered on the same worker."""

    def all(self) -> list[object]:
        """Every activity: the project's and the no-op reference."""
        return [*super().all(), self.noop]

    @activity.defn(name=NOOP_ACTIVITY)
    async def noop(self, req: GrepRequest) -> GrepResult:
        """A trivial activity with grep's request and result types."""
        return GrepResult(matches=[], total=0, files=0, truncated=False, text="No matches found")

    @classmethod
    def around(cls, built: SearchActivities) -> BenchActivities:
        """The same activities (config, workspace, executor, store, rg, telemetry, offload)
        plus noop."""
        return cls(
            built.config,
            built.workspace,
            executor=built.executor,
            storage=built.storage,
            rg=built.rg,
            telemetry=built.telemetry,
            offload=built.offload,
        )


@activity.defn(name=PLAIN_RG_ACTIVITY)
async def plain_rg(req: PlainRg) -> str:
    """The plain reference activity: rg through ``asyncio.create_subprocess_exec``, stdout
    returned as text (no sandbox, no backstop, no parsing)."""
    proc = await asyncio.create_subprocess_exec(
        *req.argv,
        cwd=req.cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    out, _ = await proc.communicate()
    return out.decode("utf-8", "replace")


@dataclass
class Env:
    """A running dev server, client and in-process worker."""

    server: DevServer
    client: Client
    activities: BenchActivities
    workspace: Path
    workspace_id: str
    workflow_queue: str
    plain_queue: str
    spill_url: str
    tmp: Path
    # A second in-process worker on the same directory with over-cap globs kept as the
    # mtime head (sampling off), for the rows that compare both.
    head_workspace_id: str = ""

    async def execute(self, workflow: Any, spec: Any) -> Any:
        """Run ``workflow`` with ``spec`` to completion; its result."""
        return await (await self.start(workflow, spec)).result()

    async def start(self, workflow: Any, spec: Any) -> WorkflowHandle[Any, Any]:
        """Start ``workflow`` with ``spec``; its handle."""
        return await self.client.start_workflow(
            workflow.run,
            spec,
            id=f"bench-{uuid.uuid4().hex[:12]}",
            task_queue=self.workflow_queue,
            execution_timeout=WORKFLOW_TIMEOUT,
        )

    async def timed_activity(self, workflow: Any, spec: Any) -> tuple[float, float, Any]:
        """End-to-end seconds, the seconds of its one activity (the server's
        ``ActivityTaskStarted`` -> ``ActivityTaskCompleted`` event times, which leave out
        Temporal's round trips), and the results. A full GC runs first, outside the timing."""
        gc.collect()
        started = time.perf_counter()
        handle = await self.start(workflow, spec)
        results = await handle.result()
        seconds = time.perf_counter() - started
        [activity_s] = await activity_seconds(handle)
        return seconds, activity_s, results

    async def timed(self, workflow: Any, spec: Any) -> tuple[float, Any]:
        """Seconds from ``execute_workflow`` to its result (end to end), and the results.

        A garbage collection runs first, outside the timing, so one sample's garbage is
        not collected during the next.
        """
        gc.collect()
        started = time.perf_counter()
        results = await self.execute(workflow, spec)
        return time.perf_counter() - started, results

    def spec(self, *calls: Any, concurrent: bool = False, workspace_id: str | None = None) -> Spec:
        """A Spec on this env's workspace (or ``workspace_id``)."""
        return Spec(
            workspace_id=workspace_id or self.workspace_id, calls=list(calls), concurrent=concurrent
        )


async def activity_seconds(handle: WorkflowHandle[Any, Any]) -> list[float]:
    """Each completed activity's run in the workflow's history: its ``ActivityTaskStarted``
    to its ``ActivityTaskCompleted`` (server clock)."""
    started: dict[int, Any] = {}
    took: list[float] = []
    async for event in handle.fetch_history_events():
        if event.HasField("activity_task_started_event_attributes"):
            attrs = event.activity_task_started_event_attributes
            started[attrs.scheduled_event_id] = event.event_time.ToDatetime()
        elif event.HasField("activity_task_completed_event_attributes"):
            attrs = event.activity_task_completed_event_attributes
            since = started[attrs.scheduled_event_id]
            took.append((event.event_time.ToDatetime() - since).total_seconds())
    return took


def worker_config(spill_url: str, **overrides: Any) -> FsSearchConfig:
    """The worker's settings: defaults, sampled over-cap globs, the benchmark's spill dir."""
    values: dict[str, Any] = {"sample_over_cap_glob_results": True, "spill_url": spill_url}
    values.update(overrides)
    return FsSearchConfig.load(overrides=values)  # FS_SEARCH_* from the environment apply


@contextlib.asynccontextmanager
async def open_env(workspace: Path, tmp: Path) -> AsyncIterator[Env]:
    """Start the dev server, connect, run the in-process worker; stop everything after."""
    spill_url = f"file://{tmp / 'spill'}"
    # Callbacks on and a second namespace: the Nexus row calls the worker from there.
    server = DevServer(
        log_path=tmp / "temporal.log",
        dynamic_config=[CALLBACKS_DYNAMIC_CONFIG],
        namespaces=[CALLER_NAMESPACE],
    )
    await server.start()
    try:
        client = await Client.connect(
            server.address,
            namespace="default",
            plugins=[FsSearchPlugin(spill_url=spill_url, getenv=lambda _: None)],
        )
        workspace_id = f"bench-{uuid.uuid4().hex[:8]}"
        built = await build_activities(
            worker_config(spill_url), workspace, workspace_id=workspace_id
        )
        activities = BenchActivities.around(built)
        head_id = f"bench-head-{uuid.uuid4().hex[:8]}"
        head = await build_activities(
            worker_config(spill_url, sample_over_cap_glob_results=False),
            workspace,
            workspace_id=head_id,
        )
        queue = f"bench-workflows-{uuid.uuid4().hex[:8]}"
        plain_queue = f"bench-plain-{uuid.uuid4().hex[:8]}"
        async with (
            maintenance(activities),
            maintenance(head),
            new_worker(client, activities, workspace_id=workspace_id),
            new_worker(client, head, workspace_id=head_id),
            Worker(client, task_queue=queue, workflows=WORKFLOWS),
            Worker(client, task_queue=plain_queue, activities=[plain_rg]),
        ):
            yield Env(
                server=server,
                client=client,
                activities=activities,
                workspace=workspace,
                workspace_id=workspace_id,
                workflow_queue=queue,
                plain_queue=plain_queue,
                spill_url=spill_url,
                tmp=tmp,
                head_workspace_id=head_id,
            )
    finally:
        server.stop()


@dataclass
class ChildWorker:
    """A worker process (``fs-search worker``) polling ``fs-search/<workspace_id>``."""

    pid: int
    workspace_id: str
    log_path: Path


@contextlib.asynccontextmanager
async def child_worker(
    env: Env,
    *,
    workspace: Path | None = None,
    settings: Mapping[str, str] | None = None,
    ready_timeout: float = 60.0,
    sample: bool = True,
) -> AsyncIterator[ChildWorker]:
    """Run the project's ``fs-search worker`` command on the env's server and workspace
    (or ``workspace``).

    Same settings as the in-process worker (spill store via ``FS_SEARCH_SPILL_URL``,
    sampled globs unless ``sample`` is False, defaults otherwise) plus ``settings`` (``FS_SEARCH_*`` variables);
    nothing else from this environment configures it. Stopped by pid (SIGTERM, then SIGKILL).
    """
    workspace_id = f"bench-child-{uuid.uuid4().hex[:8]}"
    log_path = env.tmp / f"worker-{workspace_id}.log"
    argv = [
        sys.executable,
        "-c",
        "from fs_search.worker.cli import run; run()",
        "worker",
        "--workspace",
        str(workspace or env.workspace),
        "--workspace-id",
        workspace_id,
        "--address",
        env.server.address,
        "--namespace",
        "default",
        "--sample-over-cap-glob-results" if sample else "--no-sample-over-cap-glob-results",
    ]
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FS_SEARCH_", "OTEL_", "TEMPORAL_"))
    }
    environ["FS_SEARCH_SPILL_URL"] = env.spill_url
    environ.update(settings or {})
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=environ,
            start_new_session=True,
        )
    try:
        await _wait_ready(proc, log_path, ready_timeout)
        yield ChildWorker(pid=proc.pid, workspace_id=workspace_id, log_path=log_path)
    finally:
        _stop(proc)


async def _wait_ready(proc: subprocess.Popen[bytes], log_path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the worker exited with {proc.returncode}: {_tail(log_path)}")
        if b"polling task queue" in log_path.read_bytes():
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"the worker did not start within {timeout:.0f} s: {_tail(log_path)}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""
