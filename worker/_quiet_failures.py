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


__all__ = ["NoStackTraces", "quiet_client"]
