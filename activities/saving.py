"""Saving complete results: spills that never fail a search, and the payload-store check."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import socket

from opentelemetry.trace import Status, StatusCode
from temporalio import activity

from fs_search.activities import render
from fs_search.activities.errors import SearchError
from fs_search.activities.models import ErrorCode, SpillRef
from fs_search.activities.progress import Progress
from fs_search.activities.storage import SpillFailed, SpillKey, Storage
from fs_search.activities.storage.keys import UNNAMED_WORKSPACE
from fs_search.activities.telemetry import SearchTelemetry

log = logging.getLogger(__name__)

# A spill that takes longer than this is given up on: the inline page is returned.
SPILL_TIMEOUT_S = 15.0


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
        self, tool: str, progress: Progress, text: str
    ) -> tuple[SpillRef | None, str | None, render.SpillNote]:
        """Save the complete result; a failing store is reported, never raised."""
        progress.phase = "spill"
        with self.telemetry.span(
            "fs_search.spill", **{"fs_search.spill.backend": self.store.backend}
        ) as span:
            ref, error = None, None
            try:
                span.set_attribute("fs_search.spill.bytes", utf8_length(text))
                async with asyncio.timeout(SPILL_TIMEOUT_S):
                    ref = await self.store.save(spill_key(tool, self.workspace), text)
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
        note = render.SpillNote(
            locator=ref.locator if ref else None, hint=ref.hint if ref else None, error=error
        )
        return ref, error, note

    async def ready_for(self, estimate: int) -> None:
        """Fail once, clearly, when a large result would need a store that is down.

        A result over the payload threshold crosses Temporal through external storage; if
        that store is unreachable the SDK's upload would fail after the activity returned,
        and the call would be retried for nothing.
        """
        if estimate < self.storage.payload_threshold:
            return
        payloads = self.storage.payloads
        try:
            async with asyncio.timeout(SPILL_TIMEOUT_S):
                await payloads.check()
        except Exception as e:  # noqa: BLE001
            log.warning(
                "payload store %s is unavailable: %s: %s",
                payloads.describe(),
                type(e).__name__,
                e,
            )
            raise SearchError(
                ErrorCode.SEARCH_FAILED,
                f"the result (about {estimate} bytes) is too large to return inline and the "
                "payload store is unavailable; retry later, or search with spill enabled",
            ) from e


def _in_our_words(error: Exception) -> str:
    """spill_error: what failed, never an endpoint, key, path or exception text."""
    if isinstance(error, SpillFailed):
        return str(error)
    if isinstance(error, TimeoutError):
        return f"the spill store did not answer within {SPILL_TIMEOUT_S:.0f} s"
    return "the spill store failed"


_SLICE = 1 << 20


def utf8_length(text: str) -> int:
    """``len(text.encode())`` without a second copy of a large text in memory."""
    if text.isascii():
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


def spill_key(tool: str, workspace: str) -> SpillKey:
    """The running activity's artifact key: workspace + workflow run + activity id + tool."""
    info = activity.info()
    if info.workflow_id is not None:
        return SpillKey(
            workflow_id=info.workflow_id,
            run_id=info.workflow_run_id or "null",
            activity_id=info.activity_id,
            tool=tool,
            workspace=workspace,
        )
    return SpillKey(
        workflow_id="standalone",
        run_id=info.activity_run_id or "null",
        activity_id=info.activity_id,
        tool=tool,
        workspace=workspace,
    )
