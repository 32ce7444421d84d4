"""The fs_search service's pure parts: how a caller's options are bounded by the handler,
and how a failed operation is read back (no server)."""

from __future__ import annotations

from datetime import timedelta

import nexusrpc
import pytest
from hypothesis import given
from hypothesis import strategies as st
from temporalio import workflow
from temporalio.exceptions import (
    ApplicationError,
    CancelledError,
    NexusOperationError,
    TimeoutError,
    TimeoutType,
)

from fs_search.activities._attempts import failure_cause, not_picked_up
from fs_search.activities._budget import (
    MAX_ATTEMPTS,
    MAX_HEARTBEAT_TIMEOUT,
    MAX_QUEUE_TIMEOUT,
    MIN_TIMEOUT,
    RETRY_MARGIN,
    BackingOptions,
)
from fs_search.activities._contract import ErrorCode, GrepRequest
from fs_search.workflows import FsSearchService, FsSearchTools, GrepCall
from fs_search.workflows._service import Where
from fs_search.workflows._tools import _nexus_cancellation, map_failure


def test_the_service_is_named_fs_search_with_four_operations():
    """The contract's names: service fs_search, operations tools/glob/grep/read_spill."""
    definition = nexusrpc.get_service_definition(FsSearchService)
    assert definition is not None and definition.name == "fs_search"
    assert set(definition.operation_definitions) == {"tools", "glob", "grep", "read_spill"}


def test_defaults_are_fs_search_tools_defaults():
    """A call naming no options is scheduled as FsSearchTools schedules an activity."""
    call = GrepCall(workspace_id="ws", request=GrepRequest(pattern="x"))
    options = BackingOptions.of(call, timeout_ms=None)
    config = FsSearchTools("ws").activity_config()
    assert options.task_queue == "fs-search/ws"
    assert options.start_to_close == config["start_to_close_timeout"]
    assert options.schedule_to_start == timedelta(seconds=8)
    assert options.heartbeat_timeout == timedelta(seconds=5)
    assert options.max_attempts == 3
    assert options.schedule_to_close == options.start_to_close + RETRY_MARGIN


def test_a_host_routes_to_the_host_queue_and_the_caps_apply():
    """host= names the host queue; the serving worker's cap sizes start-to-close."""
    call = Where(workspace_id="ws", host="h1", queue_timeout_ms=0)
    options = BackingOptions.of(call, timeout_ms=600_000, cap_ms=30_000)
    assert options.task_queue == "fs-search-host/h1"
    assert options.start_to_close == timedelta(seconds=35)


@given(
    queue=st.one_of(st.none(), st.integers(min_value=-(10**30), max_value=10**30)),
    start=st.one_of(st.none(), st.integers(min_value=-(10**30), max_value=10**30)),
    sched=st.one_of(st.none(), st.integers(min_value=-(10**30), max_value=10**30)),
    beat=st.one_of(st.none(), st.integers(min_value=-(10**30), max_value=10**30)),
    attempts=st.one_of(st.none(), st.integers(min_value=-(10**30), max_value=10**30)),
    timeout=st.one_of(st.none(), st.integers(min_value=-(10**30), max_value=10**30)),
)
def test_any_caller_options_are_bounded(queue, start, sched, beat, attempts, timeout):
    """Whatever a caller in another namespace asks (negative, zero, 10**30 ms), the backing
    activity's options stay within the handler's bounds and never overflow."""
    call = Where(
        workspace_id="ws",
        queue_timeout_ms=queue,
        start_to_close_ms=start,
        schedule_to_start_ms=sched,
        heartbeat_timeout_ms=beat,
        max_attempts=attempts,
    )
    options = BackingOptions.of(call, timeout_ms=timeout)
    assert (
        MIN_TIMEOUT <= options.start_to_close <= MAX_QUEUE_TIMEOUT + timedelta(hours=1, seconds=5)
    )
    assert options.schedule_to_start is None or (
        MIN_TIMEOUT <= options.schedule_to_start <= MAX_QUEUE_TIMEOUT
    )
    assert MIN_TIMEOUT <= options.heartbeat_timeout <= MAX_HEARTBEAT_TIMEOUT
    assert 1 <= options.max_attempts <= MAX_ATTEMPTS
    assert options.schedule_to_close > options.start_to_close


@pytest.mark.parametrize(
    ("workspace_id", "host", "problem"),
    [
        ("ws-1", None, None),
        ("ws-1", "node-7", None),
        ("../x", None, "workspace_id '../x' is not a valid id"),
        ("a/b", None, "workspace_id 'a/b' is not a valid id"),
        ("ws", "h\nx", "host 'h\\nx' is not a valid id"),
        ("x" * 129, None, "is not a valid id"),
    ],
)
def test_only_valid_ids_name_a_queue(workspace_id, host, problem):
    """The handler refuses ids outside the id syntax: a caller reaches fs-search queues only."""
    found = Where(workspace_id=workspace_id, host=host).problem()
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def _nexus_error(cause: BaseException) -> NexusOperationError:
    error = NexusOperationError(
        "nexus operation completed unsuccessfully",
        scheduled_event_id=1,
        endpoint="fs-search",
        service="fs_search",
        operation="grep",
        operation_token="",
    )
    error.__cause__ = cause
    return error


def test_a_contract_error_under_the_handlers_wrappers_keeps_its_code():
    """OperationError and HandlerError around the contract's ApplicationError: its code and
    message reach the model as from an activity."""
    contract = ApplicationError("bad pattern", type="SEARCH_INVALID_PATTERN", non_retryable=True)
    wrapped = ApplicationError("bad pattern", type="OperationError")
    wrapped.__cause__ = contract
    handler = nexusrpc.HandlerError("handler failed", type=nexusrpc.HandlerErrorType.INTERNAL)
    handler.__cause__ = ApplicationError("nobody", type="SEARCH_FAILED", non_retryable=True)
    for error, code, message in [
        (_nexus_error(wrapped), ErrorCode.SEARCH_INVALID_PATTERN, "bad pattern"),
        (_nexus_error(handler), ErrorCode.SEARCH_FAILED, "nobody"),
    ]:
        result = map_failure(error, workspace_id="ws", queue="fs-search/ws")
        assert result.error is not None and result.error.code == code
        assert result.text == f"Error: {message}"
    assert isinstance(failure_cause(_nexus_error(wrapped)), ApplicationError)


def test_timeouts_and_cancels_of_an_operation():
    """Schedule-to-start is "not picked up"; other timeouts and a cancel are SEARCH_ABORTED."""
    not_started = _nexus_error(
        TimeoutError("x", type=TimeoutType.SCHEDULE_TO_START, last_heartbeat_details=[])
    )
    assert not_picked_up(not_started)
    closed = _nexus_error(
        TimeoutError("x", type=TimeoutType.SCHEDULE_TO_CLOSE, last_heartbeat_details=[])
    )
    assert not not_picked_up(closed)
    assert map_failure(closed, workspace_id="w", queue="q").error.code == ErrorCode.SEARCH_ABORTED
    cancelled = _nexus_error(CancelledError("cancelled"))
    assert map_failure(cancelled, workspace_id="w", queue="q").text == (
        "Error: the search was cancelled"
    )


def test_cancellation_types_keep_their_promise_through_nexus():
    """WAIT_CANCELLATION_COMPLETED (the default: rg gone when the cancel returns) maps to
    Nexus WAIT_COMPLETED; the others to their Nexus twins."""
    kinds = workflow.ActivityCancellationType
    nexus = workflow.NexusOperationCancellationType
    assert _nexus_cancellation(kinds.WAIT_CANCELLATION_COMPLETED) == nexus.WAIT_COMPLETED
    assert _nexus_cancellation(kinds.TRY_CANCEL) == nexus.TRY_CANCEL
    assert _nexus_cancellation(kinds.ABANDON) == nexus.ABANDON


def test_endpoint_and_task_queue_are_exclusive():
    """The handler routes by workspace and host: a task_queue with an endpoint is refused."""
    with pytest.raises(ValueError, match="give one of endpoint and task_queue"):
        FsSearchTools("ws", endpoint="fs-search", task_queue="elsewhere")
