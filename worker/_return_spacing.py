"""pure: when a call a host queue hands back should come back (no I/O; the caller passes
the time).

A workspace at its share of a host queue has its next calls handed back (``WORKSPACE_BUSY``)
to wait in Temporal. Each came back after the same pause before, so a flood of N calls
cycled through the host queue N times every pause — one hand-back each, dozens a second —
and that churn (a poll, a failed activity, workflow tasks and a timer each) slowed every
other workspace's calls through the same Temporal server and host.

:class:`ReturnSpacing` spaces them instead: a workspace's handed-back calls are told to come
back one after another, as often as its calls end (a held call that ends is a place in its
share come free), never sooner than ``first`` and never later than ``longest``. A flood's
calls then reach the host queue about as often as it can take them, so the churn is about
one hand-back per call the workspace runs (while its backlog fits in ``longest``; a larger
one comes back spread evenly over the pauses, each call once per ``longest``), and its
throughput is unchanged. State is kept only for workspaces that hold calls (the router
forgets the rest).

Who brings a handed-back call back (``retried_by_server``), the bounds of the pauses and the
caller's side of the rule are the hand-back rule's one home, ``activities/_attempts.py``; this
module is the host's spacing of the pauses it asks for, within those bounds.
"""

from __future__ import annotations

from dataclasses import dataclass

from fs_search.activities import MAX_HANDED_BACK_PAUSE, MIN_HANDED_BACK_PAUSE

# How much a newly measured interval between a workspace's ended calls moves the estimate.
WEIGHT = 0.3
# Spreads the pauses of calls beyond the longest evenly (the fractional parts of n x this).
_GOLDEN = 0.6180339887498949


@dataclass
class _Workspace:
    spacing: float  # seconds between two of its calls coming back (its calls' end rate)
    next_free: float  # when its next handed-back call should come back
    last_end: float | None = None
    beyond: int = 0  # calls told to come back later than the longest pause allows


@dataclass
class ReturnSpacing:
    """Return times for one host's handed-back calls, per workspace.

    Args:
        first: the shortest pause (s): a call handed back comes back no sooner.
        longest: the longest pause (s) it is told.
        fastest: the shortest spacing (s) between two returns of one workspace.
        slowest: the longest spacing (s).
        initial: the spacing before two of a workspace's calls have ended.
    """

    first: float = MIN_HANDED_BACK_PAUSE.total_seconds()
    longest: float = MAX_HANDED_BACK_PAUSE.total_seconds()
    fastest: float = 0.05
    slowest: float = 2.0
    initial: float = 0.2

    def __post_init__(self) -> None:
        self._state: dict[str, _Workspace] = {}

    def pause(self, workspace_id: str, now: float) -> float:
        """How long (s) a call of ``workspace_id`` handed back at ``now`` should wait."""
        state = self._state.get(workspace_id)
        if state is None:
            state = self._state[workspace_id] = _Workspace(self.initial, now)
        at = max(now + self.first, state.next_free)
        if at <= now + self.longest:
            state.next_free = at + state.spacing
            return at - now
        # Beyond the longest pause: anywhere in the pauses, evenly (not all at the longest).
        state.beyond += 1
        return self.first + (state.beyond * _GOLDEN % 1.0) * (self.longest - self.first)

    def ended(self, workspace_id: str, now: float) -> None:
        """A held call of ``workspace_id`` ended at ``now`` (its calls' end rate is the spacing)."""
        state = self._state.get(workspace_id)
        if state is None:
            return
        if state.last_end is not None:
            interval = min(max(now - state.last_end, self.fastest), self.slowest)
            state.spacing += WEIGHT * (interval - state.spacing)
        state.last_end = now

    def forget(self, workspace_id: str) -> None:
        """``workspace_id`` holds no calls now: nothing of it is kept."""
        self._state.pop(workspace_id, None)

    def __len__(self) -> int:
        return len(self._state)
