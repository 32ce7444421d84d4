"""Assemble and run a worker: probe rg, open the spill store, poll the workspace queue."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import signal
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from temporalio.client import Client
from temporalio.worker import Worker

from fs_search.activities import (
    HEARTBEAT_INTERVAL_S,
    FsSearchConfig,
    RgStatus,
    SearchActivities,
    SearchError,
    SearchTelemetry,
    Workspace,
    escaped,
    host_queue_for,
    task_queue_for,
)
from fs_search.activities.results import Offload, default_processes
from fs_search.activities.rg import Executor, default_backstop, for_probe, sandbox_for
from fs_search.activities.storage import Storage, storage_for
from fs_search.worker._binaries import find_binary
from fs_search.worker._host_queue import HostRouter
from fs_search.worker._queue_owner import claim_queue, host_id_from_env, identity_for

log = logging.getLogger(__name__)

# Cancel requests reach an activity through heartbeat responses: the throttle is the
# activity's own beat, so each beat is sent and a cancel reaches rg within ~0.3 s (p95; at
# 0.5 s it was ~0.5 s). Quick searches send none (the first beat waits).
MAX_HEARTBEAT_THROTTLE = timedelta(seconds=HEARTBEAT_INTERVAL_S)
PRUNE_INTERVAL_S = 3600.0
# Under a workspaces root: searches one workspace may run at once, unless configured.
DEFAULT_PER_WORKSPACE = 4
# Under a workspaces root, a workspace queue may hold up to 1/HELD_SHARE of the calls the
# process holds.
HELD_SHARE = 4
# The oldest rg whose ignore-file handling below a repository's root is right (rg 14
# misapplies parent directories' patterns: upstream #2770, #2778, #3144).
MIN_RG_MAJOR = 15


def default_workspace_id(workspace: str | os.PathLike[str]) -> str:
    """A stable id from the host name and the workspace's real path.

    Give ``--workspace-id`` explicitly wherever hosts are rescheduled (Kubernetes).
    """
    real = os.path.realpath(workspace)
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname()) or "host"
    name = re.sub(r"[^A-Za-z0-9._-]", "-", os.path.basename(real)) or "root"
    digest = hashlib.sha256(f"{socket.gethostname()}:{real}".encode()).hexdigest()[:10]
    return f"{host}-{name}-{digest}"


async def probe_rg(executor: Executor, path: str | None) -> RgStatus:
    """Run ``rg --version`` through the executor; a missing or broken rg is not fatal."""
    if path is None:
        return RgStatus(path=None, reason="ripgrep (rg) was not found on this worker")
    try:
        run = await executor.run(for_probe(rg=path), cwd="/", timeout_s=10, max_stdout=64 * 1024)
    except SearchError as e:
        return RgStatus(path=None, reason=f"ripgrep is not available on this worker: {e}")
    if run.returncode != 0:
        # Where rg is and what it said is for the operator: the reason reaches callers.
        log.warning(
            "ripgrep at %s failed its probe (exit %d): %s", path, run.returncode, run.stderr[:200]
        )
        return RgStatus(
            path=None,
            reason=f"ripgrep failed its start-up check on this worker (exit {run.returncode}); "
            "the worker log has details",
        )
    version = run.stdout.decode("utf-8", "replace").splitlines()[0] if run.stdout else "?"
    major = rg_major(version)
    if major is None or major < MIN_RG_MAJOR:
        # rg 14 applies the ignore files of a search root's parents wrongly: its answers
        # below a repository's root would be wrong, so it is not used.
        log.warning(
            "%s at %s is too old: fs-search needs ripgrep %d or later", version, path, MIN_RG_MAJOR
        )
        return RgStatus(
            path=None,
            version=version,
            reason=f"the ripgrep on this worker is too old: fs-search needs ripgrep "
            f"{MIN_RG_MAJOR} or later; the worker log has details",
        )
    return RgStatus(path=path, version=version)


def rg_major(version: str) -> int | None:
    """The major version in ``rg --version``'s first line (``ripgrep 15.2.0 (rev ...)``)."""
    found = re.match(r"ripgrep (\d+)\.", version)
    return int(found.group(1)) if found else None


@dataclass(frozen=True)
class Capacity:
    """How many searches a worker process runs and how many calls it holds, and one
    workspace's share of each (:func:`capacity_plan`).

    Attributes:
        workspaces_root: the plan of a worker serving a workspaces root (else one workspace).
        running: rg searches at once, all workspaces together (the executor's running slots).
        running_per_workspace: rg searches one workspace may run at once.
        held: calls taken from Temporal at once, running or waiting for a running slot.
        held_per_workspace: calls one workspace queue may hold (the held slots).
        host_share: glob and grep calls one workspace may hold of its host's queue.
    """

    workspaces_root: bool
    running: int
    running_per_workspace: int
    held: int
    held_per_workspace: int
    host_share: int


def capacity_plan(config: FsSearchConfig, *, workspaces_root: bool = False) -> Capacity:
    """Pure: the capacity the settings give a worker process.

    One workspace has the process to itself. Under a workspaces root, a workspace runs at
    most ``max_concurrent_per_workspace`` searches (default :data:`DEFAULT_PER_WORKSPACE`),
    its queue holds at most that many calls or 1/:data:`HELD_SHARE` of the process's, so one
    flooding queue leaves room for the others, and of a host queue's calls it holds as many
    as its own queue may (never more than the process holds). A call waiting behind its
    workspace's running searches in the process keeps the host's cores busy with that one
    workspace's next search the moment one ends; a flood on a host queue then took both
    cores of a small host, and every other workspace's call slowed with them (bench/fleet's
    host-queue row 9–13 with two waiting behind two running, 3–5 with none, as on a
    workspace queue)."""
    running = config.max_concurrent_searches
    held = config.accepted_searches
    if not workspaces_root:
        return Capacity(False, running, running, held, held, held)
    per_workspace = config.max_concurrent_per_workspace or DEFAULT_PER_WORKSPACE
    held_per_workspace = max(per_workspace, held // HELD_SHARE)
    return Capacity(
        True,
        running,
        per_workspace,
        held,
        held_per_workspace,
        host_share=min(held, held_per_workspace),
    )


@dataclass
class Services:
    """What every workspace of a worker process shares: settings, rg, storage, helpers, and
    the capacity plan its executor was sized by."""

    config: FsSearchConfig
    executor: Executor
    storage: Storage
    rg: RgStatus
    offload: Offload
    telemetry: SearchTelemetry
    capacity: Capacity

    def activities_for(
        self,
        workspace: str | os.PathLike[str] | Workspace,
        workspace_id: str | None = None,
        *,
        nice_step: int = 0,
        host_id: str | None = None,
    ) -> SearchActivities:
        """The four activities over one workspace (a directory, or a Workspace already
        opened), sharing everything else.

        ``nice_step``: how much nicer rg runs for each further call of the workspace in
        flight (a workspaces root uses ``search.NICE_STEP``; 0: never changed). ``host_id``:
        the host results name (default ``FS_SEARCH_HOST_ID`` or the host name)."""
        return SearchActivities(
            self.config,
            workspace if isinstance(workspace, Workspace) else Workspace(workspace),
            executor=self.executor,
            storage=self.storage,
            rg=self.rg,
            telemetry=self.telemetry.for_workspace(workspace_id),
            offload=self.offload,
            nice_step=nice_step,
            host_id=host_id or host_id_from_env(),
        )


async def build_services(
    config: FsSearchConfig,
    *,
    executor: Executor | None = None,
    storage: Storage | None = None,
    telemetry: SearchTelemetry | None = None,
    workspaces_root: bool = False,
) -> Services:
    """Probe rg and open the storage, once per process; the executor's running slots sized
    by the capacity plan (``workspaces_root``: for a worker serving a workspaces root)."""
    capacity = capacity_plan(config, workspaces_root=workspaces_root)
    if workspaces_root and capacity.running_per_workspace >= capacity.running > 1:
        log.warning(
            "max_concurrent_per_workspace (%d) is not below max_concurrent_searches (%d): "
            "one busy workspace can run every search",
            capacity.running_per_workspace,
            capacity.running,
        )
    rg_path = config.rg_path or find_binary("rg")
    executor = executor or Executor(
        backstop=default_backstop(),
        sandbox=sandbox_for(config.sandbox, config.rg_memory_mb, program=rg_path),
        max_running=capacity.running,
        max_running_per_key=capacity.running_per_workspace,
    )
    rg = await probe_rg(executor, rg_path)
    if rg.path is None:
        log.warning("%s; glob and grep will fail with SEARCH_FAILED", rg.reason)
    return Services(
        config,
        executor,
        storage or storage_for(config),
        rg,
        Offload(
            default_processes() if config.parse_processes is None else config.parse_processes,
            shared=workspaces_root,
        ),
        telemetry or SearchTelemetry(trace_patterns=config.trace_patterns),
        capacity,
    )


async def build_activities(
    config: FsSearchConfig,
    workspace: str | os.PathLike[str],
    *,
    workspace_id: str | None = None,
    executor: Executor | None = None,
    storage: Storage | None = None,
    telemetry: SearchTelemetry | None = None,
) -> SearchActivities:
    """The activities for one workspace, with rg probed and the storage opened."""
    services = await build_services(config, executor=executor, storage=storage, telemetry=telemetry)
    if workspace_id is None and telemetry is None:
        workspace_id = default_workspace_id(workspace)
    return services.activities_for(workspace, workspace_id)


def worker_identity(host_id: str | None = None) -> str:
    """The Temporal identity of this process's workers: pid, host name and host id
    (``FS_SEARCH_HOST_ID`` unless given; shown only when it is not the host name)."""
    return identity_for(host_id or host_id_from_env())


def temporal_worker(
    client: Client,
    *,
    task_queue: str,
    activities: Sequence[Callable[..., Any]],
    graceful_shutdown: timedelta = timedelta(0),
    identity: str | None = None,
    **worker_options: Any,
) -> Worker:
    """The one Temporal ``Worker`` factory of fs-search, for a single workspace and a fleet's
    queues alike: the activities on ``task_queue``, heartbeats throttled to
    ``MAX_HEARTBEAT_THROTTLE`` (a cancel reaches rg quickly), this process's identity
    (:func:`worker_identity`) unless given; ``worker_options`` are the caller's own (slots,
    tuner, pollers)."""
    return Worker(
        client,
        task_queue=task_queue,
        activities=activities,
        max_heartbeat_throttle_interval=MAX_HEARTBEAT_THROTTLE,
        default_heartbeat_throttle_interval=MAX_HEARTBEAT_THROTTLE,
        graceful_shutdown_timeout=graceful_shutdown,
        identity=identity or worker_identity(),
        **worker_options,
    )


def new_worker(
    client: Client,
    activities: SearchActivities,
    *,
    workspace_id: str,
    task_queue: str | None = None,
    host: str | None = None,
    graceful_shutdown: timedelta = timedelta(0),
    **worker_options: Any,
) -> Worker:
    """A Worker polling the workspace's queue with all four activities registered.

    ``host``: poll the host queue ``fs-search-host/<host>`` instead, serving this one
    workspace to requests that name it."""
    registered = activities.all()
    own = activities.telemetry.workspace_id
    if host is not None and own is not None and own != workspace_id:
        raise ValueError(
            f"the activities serve workspace {own!r}, not {workspace_id!r}: build them with "
            "that workspace_id to serve it on a host queue"
        )
    if host is not None:
        task_queue = task_queue or host_queue_for(host)
        registered = HostRouter(
            host, lambda named: activities if named == workspace_id else None
        ).all()
    return temporal_worker(
        client,
        task_queue=task_queue or task_queue_for(workspace_id),
        activities=registered,  # type: ignore[arg-type]
        graceful_shutdown=graceful_shutdown,
        identity=worker_options.pop("identity", None),
        # Many more than run: the rest wait in the executor's running slots, heartbeating.
        max_concurrent_activities=activities.config.accepted_searches,
        **worker_options,
    )


class Maintained(Protocol):
    """What :func:`maintenance` looks after (the spill store, rg's groups, the digest helpers):
    Services, or one workspace's SearchActivities."""

    executor: Executor
    storage: Storage
    offload: Offload


@contextlib.asynccontextmanager
async def maintenance(activities: Maintained) -> AsyncIterator[None]:
    """Background upkeep while a worker runs: check and prune the spill store; at the end,
    kill what is left of rg, stop the helpers, close the storage."""
    store = activities.storage.spill_store

    async def upkeep() -> None:
        try:
            await store.check()
        except Exception as e:  # noqa: BLE001 - a store outage must not stop the worker
            log.warning(
                "spill store %s is not usable right now (%s); over-cap results will carry "
                "spill_error until it recovers",
                store.describe(),
                e,
            )
        while True:
            try:
                removed = await store.prune()
                if removed:
                    log.info("pruned %d expired spill artifacts", removed)
            except Exception as e:  # noqa: BLE001
                log.warning("pruning the spill store failed: %s", e)
            await asyncio.sleep(PRUNE_INTERVAL_S)

    task = asyncio.create_task(upkeep())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        # Whatever the worker's shutdown left running dies now.
        await activities.executor.kill_all()
        activities.offload.shutdown()
        await activities.storage.close()


def stop_on_signals() -> asyncio.Event:
    """An event set by SIGINT or SIGTERM (in the running loop)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


async def run_until_signalled(
    client: Client,
    activities: SearchActivities,
    *,
    workspace_id: str,
    workflows: Sequence[type] = (),
    on_ready: Callable[[], None] | None = None,
    host_id: str | None = None,
    stop: asyncio.Event | None = None,
    drain: timedelta = timedelta(0),
) -> None:
    """Poll the workspace queue until SIGINT/SIGTERM (or ``stop`` is set), then shut down:
    running calls have ``drain`` to finish, what is left is cancelled (rg groups killed).

    ``host_id``: this host (default ``FS_SEARCH_HOST_ID`` or the host name).

    Raises:
        QueueTaken: a live worker of another host polls the queue (unless the settings'
            ``allow_shared_queue``); logged naming both, and nothing was polled.
    """
    stop = stop or stop_on_signals()
    queue = task_queue_for(workspace_id)
    host_id = host_id or host_id_from_env()
    identity = identity_for(host_id)
    worker = new_worker(
        client,
        activities,
        workspace_id=workspace_id,
        workflows=list(workflows),
        identity=identity,
        graceful_shutdown=drain,
    )
    async with maintenance(activities):
        await claim_queue(
            client,
            queue,
            host_id=host_id,
            identity=identity,
            allow_shared=activities.config.allow_shared_queue,
        )
        async with worker:
            # A long-running worker starts its digest helpers now rather than on a first search.
            warming = asyncio.create_task(activities.offload.warm())
            log.info(
                "fs-search worker for workspace %s (id %s) polling task queue %s on %s, "
                "namespace %s (identity %s)",
                escaped(activities.workspace.root),
                workspace_id,
                queue,
                client.service_client.config.target_host,
                client.namespace,
                identity,
            )
            log.info(
                "ripgrep: %s; sandbox: %s; storage: %s",
                activities.rg.version or activities.rg.reason,
                activities.sandbox_description(),
                activities.storage.describe(),
            )
            if on_ready:
                on_ready()
            await stop.wait()
            warming.cancel()
            if drain > timedelta(0):
                log.info("stopped polling; running searches have %s to finish", drain)
            else:
                log.info("shutting down: cancelling running searches")
    log.info("worker stopped")
