"""Each caller namespace's share of the fs_search handler (docs/serving-other-namespaces.md,
"One caller cannot starve the others").

An endpoint is shared by every namespace that calls it, and its handler by every call: one
caller's flood of operations took the handler's slots (starting them one after another) and
its queue checks (each a ``DescribeTaskQueue``), and every other caller's call waited behind
it. :class:`CallerShare` keeps each caller to its share:

* **Starts.** A caller may have at most ``(slots - reserve) / callers`` starts in the handler
  at once (at least one), ``callers`` being those with a start in it now, this one included:
  alone it may use all but ``reserve`` of the slots, and a caller with nothing in the
  handler always finds a slot free. A start beyond its share is answered at once with a
  retryable ``RESOURCE_EXHAUSTED``: the caller's Temporal server tries it again after its
  back-off (from 1 s), and the slot is free for others meanwhile.
* **Start rate.** A caller may start at most :data:`STARTS_PER_SECOND` operations a
  second in this process (bursts of :data:`STARTS_BURST`); beyond that, the same answer.
  Each start is an activity and, when it ends, a completion callback through the caller's
  and the search namespace's Temporal server: a caller cycling hundreds of short operations
  a second filled the server's queue of callbacks, and every other caller's result waited
  behind them (seconds to minutes on a dev server), however fast the handler answered.
* **Queue checks.** Each caller may have the handler ask Temporal who polls a queue
  (``check_queue``) at most :data:`CHECKS_PER_SECOND` times a second (bursts of
  :data:`CHECKS_BURST`), within the process-wide limiter; a check beyond that, or while the
  limiter is busy, is not waited for: the same ``RESOURCE_EXHAUSTED``, asked again after the
  back-off (never started unchecked: a flood of checks on made-up workspaces would become as
  many activities and completion callbacks in the server's queues).

Who the caller is: the namespace of the link its Temporal server attaches to the request
(``temporal:///namespaces/<caller>/workflows/...``, the calling workflow's event); a request
with no such link (one sent to the frontend's Nexus HTTP API directly) counts as one caller,
``""``. A workflow can set that link itself through its operation's headers unless the server
refuses the header (docs: ``component.nexusoperations.disallowedHeaders``): a caller posing
as many namespaces gets many shares, each smaller as they grow, and every other caller keeps
its own (at least one start at a time, and its own checks).
"""

from __future__ import annotations

import collections
import contextlib
import re
from collections.abc import Iterator, Sequence
from urllib.parse import unquote

import nexusrpc

from fs_search.worker._queue_owner import RateLimit

# The handler's Nexus slots (the worker's max_concurrent_nexus_tasks; the SDK's default).
NEXUS_SLOTS = 100
STARTS_PER_SECOND = 20.0
STARTS_BURST = 40
CHECKS_PER_SECOND = 2.0
CHECKS_BURST = 4
# Callers whose check budgets are remembered (the least recently seen forgotten first).
MAX_CALLERS = 4096
_LINK = re.compile(r"temporal:///namespaces/([^/?#]{1,1024})/")


def caller_of(links: Sequence[nexusrpc.Link]) -> str:
    """Pure: the caller namespace a start request's links name ("" when none does)."""
    for link in links:
        found = _LINK.match(link.url or "")
        if found:
            return unquote(found.group(1))[:255]
    return ""


def busy() -> nexusrpc.HandlerError:
    """The answer to a start beyond its caller's share: tried again by the caller's server."""
    return nexusrpc.HandlerError(
        "the fs_search service is busy with this caller's other calls; the call is tried again",
        type=nexusrpc.HandlerErrorType.RESOURCE_EXHAUSTED,
        retryable_override=True,
    )


class CallerShare:
    """The handler's starts and queue checks, shared between caller namespaces (module
    docstring).

    Args:
        slots: the handler's Nexus slots.
        reserve: slots no caller may take while others have none (default a quarter).
    """

    def __init__(self, slots: int = NEXUS_SLOTS, *, reserve: int | None = None) -> None:
        self.slots = slots
        self.reserve = max(1, slots // 4) if reserve is None else reserve
        self._held: collections.Counter[str] = collections.Counter()
        self._checks: collections.OrderedDict[str, RateLimit] = collections.OrderedDict()
        self._starts: collections.OrderedDict[str, RateLimit] = collections.OrderedDict()
        self.refused = 0  # starts answered RESOURCE_EXHAUSTED so far

    def share(self, caller: str) -> int:
        """Starts ``caller`` may have in the handler at once now."""
        callers = len(self._held) + (caller not in self._held)
        return max(1, (self.slots - self.reserve) // callers)

    def held(self, caller: str) -> int:
        """Starts of ``caller`` in the handler now."""
        return self._held.get(caller, 0)

    @contextlib.contextmanager
    def admitted(self, caller: str) -> Iterator[None]:
        """Count one start of ``caller`` while the block runs.

        Raises:
            nexusrpc.HandlerError: RESOURCE_EXHAUSTED (retryable) beyond its share.
        """
        if (
            self.held(caller) >= self.share(caller)
            or not _budget(self._starts, caller, STARTS_PER_SECOND, STARTS_BURST).try_take()
        ):
            self.refused += 1
            raise busy()
        self._held[caller] += 1
        try:
            yield
        finally:
            self._held[caller] -= 1
            if self._held[caller] <= 0:
                del self._held[caller]

    def checks(self, caller: str) -> RateLimit:
        """``caller``'s budget of queue checks."""
        return _budget(self._checks, caller, CHECKS_PER_SECOND, CHECKS_BURST)


def _budget(
    budgets: collections.OrderedDict[str, RateLimit], caller: str, rate: float, burst: int
) -> RateLimit:
    """``caller``'s limiter in ``budgets`` (made on first use; the least recently used
    forgotten past :data:`MAX_CALLERS`)."""
    budget = budgets.get(caller)
    if budget is None:
        budget = budgets[caller] = RateLimit(rate, burst)
        while len(budgets) > MAX_CALLERS:
            budgets.popitem(last=False)
    else:
        budgets.move_to_end(caller)
    return budget


__all__ = ["NEXUS_SLOTS", "CallerShare", "busy", "caller_of"]
