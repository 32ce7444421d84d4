"""Failures the Nexus handler answers with carry no stack trace.

A handler's failures go to whoever called the endpoint: a workflow of another namespace, or
anyone who can reach the frontend's Nexus HTTP API, unauthenticated on a cluster without an
authorizer. The SDK's failure converter fills each failure's ``stack_trace`` (and each
cause's) from the Python traceback: install paths, module layout, the SDK's version. The
handler's worker converts failures with :class:`NoStackTraces` instead (:func:`quiet_client`):
the message, type and details stay, the traces go to the worker log only where they are
logged.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable

import temporalio.api.failure.v1
from temporalio.client import Client
from temporalio.converter import DefaultFailureConverter, PayloadConverter


class NoStackTraces(DefaultFailureConverter):
    """The default failure converter, with every stack trace of a failure (and of each of
    its causes) left empty."""

    def to_failure(
        self,
        exception: BaseException,
        payload_converter: PayloadConverter,
        failure: temporalio.api.failure.v1.Failure,
    ) -> None:
        """See :class:`DefaultFailureConverter`; then no stack trace anywhere."""
        super().to_failure(exception, payload_converter, failure)
        current: temporalio.api.failure.v1.Failure | None = failure
        for _ in range(64):  # a chain of causes is short; never loop on a cycle
            if current is None:
                break
            current.stack_trace = ""
            current = current.cause if current.HasField("cause") else None


def quiet_client(client: Client) -> Client:
    """``client`` again (same connection, namespace and plugins), converting failures with
    :class:`NoStackTraces`."""
    config = client.config()
    config["data_converter"] = dataclasses.replace(
        config["data_converter"], failure_converter_class=NoStackTraces
    )
    return Client(**config)


class ThinRepeats(logging.Filter):
    """Lets one record of each message through every ``every_s`` seconds, and says how many
    were held back since. The SDK logs a warning for every request a Nexus handler refuses
    ("Failed to execute Nexus start operation method"): a flood of them, beyond its caller's
    share, would flood the worker's log too."""

    def __init__(self, every_s: float = 10.0, clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self.every_s = every_s
        self._clock = clock
        self._seen: dict[str, tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether ``record`` is logged (a repeat within ``every_s`` is not)."""
        if record.levelno > logging.WARNING or not isinstance(record.msg, str):
            return True
        now = self._clock()
        last, held = self._seen.get(record.msg, (None, 0))
        if last is not None and now - last < self.every_s:
            self._seen[record.msg] = (last, held + 1)
            return False
        self._seen[record.msg] = (now, 0)
        if held:
            record.msg = f"{record.msg} ({held} more like it in the last {self.every_s:g} s)"
        if len(self._seen) > 256:
            self._seen.clear()
        return True


# The SDK's logger for Nexus handlers (temporalio.nexus.logger).
_THINNED = ThinRepeats()


def thin_sdk_nexus_warnings() -> None:
    """Thin the SDK's per-request Nexus warnings (:class:`ThinRepeats`); once per process."""
    sdk = logging.getLogger("temporalio.nexus")
    if _THINNED not in sdk.filters:
        sdk.addFilter(_THINNED)


__all__ = ["NoStackTraces", "ThinRepeats", "quiet_client", "thin_sdk_nexus_warnings"]
