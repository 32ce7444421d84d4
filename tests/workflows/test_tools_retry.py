"""FsSearchTools merges a caller's own RetryPolicy with the contract's non-retryable codes."""

from __future__ import annotations

import uuid

from temporalio import activity
from temporalio.common import RetryPolicy
from temporalio.worker import Worker

from fs_search.activities._contract import (
    GLOB_ACTIVITY,
    GREP_ACTIVITY,
    ErrorCode,
    GlobRequest,
    GlobResult,
    GrepRequest,
    GrepResult,
    task_queue_for,
)
from fs_search.activities._errors import SearchError
from fs_search.workflows import FsSearchTools
from fs_search.workflows._tools import NON_RETRYABLE_ERROR_TYPES
from tests.workflows.sandbox_workflows import OwnPolicyCall, OwnRetryPolicyWorkflow


def test_own_policy_is_merged_not_replaced():
    """The caller's settings and error types stay; the contract's codes are added once."""
    own = RetryPolicy(maximum_attempts=7, non_retryable_error_types=["Mine", "SEARCH_FAILED"])
    policy = FsSearchTools("ws", retry_policy=own).activity_config()["retry_policy"]
    assert policy.maximum_attempts == 7
    types = policy.non_retryable_error_types or []
    assert types[:2] == ["Mine", "SEARCH_FAILED"] and set(NON_RETRYABLE_ERROR_TYPES) <= set(types)
    assert len(types) == len(set(types))


async def test_contract_errors_are_not_retried_under_a_callers_policy(ts_env):
    """A policy that lists no error types still fails a contract error at once, while other
    failures are retried as the caller's policy says."""
    wsid = f"ws-{uuid.uuid4()}"
    attempts: dict[str, int] = {"glob": 0, "grep": 0}

    @activity.defn(name=GREP_ACTIVITY)
    async def bad_pattern(req: GrepRequest) -> GrepResult:
        attempts["grep"] += 1
        raise SearchError(
            ErrorCode.SEARCH_INVALID_PATTERN, "invalid pattern: ("
        ).to_application_error()

    @activity.defn(name=GLOB_ACTIVITY)
    async def flaky(req: GlobRequest) -> GlobResult:
        attempts["glob"] += 1
        raise RuntimeError("disk on fire")

    queue = f"wf-{uuid.uuid4()}"
    async with (
        Worker(ts_env.client, task_queue=task_queue_for(wsid), activities=[bad_pattern, flaky]),
        Worker(ts_env.client, task_queue=queue, workflows=[OwnRetryPolicyWorkflow]),
    ):
        results = [
            await ts_env.client.execute_workflow(
                OwnRetryPolicyWorkflow.run,
                OwnPolicyCall(workspace_id=wsid, tool=tool, arguments=args, maximum_attempts=4),
                id=f"wf-{uuid.uuid4()}",
                task_queue=queue,
            )
            for tool, args in [("grep", {"pattern": "("}), ("glob", {"pattern": "*"})]
        ]
    grep, glob = results
    assert attempts == {"grep": 1, "glob": 4}
    assert grep.error is not None and grep.error.code == ErrorCode.SEARCH_INVALID_PATTERN
    assert glob.error is not None and glob.error.code == ErrorCode.SEARCH_FAILED
