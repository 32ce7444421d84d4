"""One worker process for every workspace under a root directory (docs/workers.md).

Each direct subdirectory whose name is a valid workspace id gets its own ``Worker`` on
``fs-search/<id>``; all of them share one rg executor, one set of digest helpers, one
storage and one :class:`~fs_search.worker._held_slots.HeldSlots` activity slot supplier. A scan
every ``scan_interval`` seconds attaches new directories and detaches vanished ones, and
re-attaches one whose name now leads to another directory. The root is held open: the scan
resolves each entry beneath it and records which directory it is, attaching opens the entry
beneath it again and refuses anything else (a name exchanged meanwhile), and every call runs
only while the entry still leads to that vetted directory.

A queue has one host: before attaching, the fleet asks Temporal who polls the queue
(:mod:`fs_search.worker._queue_owner`, rate-limited process-wide) and refuses a queue a live
worker of another host polls, unless ``allow_shared_queue``; a refused workspace is checked
again on a later scan (after the other host's poller could have gone, backing off up to
``RETRY_MAX_S``), so it attaches once the other host stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import resource
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation
from temporalio.client import Client
from temporalio.worker import (
    FixedSizeSlotSupplier,
    PollerBehaviorAutoscaling,
    PollerBehaviorSimpleMaximum,
    Worker,
    WorkerTuner,
)

from fs_search.activities.budget import drain_for
from fs_search.activities.contract import ID_SYNTAX, host_queue_for, task_queue_for
from fs_search.activities.held_root import HeldRoot, Missing, Outside, Unresolvable
from fs_search.activities.identity import Identity
from fs_search.activities.search import NICE_STEP, SearchActivities
from fs_search.activities.shown import escaped
from fs_search.activities.telemetry import INSTRUMENTATION
from fs_search.activities.workspace import Changed, Workspace
from fs_search.worker._app import (
    Services,
    maintenance,
    stop_on_signals,
    temporal_worker,
)
from fs_search.worker._held_slots import HeldSlots
from fs_search.worker._host_queue import HostRouter
from fs_search.worker._queue_owner import (
    ALLOW_SHARED_ENV,
    QueueCheck,
    QueueOwners,
    claim_queue,
    host_id_from_env,
    identity_for,
)

log = logging.getLogger(__name__)

WORKSPACE_ID = re.compile(ID_SYNTAX)
DEFAULT_SCAN_INTERVAL_S = 2.0
# A refused workspace is checked again after max(when the other host's poller would stop
# looking live, RETRY_MIN_S doubling per refusal), at most RETRY_MAX_S later.
RETRY_MIN_S = 10.0
RETRY_MAX_S = 300.0

QueueMode = Literal["workspace", "host", "both"]
QUEUE_MODES: tuple[QueueMode, ...] = ("workspace", "host", "both")


@dataclass(frozen=True)
class Scan:
    """One look at the root: workspace id -> real path and ``(st_dev, st_ino)`` of the
    directory it names, and names skipped with why."""

    found: dict[str, str] = field(default_factory=dict)
    identities: dict[str, Identity] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def scan_root(root: str | HeldRoot) -> Scan:
    """The workspaces under ``root``: direct subdirectories named by a valid id.

    Dot-directories and non-directories are ignored. Each name is resolved beneath the
    root's held descriptor (``root`` given as a path is opened for the scan): a symlinked
    entry is followed inside the root only (a link out of the root, or to the root itself,
    is skipped, and nothing outside is looked up); the id is the entry's own name.
    """
    if not isinstance(root, HeldRoot):
        tree = HeldRoot(root)
        try:
            return scan_root(tree)
        finally:
            tree.close()
    scan = Scan()
    listing = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=root.fd)
    try:
        with os.scandir(listing) as entries:
            names = [e.name for e in entries if _may_be_a_directory(e)]
    finally:
        os.close(listing)
    for name in names:
        if name.startswith("."):
            continue
        if not WORKSPACE_ID.fullmatch(name):
            scan.skipped[name] = "not a valid workspace id ([A-Za-z0-9][A-Za-z0-9._-]{0,127})"
            continue
        try:
            found = root.resolve(name)
        except Outside:
            scan.skipped[name] = "a symlink that leads outside the workspaces root"
            continue
        except (Unresolvable, Missing):
            continue  # a loop, a dangling link, or gone while we looked
        try:
            if not stat.S_ISDIR(found.st.st_mode):
                continue
            if not found.parts:
                scan.skipped[name] = "a symlink to the workspaces root itself"
                continue
            scan.found[name] = os.path.join(root.path, *found.parts)
            scan.identities[name] = (found.st.st_dev, found.st.st_ino)
        finally:
            found.close()
    return scan


def _may_be_a_directory(entry: os.DirEntry[str]) -> bool:
    """A directory or a symlink (the scan resolves links beneath the root itself)."""
    try:
        return entry.is_dir(follow_symlinks=False) or entry.is_symlink()
    except OSError:
        return False


@dataclass
class _Attached:
    path: str
    activities: SearchActivities
    # The workspace queue's worker; None when only the host queue serves it.
    worker: Worker | None
    running: asyncio.Task[None] | None

    def holds(self) -> Identity | None:
        """Which directory the attached activities search (None: it cannot be told)."""
        try:
            return self.activities.workspace.identity
        except OSError:
            return None


@dataclass
class _Refused:
    others: frozenset[str]
    count: int
    retry_at: float


class Fleet:
    """The workers of every workspace under ``root``, sharing ``services``.

    Args:
        client: the Temporal client (with FsSearchPlugin).
        services: what the workspaces share (``build_services(..., workspaces_root=True)``:
            its capacity plan sizes each workspace's share).
        root: the workspaces root directory.
        scan_interval: seconds between scans of the root.
        host_id: this host (default ``FS_SEARCH_HOST_ID`` or the host name).
        owners: who checks a queue's pollers (default: a QueueOwners on ``host_id``).
        queues: ``workspace`` (default): one queue per workspace; ``host``: the host's one
            queue ``fs-search-host/<host-id>``, every request naming its workspace;
            ``both``: all of them (a migration).
    """

    def __init__(
        self,
        client: Client,
        services: Services,
        root: str | os.PathLike[str],
        *,
        scan_interval: float = DEFAULT_SCAN_INTERVAL_S,
        host_id: str | None = None,
        owners: QueueOwners | None = None,
        queues: QueueMode = "workspace",
    ) -> None:
        if queues not in QUEUE_MODES:
            raise ValueError(f"queues must be one of {', '.join(QUEUE_MODES)} (got {queues!r})")
        capacity = services.capacity
        if not capacity.workspaces_root:
            raise ValueError(
                "a Fleet shares its services between workspaces: build them with "
                "build_services(config, workspaces_root=True)"
            )
        self.queues = queues
        self.client = client
        self.services = services
        self.root = os.fspath(root)
        self.scan_interval = scan_interval
        config = services.config
        self.host_id = owners.host_id if owners else host_id or host_id_from_env()
        self.host_queue = host_queue_for(self.host_id)
        # Calls taken from Temporal (running, or waiting for one of the executor's running
        # slots, which the plan sized): the plan's share per workspace queue.
        self.held_slots = HeldSlots(
            total=capacity.held,
            per_workspace=capacity.held_per_workspace,
            shared_queues=frozenset({self.host_queue}),
        )
        self.tuner = WorkerTuner.create_composite(
            workflow_supplier=FixedSizeSlotSupplier(1),
            activity_supplier=self.held_slots,
            local_activity_supplier=FixedSizeSlotSupplier(1),
            nexus_supplier=FixedSizeSlotSupplier(1),
        )
        # Detaching lets running calls finish.
        self.drain = drain_for(config.timeout_ms)
        self.attached: dict[str, _Attached] = {}
        # The root, held from the first scan on: every entry is resolved beneath it.
        self._root: HeldRoot | None = None
        # Workspaces another host's worker polls: not attached, checked again later.
        self.refused: dict[str, _Refused] = {}
        self._attaching: dict[str, asyncio.Task[None]] = {}
        self._latest = Scan()
        self._draining: set[asyncio.Task[None]] = set()
        self._stopping: dict[str, asyncio.Task[None]] = {}
        self._warned: set[str] = set()
        self._check_failing = False
        self.identity = identity_for(self.host_id)
        # A workspace holds at most its share of the host queue's calls.
        self.router = HostRouter(
            self.host_id, self._served, share=capacity.host_share, lend=self.held_slots.lent
        )
        self.owners = owners or QueueOwners(client, self.host_id)
        self.allow_shared = config.allow_shared_queue
        meter = metrics.get_meter(INSTRUMENTATION)
        meter.create_observable_gauge(
            "fs_search.workspaces.attached",
            callbacks=[self._observe],
            unit="{workspace}",
            description="Workspaces this worker process serves",
        )
        meter.create_observable_gauge(
            "fs_search.workspaces.refused",
            callbacks=[self._observe_refused],
            unit="{workspace}",
            description="Workspaces not served because another host's worker polls their queue",
        )

    def _observe(self, _options: CallbackOptions) -> Iterable[Observation]:
        yield Observation(len(self.attached))

    def _observe_refused(self, _options: CallbackOptions) -> Iterable[Observation]:
        yield Observation(len(self.refused))

    async def scan(self) -> None:
        """Attach new workspaces, detach vanished (or re-pointed) ones.

        New workspaces are checked in the background (rate-limited) and attached as each
        check passes; a refused one is checked again once its retry time has come.
        """
        try:
            if self._root is None:
                self._root = HeldRoot(self.root)
            scan = await asyncio.to_thread(scan_root, self._root)
        except OSError as e:
            log.warning("cannot scan the workspaces root %s: %s", escaped(self.root), e)
            return
        self._latest = scan
        for name, reason in scan.skipped.items():
            if name not in self._warned:
                self._warned.add(name)
                log.warning("skipping %r under %s: %s", name, escaped(self.root), reason)
        self._warned &= set(scan.skipped)
        for workspace_id, attached in list(self.attached.items()):
            path = scan.found.get(workspace_id)
            if path is None:
                self.detach(workspace_id)
            elif path != attached.path or scan.identities[workspace_id] != attached.holds():
                log.info(
                    "workspace %s now names another directory (%s): attaching that one",
                    workspace_id,
                    escaped(path),
                )
                self.detach(workspace_id)
        for workspace_id in [w for w in self.refused if w not in scan.found]:
            del self.refused[workspace_id]
        now = time.monotonic()
        for workspace_id, path in scan.found.items():
            if workspace_id in self.attached or workspace_id in self._attaching:
                continue
            refused = self.refused.get(workspace_id)
            if refused and now < refused.retry_at:
                continue
            identity = scan.identities[workspace_id]
            task = asyncio.create_task(self._attach_scanned(workspace_id, path, identity))
            self._attaching[workspace_id] = task

    async def _attach(
        self, workspace_id: str, path: str, identity: Identity, *, wanted: Callable[[], bool]
    ) -> bool:
        """Open the directory the scan vetted, wait for this process's previous worker on
        the queue to drain, check the queue, then start, if ``wanted()`` still says so.

        The entry is opened again beneath the root's held descriptor and attached only if it
        is still the directory the scan recorded (``identity``): whatever the entry names
        by the time the scan's answer is acted on (an exchange of names, a link swapped in)
        is refused, and checked again by the next scan."""
        if workspace_id in self.attached:
            return True
        assert self._root is not None  # attaching follows a scan
        try:
            workspace = Workspace.entry(self._root, workspace_id, expected=identity)
        except Changed as e:
            log.info(
                "not attaching workspace %s: %s; the next scan looks again",
                workspace_id,
                escaped(e),
            )
            return False
        try:
            activities = self.services.activities_for(
                workspace, workspace_id, nice_step=NICE_STEP, host_id=self.host_id
            )
        except Exception as e:  # noqa: BLE001 - one bad directory must not stop the others
            workspace.close()
            log.warning("cannot attach workspace %s (%s): %s", workspace_id, escaped(path), e)
            return False
        # Temporal allows one worker per queue and client: a detached one must be gone first.
        previous = self._stopping.get(workspace_id)
        try:
            if previous is not None:
                await asyncio.wait({previous})
            check = await self._check(workspace_id)
        except BaseException:
            _release(activities)
            raise
        if workspace_id in self.attached or not wanted():
            _release(activities)
            return False
        if check is not None and check.taken:
            _release(activities)
            self._refuse(workspace_id, path, check)
            return False
        return self._start(workspace_id, path, activities)

    async def _attach_scanned(self, workspace_id: str, path: str, identity: Identity) -> None:
        def wanted() -> bool:
            # Attach only what the latest scan still finds there.
            latest = self._latest
            return (
                latest.found.get(workspace_id) == path
                and latest.identities.get(workspace_id) == identity
            )

        try:
            await self._attach(workspace_id, path, identity, wanted=wanted)
        finally:
            self._attaching.pop(workspace_id, None)

    async def _check(self, workspace_id: str) -> QueueCheck | None:
        """Who else polls the workspace's queue; None when sharing is allowed, or when only
        the host queue serves the workspace."""
        if self.allow_shared or self.queues == "host":
            return None
        check = await self.owners.check(task_queue_for(workspace_id))
        if check.error:
            # The check guards against a deployment mistake; it must not stop serving.
            if not self._check_failing:
                log.warning(
                    "cannot check who else polls task queue %s (%s): attaching without the "
                    "check until it answers again",
                    check.queue,
                    check.error,
                )
            self._check_failing = True
        elif self._check_failing:
            self._check_failing = False
            log.info("checking task queues for other hosts' workers again")
        return check

    def _refuse(self, workspace_id: str, path: str, check: QueueCheck) -> None:
        prior = self.refused.get(workspace_id)
        others = frozenset(p.identity for p in check.others)
        count = prior.count + 1 if prior else 1
        wait = min(RETRY_MAX_S, max(check.clears_in() + 1, RETRY_MIN_S * 2 ** min(count - 1, 8)))
        self.refused[workspace_id] = _Refused(others, count, time.monotonic() + wait)
        if prior is None or prior.others != others:
            what = (
                f"refuses to attach workspace {workspace_id} ({escaped(path)}) and checks "
                f"again later (in {wait:.0f} s)"
            )
            log.error("%s", check.refusal(self.identity, self.host_id, what))
        else:
            log.debug(
                "workspace %s still refused (polled by %s); checking again in %.0f s",
                workspace_id,
                ", ".join(sorted(others)),
                wait,
            )

    def _start(self, workspace_id: str, path: str, activities: SearchActivities) -> bool:
        """Start polling ``fs-search/<workspace_id>`` for searches of ``path`` (host mode:
        serve it on the host queue only)."""
        if self.queues == "host":
            self.attached[workspace_id] = _Attached(path, activities, None, None)
            log.info(
                "attached workspace %s (%s) on host queue %s",
                workspace_id,
                escaped(path),
                self.host_queue,
            )
            return True
        try:
            worker = temporal_worker(
                self.client,
                task_queue=task_queue_for(workspace_id),
                activities=activities.all(),  # type: ignore[arg-type]
                graceful_shutdown=self.drain,
                identity=self.identity,
                tuner=self.tuner,
                # One poller per queue. Temporal's poller autoscaling (minimum 1) costs ~7 % of
                # a core with 1,000 idle queues on this 2-core machine; a single poller costs
                # ~0 %, and a busy queue still runs up to its share at once (each task frees
                # the poller to poll again at once).
                activity_task_poller_behavior=PollerBehaviorSimpleMaximum(1),
            )
        except Exception as e:  # noqa: BLE001 - one queue must not stop the others
            _release(activities)
            log.warning("cannot attach workspace %s (%s): %s", workspace_id, escaped(path), e)
            return False
        self.attached[workspace_id] = _Attached(
            path, activities, worker, asyncio.create_task(worker.run())
        )
        refused = self.refused.pop(workspace_id, None)
        log.info(
            "attached workspace %s (%s) on task queue %s%s",
            workspace_id,
            escaped(path),
            task_queue_for(workspace_id),
            f" (no longer polled by {', '.join(sorted(refused.others))})" if refused else "",
        )
        return True

    def detach(self, workspace_id: str) -> None:
        """Stop polling the workspace's queue; its running calls finish in the background."""
        attached = self.attached.pop(workspace_id, None)
        if attached is None:
            return
        log.info("detaching workspace %s (%s)", workspace_id, escaped(attached.path))
        task = asyncio.create_task(_stop(workspace_id, attached, self.drain.total_seconds()))
        self._draining.add(task)
        self._stopping[workspace_id] = task

        def done(task: asyncio.Task[None]) -> None:
            self._draining.discard(task)
            if self._stopping.get(workspace_id) is task:
                del self._stopping[workspace_id]

        task.add_done_callback(done)

    def _served(self, workspace_id: str) -> SearchActivities | None:
        """The attached workspace of an id (the host queue's lookup)."""
        attached = self.attached.get(workspace_id)
        return attached.activities if attached is not None else None

    async def _start_host_queue(self) -> tuple[Worker, asyncio.Task[None]] | None:
        """Poll ``fs-search-host/<host-id>`` (modes host and both), after checking that no
        other host's worker polls it (a host-id clash).

        Raises:
            QueueTaken: another host's live worker polls the host queue."""
        if self.queues == "workspace":
            return None
        await claim_queue(
            self.client,
            self.host_queue,
            host_id=self.host_id,
            identity=self.identity,
            allow_shared=self.allow_shared,
            owners=self.owners,
        )
        worker = temporal_worker(
            self.client,
            task_queue=self.host_queue,
            activities=self.router.all(),  # type: ignore[arg-type]
            graceful_shutdown=self.drain,
            identity=self.identity,
            tuner=self.tuner,
            # A busy queue: pollers scale with the work (at least one, idle).
            activity_task_poller_behavior=PollerBehaviorAutoscaling(minimum=1, maximum=8),
        )
        log.info("serving host queue %s (every request names its workspace)", self.host_queue)
        return worker, asyncio.create_task(worker.run())

    async def run(self, stop: asyncio.Event, on_ready: Callable[[], None] | None = None) -> None:
        """Scan until ``stop`` is set, then drain every workspace and return."""
        if self.allow_shared:
            log.info("%s=1: task queues are not checked for other hosts", ALLOW_SHARED_ENV)
        await self.scan()
        host = await self._start_host_queue()
        if on_ready:
            on_ready()
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.scan_interval)
            if not stop.is_set():
                await self.scan()
        attaching = list(self._attaching.values())
        for task in attaching:
            task.cancel()
        await asyncio.gather(*attaching, return_exceptions=True)
        if host is not None:
            worker, polling = host
            await worker.shutdown()
            await asyncio.gather(polling, return_exceptions=True)
        for workspace_id in list(self.attached):
            self.detach(workspace_id)
        if self._draining:
            await asyncio.gather(*self._draining, return_exceptions=True)
        if self._root is not None:
            self._root.close()


async def _stop(workspace_id: str, attached: _Attached, drain: float) -> None:
    try:
        if attached.worker is not None and attached.running is not None:
            await attached.worker.shutdown()
            await attached.running
        # Calls the host queue handed to it before it was detached finish first.
        deadline = time.monotonic() + drain
        while attached.activities.running and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
    except Exception as e:  # noqa: BLE001 - report and go on with the others
        log.warning("workspace %s stopped with an error: %s", workspace_id, e)
    else:
        _release(attached.activities)  # no call of it runs any more
    log.info("detached workspace %s", workspace_id)


def _release(activities: SearchActivities) -> None:
    """Close the workspace's held root directory now rather than when collected."""
    try:
        activities.workspace.close()
    except OSError as e:
        log.warning("closing workspace %s: %s", escaped(activities.workspace.root), e)


OPEN_FILES_WANTED = 65536


def raise_open_files_limit(wanted: int = OPEN_FILES_WANTED) -> int:
    """Raise this process's soft descriptor limit towards ``wanted`` (at most the hard limit).

    Every attached workspace holds its root open and every worker its connections, so a
    root of a thousand workspaces outgrows the common default soft limit of 1,024; the
    result is the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError) as e:
            log.warning("could not raise the open-files limit from %d to %d: %s", soft, target, e)
            return soft
        log.info("open-files limit raised from %d to %d (held workspace roots)", soft, target)
        return target
    return soft


def sandbox_description(services: Services) -> str:
    """The start-up log's account of rg's confinement, for every workspace of the root."""
    sandbox = services.executor.sandbox
    if sandbox is None:
        return "off (rg runs without limits)"
    if sandbox.landlock_abi:
        return (
            f"landlock (ABI {sandbox.landlock_abi}): rg reads only the workspace it searches; "
            f"memory {sandbox.memory_mb} MiB"
        )
    why = "FS_SEARCH_SANDBOX=off" if services.config.sandbox == "off" else "no Landlock here"
    return f"none (no kernel confinement: {why}); memory {sandbox.memory_mb} MiB"


async def serve_root(
    client: Client,
    services: Services,
    root: str | os.PathLike[str],
    *,
    scan_interval: float = DEFAULT_SCAN_INTERVAL_S,
    on_ready: Callable[[], None] | None = None,
    host_id: str | None = None,
    queues: QueueMode = "workspace",
) -> None:
    """Serve every workspace under ``root`` until SIGINT/SIGTERM, then drain them all.

    ``host_id``: this host (default ``FS_SEARCH_HOST_ID`` or the host name); ``queues``:
    which queues to poll (see :class:`Fleet`)."""
    stop = stop_on_signals()
    raise_open_files_limit()
    fleet = Fleet(
        client, services, root, scan_interval=scan_interval, host_id=host_id, queues=queues
    )
    async with maintenance(services):
        warming = asyncio.create_task(services.offload.warm())
        log.info(
            "fs-search worker serving the workspaces under %s on %s, namespace %s "
            "(%d searches at once, %d per workspace; %d calls held, %d per workspace queue; "
            "identity %s)",
            escaped(os.path.realpath(root)),
            client.service_client.config.target_host,
            client.namespace,
            services.capacity.running,
            services.capacity.running_per_workspace,
            services.capacity.held,
            services.capacity.held_per_workspace,
            fleet.identity,
        )
        log.info(
            "ripgrep: %s; sandbox: %s; storage: %s",
            services.rg.version or services.rg.reason,
            sandbox_description(services),
            services.storage.describe(),
        )
        await fleet.run(stop, on_ready)
        warming.cancel()
        log.info("drained every workspace")
