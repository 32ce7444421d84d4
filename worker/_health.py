"""Liveness and readiness of a worker process (``/livez``, ``/readyz``).

Readiness has three checks, each ``"ok"`` or the reason it fails, refreshed in the background
so that a probe is answered at once from what is known (never waiting on Temporal, rg or the
store itself):

* ``temporal``: the worker polls (its workers started) and the server answers
  (``GetSystemInfo``, every :data:`TEMPORAL_EVERY_S`, at most :data:`TEMPORAL_TIMEOUT_S`);
* ``rg``: ``rg --version`` runs through the executor, in the sandbox every search runs in
  (every :data:`RG_EVERY_S`);
* ``store``: the spill store answers its check (every :data:`STORE_EVERY_S`).

From the first moment of a drain a fourth, ``drain``, fails. Liveness is the event loop
answering (the HTTP server runs on it: a blocked loop answers nothing, and the probe times
out) and the rg launcher: a fork server that cannot be started again means no search can run.
Temporal or the store being away leaves the worker alive: it reconnects by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta

from temporalio.api.workflowservice.v1 import GetSystemInfoRequest
from temporalio.client import Client

from fs_search.activities import SearchError
from fs_search.activities.rg import Executor, for_probe
from fs_search.activities.storage import Storage

log = logging.getLogger(__name__)

TEMPORAL_EVERY_S = 2.0
TEMPORAL_TIMEOUT_S = 3.0
RG_EVERY_S = 30.0
RG_TIMEOUT_S = 10.0
STORE_EVERY_S = 30.0
STORE_TIMEOUT_S = 5.0
OK = "ok"
# The executor's running slots are shared with the searches: the probe takes its turn.
PROBE_KEY = "fs-search:readiness"
# What a check says before it knows (not logged: a worker starting up).
NOT_CONNECTED = "not connected yet"
NOT_POLLING = "connected, not polling yet"
NOT_CHECKED = "not checked yet"
PENDING = frozenset({NOT_CONNECTED, NOT_POLLING, NOT_CHECKED})


@dataclass
class Health:
    """What the probes answer (see the module docstring). The worker sets what it learns:
    :meth:`polling` once its workers poll, :meth:`draining` on SIGTERM."""

    client: Client | None = None
    executor: Executor | None = None
    rg_path: str | None = None
    rg_reason: str | None = None  # why there is no rg, from the start-up probe
    storage: Storage | None = None
    checks: dict[str, str] = field(
        default_factory=lambda: {
            "temporal": NOT_CONNECTED,
            "rg": NOT_CHECKED,
            "store": NOT_CHECKED,
        }
    )
    drain: str = OK
    started_polling: bool = False
    launcher: str = OK
    _answering: bool = False  # the server answered the last check
    _failing: set[str] = field(default_factory=set)

    def polling(self) -> None:
        """The worker's Temporal workers have started polling."""
        self.started_polling = True
        if self._answering:
            self._set("temporal", OK)

    def draining(self, since: str) -> None:
        """A drain began: not ready from now on."""
        self.drain = f"draining since {since}: running calls finish, no new one is taken"

    def readiness(self) -> tuple[bool, dict[str, str]]:
        """(ready, each check's state) now."""
        checks = {**self.checks, "drain": self.drain}
        return all(v == OK for v in checks.values()), checks

    def liveness(self) -> tuple[bool, dict[str, str]]:
        """(alive, each check's state) now; asked on the event loop, so it answered."""
        checks = {"event_loop": OK, "rg_launcher": self.launcher}
        return all(v == OK for v in checks.values()), checks

    @contextlib.asynccontextmanager
    async def checking(self) -> AsyncIterator[Health]:
        """Refresh the checks in the background while open."""
        tasks = [
            asyncio.create_task(_every(TEMPORAL_EVERY_S, self._check_temporal)),
            asyncio.create_task(_every(RG_EVERY_S, self._check_rg)),
            asyncio.create_task(_every(STORE_EVERY_S, self._check_store)),
        ]
        try:
            yield self
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def _set(self, check: str, state: str) -> None:
        """A check's new state, logged when it turns bad, and when it is ok again."""
        before = self.checks.get(check)
        self.checks[check] = state
        if state == before or state in PENDING:
            return
        if state != OK:
            self._failing.add(check)
            log.warning("readiness: %s: %s", check, state)
        elif check in self._failing:
            self._failing.discard(check)
            log.info("readiness: %s is ok again", check)

    async def _check_temporal(self) -> bool:
        if self.client is None:
            return False
        try:
            await self.client.workflow_service.get_system_info(
                GetSystemInfoRequest(),
                retry=False,
                timeout=timedelta(seconds=TEMPORAL_TIMEOUT_S),
            )
        except Exception as e:  # noqa: BLE001 - any failure: the server is not answering
            self._answering = False
            self._set("temporal", f"the Temporal server does not answer ({_short(e)})")
            return True
        self._answering = True
        self._set("temporal", OK if self.started_polling else NOT_POLLING)
        return True

    async def _check_rg(self) -> bool:
        if self.executor is None:
            return False
        if self.rg_path is None:
            self._set("rg", self.rg_reason or "ripgrep is not available on this worker")
            return True
        slots = self.executor.running_slots
        if slots is not None and slots.busy(PROBE_KEY):
            return True  # every running slot is taken by searches: look again next time
        try:
            run = await self.executor.run(
                for_probe(rg=self.rg_path),
                cwd="/",
                timeout_s=RG_TIMEOUT_S,
                max_stdout=64 * 1024,
                key=PROBE_KEY,
            )
        except SearchError as e:
            self._set("rg", f"rg does not run in the sandbox: {e.message}")
            self._launcher_after_failure()
            return True
        if run.returncode != 0:
            self._set("rg", f"rg --version failed in the sandbox (exit {run.returncode})")
            return True
        self._set("rg", OK)
        self.launcher = OK
        return True

    def _launcher_after_failure(self) -> None:
        """The probe could not start rg: the launcher is broken when there is one and it is
        not running (the probe would have started it again)."""
        server = self.executor.fork_server if self.executor is not None else None
        if server is not None and server.pid is None:
            self.launcher = "the rg fork server cannot be started"

    async def _check_store(self) -> bool:
        if self.storage is None:
            return False
        store = self.storage.spill_store
        try:
            async with asyncio.timeout(STORE_TIMEOUT_S):
                await store.check()
        except TimeoutError:
            self._set("store", f"the spill store does not answer within {STORE_TIMEOUT_S:g} s")
            return True
        except Exception as e:  # noqa: BLE001 - any failure: not usable now
            self._set("store", f"the spill store is not usable ({_short(e)})")
            return True
        self._set("store", OK)
        return True


async def _every(interval: float, check: Callable[[], Awaitable[bool]]) -> None:
    """Run ``check`` every ``interval`` seconds; soon again while it has nothing to check
    (returns False: what it checks is not known yet)."""
    while True:
        started = time.monotonic()
        try:
            checked = await check()
        except Exception as e:  # noqa: BLE001 - a check must never stop checking
            log.warning("readiness check failed unexpectedly: %s", e)
            checked = True
        wait = interval if checked else 0.2
        await asyncio.sleep(max(0.1, wait - (time.monotonic() - started)))


def _short(error: BaseException) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    name = type(error).__name__
    return f"{name}: {text[:160]}" if text else name
