"""Where a one-call workflow's time went, from its history (server clock, ms).

* ``workflow tasks``: every workflow task, scheduled -> completed (waiting for the caller's
  workflow worker, and the worker running it);
* ``queued``: the call's activity task, scheduled -> started by an fs-search worker (for a
  call scheduled more than once, from its first scheduling);
* ``running``: started -> completed;
* ``other``: the rest of the client's time (starting the workflow, fetching its result, the
  server's own steps between events).
"""

from __future__ import annotations

import statistics
from typing import Any

from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

PHASES = ("workflow tasks", "queued", "running", "other")


def _ms(event: HistoryEvent) -> float:
    return event.event_time.ToNanoseconds() / 1e6


async def phases(client: Client, workflow_id: str, elapsed_ms: float) -> dict[str, float]:
    """The phases of one finished workflow that made one call, which took ``elapsed_ms``
    end to end at the client."""
    out = dict.fromkeys(PHASES, 0.0)
    started: dict[str, float] = {}
    first_scheduled: float | None = None
    handle: Any = client.get_workflow_handle(workflow_id)
    async for event in handle.fetch_history_events():
        t = _ms(event)
        if event.HasField("workflow_task_scheduled_event_attributes"):
            started["wft"] = t
        elif event.HasField("workflow_task_completed_event_attributes"):
            out["workflow tasks"] += t - started.pop("wft", t)
        elif event.HasField("activity_task_scheduled_event_attributes"):
            first_scheduled = t if first_scheduled is None else first_scheduled
        elif event.HasField("activity_task_started_event_attributes"):
            out["queued"] = t - (first_scheduled if first_scheduled is not None else t)
            started["activity"] = t
        elif event.HasField("activity_task_completed_event_attributes"):
            out["running"] = t - started.get("activity", t)
    out["other"] = elapsed_ms - out["workflow tasks"] - out["queued"] - out["running"]
    return out


def medians(samples: list[dict[str, float]]) -> str:
    """The median of each phase, as ``workflow tasks 120, queued 300, ...`` (ms)."""
    return ", ".join(f"{name} {statistics.median(s[name] for s in samples):.0f}" for name in PHASES)
