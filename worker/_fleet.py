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
import math
import os
import re
import resource
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

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

from fs_search.activities import (
    ID_SYNTAX,
    INSTRUMENTATION,
    NICE_STEP,
    Changed,
    HeldRoot,
    Identity,
    Missing,
    Outside,
    SearchActivities,
    Unresolvable,
    Workspace,
    drain_for,
    escaped,
    host_queue_for,
    task_queue_for,
)
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
from fs_search.worker._root_events import (
    EVENTS_MODES,
    EventsMode,
    EventsUnavailable,
    RootEvents,
    filesystem_type,
    plan,
)

log = logging.getLogger(__name__)

WORKSPACE_ID = re.compile(ID_SYNTAX)
DEFAULT_SCAN_INTERVAL_S = 2.0
# With filesystem events, a full scan of the root this often at least (a backstop: events
# tell of every change of the root's own entries; this catches anything they could not).
BACKSTOP_S = 300.0
# A rescan asked for by lost events waits this long after the last scan at least, and four
# times as long as that scan took: a flood of events cannot keep the worker scanning.
RESCAN_GAP_S = 1.0
# How long a host-queue call naming a workspace not attached yet waits for its attach.
ON_THE_SPOT_WAIT_S = 10.0
# A refused workspace is checked again after max(when the other host's poller would stop
# looking live, RETRY_MIN_S doubling per refusal), at most RETRY_MAX_S later.
RETRY_MIN_S = 10.0
RETRY_MAX_S = 300.0
# After the drain, what the host queue's worker still runs is cancelled: a detached workspace's
# directory stays open this much longer, so those calls end cancelled (and are retried), never
# failing on a closed directory.
CANCEL_GRACE_S = 5.0
# At most this long the host queue waits for the first scan's workspaces to attach.
FIRST_ATTACH_S = 60.0

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
        found = vet_entry(root, name)
        if isinstance(found, Entry):
            scan.found[name] = found.path
            scan.identities[name] = found.identity
        elif found is not None:
            scan.skipped[name] = found
    return scan


@dataclass(frozen=True)
class Entry:
    """A root entry that is a workspace: the real path and ``(st_dev, st_ino)`` of the
    directory it names."""

    path: str
    identity: Identity


def vet_entry(root: HeldRoot, name: str) -> Entry | str | None:
    """What the root's entry ``name`` is, by the scan's rules: a workspace (:class:`Entry`),
    a name to skip with a warning (why, as a string), or nothing to mention (None: a
    dot-name, gone, not a directory, a loop or a dangling link).

    The entry is resolved beneath the held root: a symlink is followed inside the root only
    (a link out of it, or to the root itself, is skipped; nothing outside is looked up)."""
    if name.startswith("."):
        return None
    if not WORKSPACE_ID.fullmatch(name):
        return "not a valid workspace id ([A-Za-z0-9][A-Za-z0-9._-]{0,127})"
    try:
        found = root.resolve(name)
    except Outside:
        return "a symlink that leads outside the workspaces root"
    except (Unresolvable, Missing):
        return None  # a loop, a dangling link, or gone while we looked
    try:
        if not stat.S_ISDIR(found.st.st_mode):
            return None
        if not found.parts:
            return "a symlink to the workspaces root itself"
        return Entry(os.path.join(root.path, *found.parts), (found.st.st_dev, found.st.st_ino))
    finally:
        found.close()


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


@dataclass
class _Attaching:
    """An attach under way: its task and the entry it attaches."""

    task: asyncio.Task[None]
    entry: Entry


class Fleet:
    """The workers of every workspace under ``root``, sharing ``services``.

    Args:
        client: the Temporal client (with FsSearchPlugin).
        services: what the workspaces share (``build_services(..., workspaces_root=True)``:
            its capacity plan sizes each workspace's share).
        root: the workspaces root directory.
        scan_interval: seconds between scans of the root when it is scanned (no events, or
            a network filesystem); with events, the period of the cheap checks (entries that
            are links, refusals due again), the full backstop scan every
            ``max(scan_interval, BACKSTOP_S)``.
        host_id: this host (default ``FS_SEARCH_HOST_ID`` or the host name).
        owners: who checks a queue's pollers (default: a QueueOwners on ``host_id``).
        queues: ``workspace`` (default): one queue per workspace; ``host``: the host's one
            queue ``fs-search-host/<host-id>``, every request naming its workspace;
            ``both``: all of them (a migration).
        events: how changes under the root are learnt (default the config's
            ``root_events``): ``auto``, ``on`` or ``off`` (see ``worker/_root_events.py``).
        drain: how long running calls may take to finish once stopped or detached (default
            and at most: a call's budget at the cap, and its reserve).
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
        events: EventsMode | None = None,
        drain: timedelta | None = None,
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
        # Detaching lets running calls finish (at most ``drain``, the drain timeout).
        self.drain = drain_for(config.timeout_ms)
        if drain is not None:
            self.drain = min(self.drain, drain)
        self.attached: dict[str, _Attached] = {}
        # The root, held from the first scan on: every entry is resolved beneath it.
        self._root: HeldRoot | None = None
        # Workspaces another host's worker polls: not attached, checked again later.
        self.refused: dict[str, _Refused] = {}
        self._attaching: dict[str, _Attaching] = {}
        # What each root entry that is a workspace names, as last vetted (by a scan, an
        # event, or a call on the host queue); entries that are links, apart (vetted again at
        # every tick: their targets change without an event on the root).
        self._present: dict[str, Entry] = {}
        self._links: set[str] = set()
        # Names vetted one by one while a full scan runs: their answer is newer than its.
        self._touched: set[str] | None = None
        self.events_mode: EventsMode = events or services.config.root_events
        if self.events_mode not in EVENTS_MODES:
            raise ValueError(f"events must be one of {', '.join(EVENTS_MODES)}")
        self._events: RootEvents | None = None
        self._watch_decided = False
        self._poll = True  # scan at every tick (no events, or events that miss changes)
        self._last_scan = -math.inf
        self._rescan_wanted = False
        self._rescan_not_before = -math.inf
        self._overflow_logged = -math.inf
        self._overflows = 0
        self.scans = 0  # full scans of the root so far
        self._draining: set[asyncio.Task[None]] = set()
        self._stopping: dict[str, asyncio.Task[None]] = {}
        self._warned: set[str] = set()
        self._check_failing = False
        self.identity = identity_for(self.host_id)
        # A workspace holds at most its share of the host queue's calls.
        self.router = HostRouter(
            self.host_id,
            self._served,
            share=capacity.host_share,
            attach=self.attach_now,
            lend=self.held_slots.lent,
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

    @property
    def workspaces_attached(self) -> int:
        """Workspaces this process serves now."""
        return len(self.attached)

    def _open_root(self) -> HeldRoot:
        if self._root is None:
            self._root = HeldRoot(self.root)
        return self._root

    async def scan(self) -> None:
        """Look at every entry of the root: attach new workspaces, detach vanished (or
        re-pointed) ones.

        New workspaces are checked in the background (rate-limited) and attached as each
        check passes; a refused one is checked again once its retry time has come.
        """
        self._touched = set()
        try:
            root = self._open_root()
            started = time.monotonic()
            scan = await asyncio.to_thread(scan_root, root)
        except OSError as e:
            log.warning("cannot scan the workspaces root %s: %s", escaped(self.root), e)
            return
        finally:
            touched, self._touched = self._touched, None
        now = time.monotonic()
        self.scans += 1
        self._last_scan = now
        self._rescan_not_before = now + max(RESCAN_GAP_S, 4 * (now - started))
        present = {n: Entry(p, scan.identities[n]) for n, p in scan.found.items()}
        for name in touched:
            if name in self._present:
                present[name] = self._present[name]
            else:
                present.pop(name, None)
        self._present = present
        self._links = {n for n, e in present.items() if _is_link(root, n, e)}
        self._warned &= set(scan.skipped) | touched
        for name, reason in scan.skipped.items():
            if name not in touched:
                self._warn_skipped(name, reason)
        for name in set(self.attached) | set(present) | set(self.refused) | set(self._attaching):
            self._reconcile(name, now)

    async def _vet(self, names: Iterable[str]) -> None:
        """Look at these entries of the root again (what events named)."""
        root = self._root
        if root is None:
            return
        wanted = list(names)
        try:
            found = await asyncio.to_thread(lambda: {n: vet_entry(root, n) for n in wanted})
        except OSError as e:
            log.warning("cannot look under the workspaces root %s: %s", escaped(self.root), e)
            self._rescan_wanted = True
            return
        self._apply(found)

    def _apply(self, found: dict[str, Entry | str | None]) -> None:
        """What vetting found for these names: record it, then attach or detach each."""
        now = time.monotonic()
        assert self._root is not None
        for name, entry in found.items():
            if self._touched is not None:
                self._touched.add(name)
            if isinstance(entry, Entry):
                self._present[name] = entry
                if _is_link(self._root, name, entry):
                    self._links.add(name)
                else:
                    self._links.discard(name)
            else:
                self._present.pop(name, None)
                self._links.discard(name)
            if isinstance(entry, str):
                self._warn_skipped(name, entry)
            else:
                self._warned.discard(name)
            self._reconcile(name, now)

    def _warn_skipped(self, name: str, reason: str) -> None:
        if name not in self._warned:
            self._warned.add(name)
            log.warning("skipping %r under %s: %s", name, escaped(self.root), reason)

    def _reconcile(self, name: str, now: float) -> None:
        """Make ``name`` attached as its last vetting says: detach it if it is gone or names
        another directory, cancel an attach of what it no longer names, attach what it names
        (unless refused until later)."""
        present = self._present.get(name)
        attached = self.attached.get(name)
        if attached is not None:
            if (
                present is not None
                and present.path == attached.path
                and present.identity == attached.holds()
            ):
                return
            if present is not None:
                log.info(
                    "workspace %s now names another directory (%s): attaching that one",
                    name,
                    escaped(present.path),
                )
            self.detach(name)
        attaching = self._attaching.get(name)
        if attaching is not None:
            if attaching.entry == present:
                return
            del self._attaching[name]
            attaching.task.cancel()
        if present is None:
            self.refused.pop(name, None)
            return
        refused = self.refused.get(name)
        if refused and now < refused.retry_at:
            return
        task = asyncio.create_task(self._attach_present(name, present))
        self._attaching[name] = _Attaching(task, present)

    async def _attach_present(self, workspace_id: str, entry: Entry) -> None:
        def wanted() -> bool:
            # Attach only what the entry still names as last vetted.
            return self._present.get(workspace_id) == entry

        try:
            await self._attach(workspace_id, entry.path, entry.identity, wanted=wanted)
        finally:
            current = self._attaching.get(workspace_id)
            if current is not None and current.task is asyncio.current_task():
                del self._attaching[workspace_id]

    async def attach_now(self, workspace_id: str) -> SearchActivities | None:
        """The host queue's lookup of a workspace not attached (yet): its entry under the
        root is vetted on the spot as a scan would (a valid id, a directory beneath the held
        root, not a link out of it, vetted again by its held handle when attached) and
        attached; None when there is no such workspace (or another host's worker polls its
        queue, or its attach did not finish within ``ON_THE_SPOT_WAIT_S``)."""
        served = self._served(workspace_id)
        if served is not None or self._root is None or self._root.fd < 0:
            return served
        if not WORKSPACE_ID.fullmatch(workspace_id):
            return None
        if workspace_id not in self._attaching:
            self._apply({workspace_id: vet_entry(self._root, workspace_id)})
        deadline = time.monotonic() + ON_THE_SPOT_WAIT_S
        while (attaching := self._attaching.get(workspace_id)) is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            await asyncio.wait({attaching.task}, timeout=left)
        return self._served(workspace_id)

    async def _attach(
        self, workspace_id: str, path: str, identity: Identity, *, wanted: Callable[[], bool]
    ) -> bool:
        """Open the directory the scan vetted, wait for this process's previous worker on
        the queue to drain, check the queue, then start, if ``wanted()`` still says so.

        The entry is opened again beneath the root's held descriptor and attached only if it
        is still the directory the scan recorded (``identity``): whatever the entry names
        by the time the scan's answer is acted on (an exchange of names, a link swapped in)
        is refused, and checked again once an event or a scan tells of its change."""
        if workspace_id in self.attached:
            return True
        assert self._root is not None  # attaching follows a vetting
        try:
            workspace = Workspace.entry(self._root, workspace_id, expected=identity)
        except Changed as e:
            log.info(
                "not attaching workspace %s: %s; its next event or scan looks again",
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
        # Temporal allows one worker per queue and client: a detached one must be gone first
        # (the host queue's workspaces have no worker of their own).
        previous = self._stopping.get(workspace_id) if self.queues != "host" else None
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
        # Calls the host queue handed to it get the drain too, and then the moment the host
        # queue's worker takes to cancel what is left, before the directory is closed.
        wait = self.drain.total_seconds() + CANCEL_GRACE_S
        task = asyncio.create_task(_stop(workspace_id, attached, wait))
        self._draining.add(task)
        self._stopping[workspace_id] = task

        def done(task: asyncio.Task[None]) -> None:
            self._draining.discard(task)
            if self._stopping.get(workspace_id) is task:
                del self._stopping[workspace_id]

        task.add_done_callback(done)

    def _served(self, workspace_id: str) -> SearchActivities | None:
        """The attached workspace of an id (the host queue's first lookup)."""
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

    def _watch(self) -> None:
        """Choose how changes under the root are learnt (once the root is open), and log it."""
        if self._watch_decided or self._root is None or self._root.fd < 0:
            return
        self._watch_decided = True
        root = self._root
        fstype = filesystem_type(root.fd, root.path)
        chosen = plan(self.events_mode, fstype)
        where = escaped(root.path)
        if not chosen.events:
            log.info(
                "scanning the workspaces root %s every %g s (%s)",
                where,
                self.scan_interval,
                chosen.why,
            )
            return
        try:
            events = RootEvents.watch(root.fd)
        except EventsUnavailable as e:
            log.warning(
                "no filesystem events for the workspaces root %s (%s): scanning it every %g s",
                where,
                e,
                self.scan_interval,
            )
            return
        events.start()
        self._events = events
        self._poll = chosen.poll
        if chosen.poll:
            log.warning(
                "workspaces root %s on %s; scanning it every %g s as well as watching it",
                where,
                chosen.why,
                self.scan_interval,
            )
        else:
            log.info(
                "watching the workspaces root %s for new and removed workspaces (%s); a full "
                "rescan every %g s as a backstop",
                where,
                chosen.why,
                self.backstop_s,
            )

    @property
    def backstop_s(self) -> float:
        """Seconds between full scans while events tell of every change."""
        return max(self.scan_interval, BACKSTOP_S)

    async def _take_events(self) -> None:
        """Act on what the root's events told since last time."""
        events = self._events
        if events is not None:
            changes = events.take()
            if changes.lost is not None:
                log.warning(
                    "%s (%s): scanning it every %g s from now on",
                    changes.lost,
                    escaped(self.root),
                    self.scan_interval,
                )
                events.close()
                self._events = None
                self._poll = self._rescan_wanted = True
            if changes.rescan:
                self._lost_events(changes.overflows)
            if changes.names:
                # Entries that are links are vetted too: their target may be what changed.
                await self._vet(changes.names | self._links)
        if self._rescan_wanted and time.monotonic() >= self._rescan_not_before:
            self._rescan_wanted = False
            await self.scan()

    def _lost_events(self, overflows: int) -> None:
        """Events were lost: a rescan, and a warning at most once a minute."""
        self._rescan_wanted = True
        self._overflows += overflows
        now = time.monotonic()
        if now - self._overflow_logged >= 60:
            self._overflow_logged = now
            log.warning(
                "the workspaces root %s changed faster than its events are kept (%d kernel "
                "queue overflows, fs.inotify.max_queued_events): rescanning it",
                escaped(self.root),
                self._overflows,
            )
            self._overflows = 0

    async def tick(self) -> None:
        """What the fleet does every ``scan_interval``: a full scan when it scans; with
        events, the entries that are links vetted again (their targets change without an
        event on the root), refused workspaces due for a new check, and a full scan every
        ``backstop_s``."""
        now = time.monotonic()
        if self._root is None or self._poll or now - self._last_scan >= self.backstop_s:
            await self.scan()
            self._watch()
            return
        if self._links:
            await self._vet(list(self._links))
        for name in [n for n, r in self.refused.items() if r.retry_at <= now]:
            self._reconcile(name, now)

    async def run(self, stop: asyncio.Event, on_ready: Callable[[], None] | None = None) -> None:
        """Serve until ``stop`` is set, then drain every workspace and return."""
        if self.allow_shared:
            log.info("%s=1: task queues are not checked for other hosts", ALLOW_SHARED_ENV)
        # Watching starts before the first scan: nothing created meanwhile is missed.
        with contextlib.suppress(OSError):
            self._open_root()
        self._watch()
        await self.scan()
        if self.queues != "workspace" and self._attaching:
            # The host queue serves attached workspaces only: the first scan's are attached
            # before it is polled, or a call that waited through a restart would find its
            # workspace missing (a failure, not a wait).
            await asyncio.wait([a.task for a in self._attaching.values()], timeout=FIRST_ATTACH_S)
        host = await self._start_host_queue()
        if on_ready:
            on_ready()
        stopping = asyncio.ensure_future(stop.wait())
        next_tick = time.monotonic() + self.scan_interval
        try:
            while not stopping.done():
                waits: set[asyncio.Future[Any]] = {stopping}
                if self._events is not None:
                    waits.add(asyncio.ensure_future(self._events.changed.wait()))
                wake = min(next_tick, self._rescan_not_before if self._rescan_wanted else next_tick)
                await asyncio.wait(
                    waits,
                    timeout=max(0.0, wake - time.monotonic()),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                for waiting in waits - {stopping}:
                    waiting.cancel()
                if stopping.done():
                    break
                await self._take_events()
                if time.monotonic() >= next_tick:
                    await self.tick()
                    next_tick = time.monotonic() + self.scan_interval
        finally:
            stopping.cancel()
        attaching = [a.task for a in self._attaching.values()]
        for task in attaching:
            task.cancel()
        await asyncio.gather(*attaching, return_exceptions=True)
        # Every queue stops at once: its running calls share one drain.
        closing: list[asyncio.Future[Any]] = []
        if host is not None:
            worker, polling = host
            closing = [asyncio.create_task(worker.shutdown()), polling]
        for workspace_id in list(self.attached):
            self.detach(workspace_id)
        if self._draining or closing:
            await asyncio.gather(*closing, *self._draining, return_exceptions=True)
        if self._events is not None:
            self._events.close()
            self._events = None
        if self._root is not None:
            self._root.close()


def _is_link(root: HeldRoot, name: str, entry: Entry) -> bool:
    """Whether the entry reached its directory through a symlink (its path is not its own)."""
    return entry.path != os.path.join(root.path, name)


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
    stop: asyncio.Event | None = None,
    drain: timedelta | None = None,
    watch: Callable[[Fleet], None] | None = None,
) -> None:
    """Serve every workspace under ``root`` until SIGINT/SIGTERM (or ``stop`` is set), then
    drain them all (running calls have ``drain`` to finish, see :class:`Fleet`).

    ``host_id``: this host (default ``FS_SEARCH_HOST_ID`` or the host name); ``queues``:
    which queues to poll (see :class:`Fleet`); ``watch``: given the fleet before it runs
    (the worker's metrics read it)."""
    stop = stop or stop_on_signals()
    raise_open_files_limit()
    fleet = Fleet(
        client,
        services,
        root,
        scan_interval=scan_interval,
        host_id=host_id,
        queues=queues,
        drain=drain,
    )
    if watch is not None:
        watch(fleet)
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
