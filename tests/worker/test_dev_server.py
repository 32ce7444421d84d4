"""The dev server fs-search starts: dispatch paced as on a cluster, user values last."""

from __future__ import annotations

from fs_search.worker._devstack import DISPATCH_DYNAMIC_CONFIG, DevServer


def _dynamic_values(server: DevServer) -> list[str]:
    argv = list(server.process.argv)
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == "--dynamic-config-value"]


def test_dev_server_reads_its_task_queues_without_the_one_shard_throttle() -> None:
    values = _dynamic_values(DevServer())
    assert values == list(DISPATCH_DYNAMIC_CONFIG)
    keys = {value.split("=", 1)[0] for value in values}
    assert "history.transferProcessorMaxPollRPS" in keys  # workflow and activity tasks
    assert all(int(value.split("=", 1)[1]) >= 1000 for value in values)


def test_values_given_to_the_dev_server_come_after_and_win() -> None:
    mine = "history.transferProcessorMaxPollRPS=50"
    values = _dynamic_values(DevServer(dynamic_config=["activity.enableCallbacks=true", mine]))
    assert values[: len(DISPATCH_DYNAMIC_CONFIG)] == list(DISPATCH_DYNAMIC_CONFIG)
    assert values[len(DISPATCH_DYNAMIC_CONFIG) :] == ["activity.enableCallbacks=true", mine]
