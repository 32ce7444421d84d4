"""The queueing row's machinery: slow calls on a busy worker, and when each one waited.

A call's wait is measured from two clocks on the same machine: when Temporal first
scheduled it (the ``ActivityTaskScheduled`` event of the workflow's history, server time)
and when the worker started its rg process group (the group leader's start time in /proc,
to a clock tick, seen by :class:`procs.ChildWatcher`). The history's ``ActivityTaskStarted``
splits that wait into the part in Temporal's task queue and the part in the worker (its
running slots, plus the activity's checks and path resolution before rg starts).

Each call greps its own fresh sparse file: a 256 MiB hole that no search has read yet
takes rg ~0.5 s (the kernel maps it on first read; a second read of it takes ~0.05 s),
uses no disk, and never matches.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import procs
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHandle

from fs_search.activities._contract import GREP_ACTIVITY, GrepRequest

SLOW_BYTES = 256 * 1024**2
SLOW_PATTERN = "queue_needle_never_found"
WARM_FILE = "warm.txt"


def slow_files(root: Path, n: int) -> list[str]:
    """A fresh workspace at ``root`` with ``n`` never-read sparse files (and a small file
    for warm-up calls); their names, one per call."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    (root / WARM_FILE).write_text(f"not the {SLOW_PATTERN[::-1]}\n")
    names = [f"c{i:03}.bin" for i in range(n)]
    for name in names:
        with open(root / name, "wb") as f:
            f.truncate(SLOW_BYTES)
    return names


@dataclass
class RgRun:
    """When the worker's rg group for one file started and was last seen (wall clock)."""

    started: float
    last_seen: float


def rg_runs(watcher: procs.ChildWatcher) -> dict[str, RgRun]:
    """The first rg group the worker ran for each file, by the file name its argv ends with
    (``-- <file>``); children without one (digest helpers) are skipped."""
    runs: dict[str, RgRun] = {}
    for run in sorted(watcher.runs.values(), key=lambda r: r.started):
        argv = run.argv
        if len(argv) < 2 or argv[-2] != "--":
            continue
        runs.setdefault(argv[-1], RgRun(run.started, run.last_seen))
    return runs


@dataclass
class Scheduling:
    """One ``ActivityTaskScheduled`` of a grep and what became of it (server time, s)."""

    path: str
    scheduled: float
    started: float | None = None
    attempt: int = 0
    closed: float | None = None


@dataclass
class CallTimeline:
    """Every scheduling of one call (a call no worker took in time is scheduled again)."""

    path: str
    schedulings: list[Scheduling] = field(default_factory=list)

    @property
    def scheduled(self) -> float:
        """When the call was first scheduled."""
        return min(s.scheduled for s in self.schedulings)

    @property
    def ran(self) -> Scheduling | None:
        """The scheduling a worker started (the last one, if several were)."""
        started = [s for s in self.schedulings if s.started is not None]
        return max(started, key=lambda s: s.scheduled) if started else None


def _seconds(event: HistoryEvent) -> float:
    return event.event_time.ToNanoseconds() / 1e9


async def timelines(client: Client, handle: WorkflowHandle[Any, Any]) -> list[CallTimeline]:
    """Each grep call of one workflow run, from its history (the request names its file)."""
    by_event: dict[int, Scheduling] = {}
    async for event in handle.fetch_history_events():
        if event.HasField("activity_task_scheduled_event_attributes"):
            attrs = event.activity_task_scheduled_event_attributes
            if attrs.activity_type.name != GREP_ACTIVITY:
                continue
            [req] = await client.data_converter.decode(attrs.input.payloads, [GrepRequest])
            by_event[event.event_id] = Scheduling(str(req.path), _seconds(event))
        elif event.HasField("activity_task_started_event_attributes"):
            started = event.activity_task_started_event_attributes
            scheduling = by_event.get(started.scheduled_event_id)
            if scheduling is not None:
                scheduling.started = _seconds(event)
                scheduling.attempt = started.attempt
        else:
            _closed(event, by_event)
    calls: dict[str, CallTimeline] = defaultdict(lambda: CallTimeline(""))
    for scheduling in by_event.values():
        call = calls[scheduling.path]
        call.path = scheduling.path
        call.schedulings.append(scheduling)
    return list(calls.values())


_CLOSED = (
    "activity_task_completed_event_attributes",
    "activity_task_failed_event_attributes",
    "activity_task_timed_out_event_attributes",
    "activity_task_canceled_event_attributes",
)


def _closed(event: HistoryEvent, by_event: dict[int, Scheduling]) -> None:
    for name in _CLOSED:
        if event.HasField(name):  # type: ignore[arg-type]
            scheduling = by_event.get(getattr(event, name).scheduled_event_id)
            if scheduling is not None:
                scheduling.closed = _seconds(event)
            return


@dataclass
class Waits:
    """Per call that ran (seconds): the whole wait, its parts, and rg's run."""

    total: list[float] = field(default_factory=list)
    in_temporal: list[float] = field(default_factory=list)
    in_worker: list[float] = field(default_factory=list)
    rg: list[float] = field(default_factory=list)
    rescheduled: int = 0
    retried: int = 0
    unseen: list[str] = field(default_factory=list)


def waits(calls: list[CallTimeline], runs: dict[str, RgRun]) -> Waits:
    """Each call's wait: first scheduled -> its rg group started in the worker."""
    out = Waits()
    for call in calls:
        ran = call.ran
        out.rescheduled += len(call.schedulings) > 1
        if ran is None or ran.started is None:
            continue
        out.retried += ran.attempt > 1
        run = runs.get(call.path)
        if run is None:
            out.unseen.append(call.path)
            continue
        out.total.append(run.started - call.scheduled)
        out.in_temporal.append(ran.started - call.scheduled)
        out.in_worker.append(run.started - ran.started)
        out.rg.append(run.last_seen - run.started)
    return out
