"""A workspace's spills: each over-cap result saved to the spill store, traced, never failing
a search (a store that fails or is slow leaves the inline page and ``spill_error``)."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import socket

from opentelemetry.trace import Status, StatusCode

from fs_search.activities import results
from fs_search.activities._budget import SAVE_MARGIN_S, SAVE_TIMEOUT_S, window_s
from fs_search.activities._contract import SpillRef
from fs_search.activities._progress import Progress, time_left
from fs_search.activities._telemetry import SearchTelemetry
from fs_search.activities.storage._keys import UNNAMED_WORKSPACE, SpillFailed, spill_key
from fs_search.activities.storage._payloads import budget_left
from fs_search.activities.storage._storage import Storage

log = logging.getLogger(__name__)

# spill_error when the attempt had no time left to try the store at all.
NO_TIME_TO_SAVE = "no time was left in the call to save it"


# SearchTelemetry's workspace_id when the activities were given none.
UNLABELLED = "unknown"


class Spills:
    """One workspace's spills: over-cap results saved to the spill store, traced.

    Args:
        storage: where artifacts (and payloads) go.
        telemetry: spans of the saves.
        workspace: the workspace the artifacts belong to (``spill_workspace``): the first
            segment of every key, which read_spill checks.
    """

    def __init__(self, storage: Storage, telemetry: SearchTelemetry, *, workspace: str) -> None:
        self.store = storage.spill_store
        self.telemetry = telemetry
        self.workspace = workspace

    async def save(
        self,
        tool: str,
        progress: Progress,
        text: str | bytes | bytearray,
        *,
        owner: str | None = None,
    ) -> tuple[SpillRef | None, str | None, results.SpillNote]:
        """Save the complete result; a failing store is reported, never raised.

        ``owner``: whose artifact it is (``directory_owner``: the workspace and the directory
        the call ran in); default the one these spills were made for.

        Bounded by what the call's budget has left (at least ``SAVE_FLOOR_S``), by the
        running attempt's deadline (less ``SAVE_MARGIN_S``, for the page and the result),
        and by ``SAVE_TIMEOUT_S`` (the budget model's): a slow store costs the spill, never
        the search, and never much more than the call's budget."""
        progress.phase = "spill"
        with self.telemetry.span(
            "fs_search.spill", **{"fs_search.spill.backend": self.store.backend}
        ) as span:
            ref, error = None, None
            limit = window_s(
                time_left(),
                cap_s=SAVE_TIMEOUT_S,
                margin_s=SAVE_MARGIN_S,
                budget_left_s=budget_left(progress.budget_ends()),
            )
            span.set_attribute("fs_search.spill.window_s", max(0.0, limit))
            try:
                span.set_attribute("fs_search.spill.bytes", utf8_length(text))
                if limit <= 0:
                    raise SpillFailed(NO_TIME_TO_SAVE)
                async with asyncio.timeout(limit):
                    ref = await self.store.save(spill_key(tool, owner or self.workspace), text)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - any store failure degrades to spill_error
                error = _in_our_words(e)
                # The details (endpoint, key, path, the store's own words) are for the log only.
                cause = e.__cause__ or e
                log.warning(
                    "spill to %s failed (%s): %s: %s",
                    self.store.describe(),
                    error,
                    type(cause).__name__,
                    cause,
                    exc_info=not isinstance(e, (SpillFailed, TimeoutError)),  # a bug: trace it
                )
                span.set_status(Status(StatusCode.ERROR, error))
            span.set_attribute("fs_search.spill.success", ref is not None)
            self.telemetry.record_spill(store=self.store.backend, ok=ref is not None)
        note = results.SpillNote(
            locator=ref.locator if ref else None, hint=ref.hint if ref else None, error=error
        )
        return ref, error, note


def _in_our_words(error: Exception) -> str:
    """spill_error: what failed, never an endpoint, key, path or exception text."""
    if isinstance(error, SpillFailed):
        return str(error)
    if isinstance(error, TimeoutError):
        return "the spill store did not answer in time"
    return "the spill store failed"


_SLICE = 1 << 20


def utf8_length(text: str | bytes | bytearray) -> int:
    """``len(text.encode())`` without a second copy of a large text in memory (bytes: UTF-8
    already)."""
    if not isinstance(text, str) or text.isascii():
        return len(text)
    return sum(
        len(text[i : i + _SLICE].encode("utf-8", "replace")) for i in range(0, len(text), _SLICE)
    )


def spill_workspace(workspace_id: str, root: str | os.PathLike[str]) -> str:
    """The workspace the artifacts of activities built for ``workspace_id`` over ``root``
    belong to.

    The id itself when the activities were given one. Without one (telemetry's ``unknown``,
    or empty): ``_unnamed-<digest of the host name and the root's real path>``, never a valid
    workspace id (those start with a letter or digit), the same for every worker of that
    directory on this host and different for any other directory, so two unnamed workspaces
    sharing a store do not read each other's artifacts.
    """
    if workspace_id and workspace_id != UNLABELLED:
        return workspace_id
    where = f"{socket.gethostname()}:{os.path.realpath(root)}"
    return f"{UNNAMED_WORKSPACE}-{hashlib.sha256(where.encode()).hexdigest()[:16]}"
