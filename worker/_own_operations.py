"""The fs_search service's operations: each starts one activity, and a cancel reaches only
an activity the service started (docs/serving-other-namespaces.md, "Who may call").

The SDK's ``@temporal_operation`` handler inherits a generic ``cancel``: it decodes any
operation token and cancels what it names — a workflow of the search namespace, an activity
of any id, whatever namespace the token claims. Anyone who can reach the endpoint (any
namespace of an OSS cluster, an HTTP caller of the frontend) could cancel the search
namespace's workflows and activities with a token written by hand. :class:`ActivityOperation`
cancels only what this service's own ``start`` could have made: a token of an activity
(:func:`own_activity`) in the handler's namespace whose id follows the service's scheme for
the operation cancelled, and which the server describes as that operation's fs_search
activity, on an fs-search queue, carrying a Nexus completion callback (only an operation's
backing activity does: a one-off call of the same name has none). Anything else is refused
(``BAD_REQUEST``, not retried) and nothing is cancelled.

A real operation's token is a capability: whoever holds it (the caller's workflow history
shows it) may cancel that operation, as with any Nexus operation.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import nexusrpc
from nexusrpc.handler import CancelOperationContext
from temporalio import nexus
from temporalio.service import RPCError, RPCStatusCode

from fs_search.activities import (
    GLOB_ACTIVITY,
    GREP_ACTIVITY,
    HOST_QUEUE_PREFIX,
    READ_SPILL_ACTIVITY,
    TASK_QUEUE_PREFIX,
    TOOLS_ACTIVITY,
)
from fs_search.worker._caller_share import CallerShare, caller_of

log = logging.getLogger(__name__)

# The service's operations and the activity each starts (as FsSearchService names them).
ACTIVITY_OF_OPERATION = {
    "tools": TOOLS_ACTIVITY,
    "glob": GLOB_ACTIVITY,
    "grep": GREP_ACTIVITY,
    "read_spill": READ_SPILL_ACTIVITY,
}
_In = TypeVar("_In")
_Out = TypeVar("_Out")
# The SDK's token type of a standalone activity (temporalio.nexus OperationTokenType.ACTIVITY).
_ACTIVITY_TOKEN = 2
# A token is a few hundred bytes; anything much longer is not one of ours.
_MAX_TOKEN = 4096
Start = Callable[
    [nexus.TemporalStartOperationContext, nexus.TemporalNexusClient, Any],
    Awaitable[nexus.TemporalOperationResult[Any]],
]


def activity_id_for(operation: str, request_id: str) -> str:
    """The id of the activity backing a start of ``operation`` with the Nexus request id
    ``request_id`` (a retried start request finds the same activity)."""
    return f"fs-search-{operation}-{request_id}"


@dataclass(frozen=True)
class OwnActivity:
    """The activity a cancel's token names, as this service names its activities."""

    activity_id: str
    run_id: str


class NotOurs(Exception):
    """A cancel's token names nothing this service started (the reason, for the log)."""


def own_activity(token: str, *, operation: str, namespace: str) -> OwnActivity:
    """Pure: the activity ``token`` names, when it could be one this service started for
    ``operation`` in ``namespace``.

    Raises:
        NotOurs: not an activity token, another namespace, an id outside the service's
            scheme for ``operation``, no run id, or not a token at all.
    """
    if operation not in ACTIVITY_OF_OPERATION:
        raise NotOurs(f"unknown operation {operation[:100]!r}")
    if not token or len(token) > _MAX_TOKEN:
        raise NotOurs("no token, or too long to be one")
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        fields = json.loads(raw)
    except (binascii.Error, ValueError):
        raise NotOurs("not a base64url JSON token") from None
    if not isinstance(fields, dict):
        raise NotOurs("not a token object")
    if fields.get("t") != _ACTIVITY_TOKEN:
        raise NotOurs(f"token type {str(fields.get('t'))[:20]!r} is not an activity's")
    if fields.get("ns") != namespace:
        raise NotOurs("the token names another namespace")
    activity_id, run_id = fields.get("aid"), fields.get("rid")
    prefix = activity_id_for(operation, "")
    if (
        not isinstance(activity_id, str)
        or not activity_id.startswith(prefix)
        or len(activity_id) == len(prefix)
        or re.search(r"[\x00-\x1f\x7f]", activity_id)
    ):
        raise NotOurs("the activity id is not one this service gives its operations")
    if not isinstance(run_id, str) or not run_id:
        raise NotOurs("the token names no run")
    return OwnActivity(activity_id, run_id)


def refused(reason: str) -> nexusrpc.HandlerError:
    """The answer to a cancel naming nothing of ours (not retried)."""
    return nexusrpc.HandlerError(
        "the operation token names no operation of the fs_search service",
        type=nexusrpc.HandlerErrorType.BAD_REQUEST,
        retryable_override=False,
    )


class ActivityOperation(nexus.TemporalOperationHandler[_In, _Out], Generic[_In, _Out]):
    """One operation of the service: ``start`` starts its activity; ``cancel`` cancels only
    an activity the service started for this operation (module docstring).

    Args:
        operation: the operation's name (``grep``...).
        start: what a start does (the handler's method).
        callers: the callers' shares of the handler (the service's one).
    """

    def __init__(self, operation: str, start: Start, callers: CallerShare | None = None) -> None:
        self.operation = operation
        self._start = start
        self._callers = callers or CallerShare()

    async def start_operation(
        self,
        ctx: nexus.TemporalStartOperationContext,
        client: nexus.TemporalNexusClient,
        input: _In,
    ) -> nexus.TemporalOperationResult[_Out]:
        """Start the operation's activity (the handler's start method), within its caller's
        share of the handler (``RESOURCE_EXHAUSTED``, retried by the caller's server, beyond
        it)."""
        with self._callers.admitted(caller_of(ctx.inbound_links)):
            return await self._start(ctx, client, input)

    async def cancel(self, ctx: CancelOperationContext, token: str) -> None:
        """Cancel the activity ``token`` names, if this service started it for this
        operation; refuse anything else (nothing is cancelled)."""
        temporal = nexus.client()
        try:
            target = own_activity(token, operation=ctx.operation, namespace=temporal.namespace)
        except NotOurs as e:
            log.warning("refused a cancel of operation %r: %s", ctx.operation[:100], e)
            raise refused(str(e)) from None
        handle = temporal.get_activity_handle(target.activity_id, run_id=target.run_id)
        try:
            described = await handle.describe()
        except RPCError as e:
            if e.status == RPCStatusCode.NOT_FOUND:
                log.warning("refused a cancel of operation %r: no such activity", ctx.operation)
                raise refused("no such activity") from None
            raise
        queue = described.task_queue
        if (
            described.activity_type != ACTIVITY_OF_OPERATION[ctx.operation]
            or not queue.startswith((TASK_QUEUE_PREFIX, HOST_QUEUE_PREFIX))
            or not described.raw_callbacks
        ):
            log.warning(
                "refused a cancel of operation %r: activity %r is not one of its operations'",
                ctx.operation,
                target.activity_id[:200],
            )
            raise refused("not an operation's activity")
        await handle.cancel()


__all__ = ["ActivityOperation", "NotOurs", "activity_id_for", "own_activity"]
