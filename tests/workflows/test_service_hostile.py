"""Hostile callers of the fs_search endpoint (issue 47): cancels with hand-written operation
tokens, and what a failed request tells an unauthenticated caller.

Through the real endpoint of a dev server with two namespaces (the session's ``service``):
requests go to the frontend's Nexus HTTP API, as anyone who can reach it may send them, and
from a caller namespace's workflow.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import urllib.error
import urllib.request
import uuid
from datetime import timedelta
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.operatorservice.v1 import ListNexusEndpointsRequest
from temporalio.client import ActivityExecutionStatus, Client
from temporalio.worker import Worker

from tests.procs import wait_until
from tests.workflows_under_test import Calls, CallsWorkflow, Options


def _token(**fields: Any) -> str:
    raw = json.dumps(fields, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _post(url: str, body: bytes = b"", headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, data=body, headers=headers or {}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


async def _service_url(service) -> str:
    """The endpoint's fs_search service on the frontend's Nexus HTTP API."""
    found = await service.search.operator_service.list_nexus_endpoints(
        ListNexusEndpointsRequest(name=service.endpoint)
    )
    (endpoint,) = found.endpoints
    return f"{service.server.http_url}/nexus/endpoints/{endpoint.id}/services/fs_search"


async def _cancel(url: str, operation: str, token: str) -> tuple[int, str]:
    return await asyncio.to_thread(
        _post, f"{url}/{operation}/cancel", headers={"Nexus-Operation-Token": token}
    )


async def _cancel_requested(client: Client, workflow_id: str) -> bool:
    events = client.get_workflow_handle(workflow_id).fetch_history_events()
    types = [e.event_type async for e in events]
    return EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED in types


async def test_a_cancel_naming_a_workflow_of_the_search_namespace_is_refused(service):
    """A workflow token ({"t": 1, "ns": <search namespace>, "wid": ...}) written by hand: the
    handler refuses it (400) and the workflow is not cancelled; the same for the token of a
    standalone activity of that namespace the handler did not start (a one-off call's id
    scheme included), for one naming another namespace, and for anything not a token."""
    url = await _service_url(service)
    victim = await service.search.start_workflow(
        "SomeoneElsesWorkflow", id=f"victim-{uuid.uuid4()}", task_queue=f"nobody-{uuid.uuid4()}"
    )
    others = [
        await service.search.start_activity(
            "fs_search.grep",
            {"pattern": "x"},
            id=activity_id,
            task_queue=f"fs-search/nobody-{uuid.uuid4().hex[:8]}",
            start_to_close_timeout=timedelta(minutes=5),
        )
        for activity_id in (f"fs-search-grep-{uuid.uuid4()}", f"someone-{uuid.uuid4()}")
    ]
    tokens = [
        _token(t=1, ns="fs-search", wid=victim.id),
        _token(t=1, ns="fs-search", wid=victim.id, rid=victim.result_run_id),
        *(_token(t=2, ns="fs-search", aid=a.id, rid=a.run_id) for a in others),
        _token(t=2, ns="agents", aid=others[0].id, rid=others[0].run_id),
        _token(t=3, ns="fs-search", wid=victim.id, uid="u", rid=victim.result_run_id),
        "not-a-token",
    ]
    answers = [await _cancel(url, "grep", token) for token in tokens]
    await asyncio.sleep(0.5)
    assert [code for code, _ in answers] == [400] * len(tokens), answers
    assert all("names no operation of the fs_search service" in body for _, body in answers)
    assert not await _cancel_requested(service.search, victim.id)
    assert (await victim.describe()).status.name == "RUNNING"
    for activity in others:
        described = await activity.describe()
        assert described.status == ActivityExecutionStatus.RUNNING
        assert not described.canceled_reason
    await victim.terminate()
    for activity in others:
        await activity.terminate()


async def test_only_the_operation_that_started_an_activity_cancels_it(service):
    """A real operation's token (read from the caller's history) cancels its activity only
    as that operation: the same token sent as another operation is refused; as its own it
    is accepted (202) and the backing activity is cancelled."""
    url = await _service_url(service)
    wsid = f"nobody-{uuid.uuid4().hex[:8]}"
    options = Options(workspace_id=wsid, endpoint=service.endpoint, schedule_to_start_ms=120_000)
    queue = f"wf-{uuid.uuid4()}"
    async with Worker(service.caller, task_queue=queue, workflows=[CallsWorkflow]):
        handle = await service.caller.start_workflow(
            CallsWorkflow.run,
            Calls(options=options, calls=[("grep", {"pattern": "x"})]),
            id=f"wf-{uuid.uuid4()}",
            task_queue=queue,
        )

        async def token() -> str | None:
            async for e in handle.fetch_history_events():
                if e.HasField("nexus_operation_started_event_attributes"):
                    return e.nexus_operation_started_event_attributes.operation_token
            return None

        found: list[str] = []

        def started() -> bool:
            got = asyncio.run_coroutine_threadsafe(token(), loop).result()
            found.extend([got] if got else [])
            return bool(got)

        loop = asyncio.get_running_loop()
        await asyncio.to_thread(wait_until, started, 60, 0.2)
        operation_token = found[0]
        fields = json.loads(base64.urlsafe_b64decode(operation_token + "=="))
        backing = service.search.get_activity_handle(fields["aid"], run_id=fields["rid"])
        wrong = await _cancel(url, "glob", operation_token)
        assert wrong[0] == 400, wrong
        assert not (await backing.describe()).canceled_reason
        right = await _cancel(url, "grep", operation_token)
        assert right[0] in (200, 202), right

        async def cancelled() -> bool:
            described = await backing.describe()
            return described.status == ActivityExecutionStatus.CANCELED or bool(
                described.run_state and described.run_state.name == "CANCEL_REQUESTED"
            )

        await asyncio.to_thread(
            wait_until,
            lambda: asyncio.run_coroutine_threadsafe(cancelled(), loop).result(),
            30,
            0.2,
        )
        # The caller reads the cancel as its call's end (SEARCH_ABORTED).
        (result,) = await handle.result()
        assert result.is_error, result.text


@pytest.mark.parametrize(
    "body",
    [
        {"workspace_id": "../etc", "request": {"pattern": "x"}},  # an operation error (424)
        {"workspace_id": 5},  # input that does not decode (400)
    ],
)
async def test_a_failed_start_tells_an_http_caller_no_stack_trace(service, body):
    """A start the handler refuses (an id outside the syntax: the operation fails; input
    that does not decode: a bad request) answers its message and code, with no stack trace
    and no path of the worker's installation."""
    url = await _service_url(service)
    code, text = await asyncio.to_thread(
        _post,
        f"{url}/grep",
        json.dumps(body).encode(),
        {"Content-Type": "application/json", "Nexus-Request-Id": str(uuid.uuid4())},
    )
    assert code in (400, 424), (code, text)
    assert "stackTrace" not in text, text
    for path in {sys.prefix, sys.base_prefix, "site-packages", ".py\\"}:
        assert path not in text, (path, text)
    if code == 424:
        assert "is not a valid id" in text
