"""Drain on SIGTERM: stop taking calls, let the running ones finish, then leave.

The first SIGTERM or SIGINT sets :attr:`Drain.stop` (the worker stops polling: Temporal's
``Worker.shutdown`` with a ``graceful_shutdown_timeout`` of the drain timeout, so the
running calls go on heartbeating and finish, and whatever is still running when it ends is
cancelled — rg killed, the call reported as a worker shutdown, which Temporal retries on the
next worker) and calls :attr:`Drain.on_drain` (readiness fails at once). A call that still
reaches the worker (a poll already waiting at the server when polling stopped) is handed back at
once (:meth:`Drain.plugin`). A second SIGTERM or
SIGINT ends the process at once: every rg group it runs is killed, the :attr:`Drain.on_exit`
callbacks run (a dev stack's servers stop), and the process exits ``128 + signal``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.exceptions import ApplicationError, ApplicationErrorCategory
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

log = logging.getLogger(__name__)

DEFAULT_DRAIN_TIMEOUT = timedelta(seconds=25)
SIGNALS = (signal.SIGTERM, signal.SIGINT)
# What a call that reaches a draining worker fails with (retryable: Temporal brings it back
# after HANDED_BACK_AFTER, to the next worker of its queue).
DRAINING = "FS_SEARCH_WORKER_DRAINING"
HANDED_BACK_AFTER = timedelta(seconds=1)


@dataclass
class Drain:
    """One process's drain (see the module docstring).

    Args:
        timeout: how long running calls may take to finish after the first signal.
    """

    timeout: timedelta = DEFAULT_DRAIN_TIMEOUT
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    # Called on the event loop when the drain begins, with when (ISO 8601, UTC).
    on_drain: list[Callable[[str], None]] = field(default_factory=list)
    # Process groups to kill when a second signal ends the process (rg searches running).
    groups: list[Callable[[], list[int]]] = field(default_factory=list)
    # Called before a second signal ends the process (stop servers this process started).
    on_exit: list[Callable[[], None]] = field(default_factory=list)
    started: float | None = None
    handed_back: int = 0  # calls that reached the worker once draining, handed back

    def install(self) -> None:
        """Handle SIGTERM and SIGINT in the running loop."""
        loop = asyncio.get_running_loop()
        for sig in SIGNALS:
            loop.add_signal_handler(sig, self._signalled, sig)

    @property
    def draining(self) -> bool:
        """Whether the drain has begun."""
        return self.started is not None

    def begin(self, why: str = "asked") -> None:
        """Begin the drain (the first signal does this)."""
        if self.started is not None:
            return
        self.started = time.monotonic()
        since = datetime.now(UTC).isoformat(timespec="seconds")
        log.info(
            "%s: draining (no new call is taken; running calls have %g s to finish, then "
            "are cancelled and retried by Temporal; send it again to stop at once)",
            why,
            self.timeout.total_seconds(),
        )
        for callback in self.on_drain:
            try:
                callback(since)
            except Exception as e:  # noqa: BLE001 - the drain goes on whatever a watcher does
                log.warning("drain callback failed: %s", e)
        self.stop.set()

    def plugin(self) -> Any:
        """A Temporal plugin for the worker's client: every worker made from it hands back a
        call that reaches it once the drain has begun (a poll already waiting at the server
        when polling stopped may still deliver one): a retryable failure that Temporal
        retries after :data:`HANDED_BACK_AFTER`, on the next worker of the queue."""
        from temporalio.plugin import SimplePlugin

        return SimplePlugin("fs_search.drain", interceptors=[_Refuse(self)])

    def _signalled(self, sig: int) -> None:
        name = signal.Signals(sig).name
        if self.started is None:
            self.begin(name)
            return
        self.end_now(sig)

    def end_now(self, sig: int) -> None:
        """End the process at once: kill the rg groups, run :attr:`on_exit`, exit."""
        name = signal.Signals(sig).name
        killed = 0
        for groups in self.groups:
            for pgid in groups():
                try:
                    os.killpg(pgid, signal.SIGKILL)
                    killed += 1
                except OSError:
                    continue
        print(
            f"fs-search: {name} again: stopping at once ({killed} running searches killed)",
            file=sys.stderr,
            flush=True,
        )
        for callback in self.on_exit:
            try:
                callback()
            except Exception as e:  # noqa: BLE001 - leaving anyway
                print(f"fs-search: while stopping: {e}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(128 + sig)


class _Refuse(Interceptor):
    """Hands back every activity that starts once the drain has begun."""

    def __init__(self, drain: Drain) -> None:
        self.drain = drain

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _RefuseActivity(next, self.drain)


class _RefuseActivity(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, drain: Drain) -> None:
        super().__init__(next)
        self.drain = drain

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        if self.drain.draining:
            self.drain.handed_back += 1
            raise ApplicationError(
                "this fs-search worker is draining (shutting down): the call goes to the "
                "next worker of its queue",
                type=DRAINING,
                next_retry_delay=HANDED_BACK_AFTER,
                category=ApplicationErrorCategory.BENIGN,
            )
        return await self.next.execute_activity(input)
