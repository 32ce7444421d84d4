"""Saving complete results: spills that never fail a search, and the payload-store check."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import socket

from opentelemetry.trace import Status, StatusCode

from fs_search.activities import results
from fs_search.activities.budget import SAVE_MARGIN_S, window_s
from fs_search.activities.contract import SpillRef
from fs_search.activities.progress import Progress, time_left
from fs_search.activities.storage._attempt import (
    budget_left,
    keep_budget,
    payload_failure,
    reason_of,
)
from fs_search.activities.storage._keys import UNNAMED_WORKSPACE, SpillFailed, spill_key
from fs_search.activities.storage._storage import Storage
from fs_search.activities.telemetry import SearchTelemetry

log = logging.getLogger(__name__)

# A spill (or a payload-store check) that takes longer than this is given up on, and one
# that would outlast the call's budget (by more than SAVE_FLOOR_S) or end within
# SAVE_MARGIN_S of the attempt's deadline sooner: the inline page is returned (the check
# fails the call once).
SPILL_TIMEOUT_S = 15.0
# spill_error when the attempt had no time left to try the store at all.
NO_TIME_TO_SAVE = "no time was left in the call to save it"


# SearchTelemetry's workspace_id when the activities were given none.
UNLABELLED = "unknown"


class Saver:
    """Saves over-cap results as spill artifacts, traced, and checks the payload store.

    Args:
        storage: where artifacts (and payloads) go.
        telemetry: spans of the saves.
        workspace: the workspace the artifacts belong to (``spill_workspace``): the first
            segment of every key, which read_spill checks.
    """

    def __init__(self, storage: Storage, telemetry: SearchTelemetry, *, workspace: str) -> None:
        self.storage = storage
        self.store = storage.artifacts
        self.telemetry = telemetry
        self.workspace = workspace

    async def spill(
        self,
        tool: str,
        progress: Progress,
        text: str | bytes | bytearray,
        *,
        owner: str | None = None,
    ) -> tuple[SpillRef | None, str | None, results.SpillNote]:
        """Save the complete result; a failing store is reported, never raised.

        ``owner``: whose artifact it is (``directory_owner``: the workspace and the directory
        the call ran in); default the Saver's ``workspace``.

        Bounded by what the call's budget has left (at least ``SAVE_FLOOR_S``), by the
        running attempt's deadline (less :data:`SAVE_MARGIN_S`, for the page and the
        result), and by :data:`SPILL_TIMEOUT_S`: a slow store costs the spill, never the
        search, and never much more than the call's budget."""
        progress.phase = "spill"
        with self.telemetry.span(
            "fs_search.spill", **{"fs_search.spill.backend": self.store.backend}
        ) as span:
            ref, error = None, None
            limit = window_s(
                time_left(),
                cap_s=SPILL_TIMEOUT_S,
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
        note = results.SpillNote(
            locator=ref.locator if ref else None, hint=ref.hint if ref else None, error=error
        )
        return ref, error, note

    async def ready_for(self, estimate: int, progress: Progress) -> None:
        """Fail once, clearly, when a large result would need a store that is down or full.

        A result over the payload threshold crosses Temporal through external storage; if
        that store is unreachable or has no room for it, the SDK's upload would fail after
        the activity returned. The check is bounded like a spill; with no time left for it,
        the upload itself is bounded by the attempt and fails as clearly
        (``storage.attempt.storing_payload``). The call's budget end is kept for that
        upload, which runs after the activity returned.
        """
        ends = progress.budget_ends()
        keep_budget(ends)
        if estimate < self.storage.payload_threshold:
            return
        payloads = self.storage.payloads
        limit = window_s(
            time_left(),
            cap_s=SPILL_TIMEOUT_S,
            margin_s=SAVE_MARGIN_S,
            budget_left_s=budget_left(ends),
        )
        if limit <= 0:
            return
        try:
            async with asyncio.timeout(limit):
                await payloads.check(estimate)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001
            log.warning(
                "payload store %s cannot take a result of about %d bytes: %s: %s",
                payloads.describe(),
                estimate,
                type(e).__name__,
                e,
            )
            raise payload_failure(estimate, reason_of(e)) from e


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
