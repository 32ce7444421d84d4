"""infra/ for operating a fleet (docs/operating.md): probes, the metrics port and its scrape
configuration, the grace period, the alert rules and the dashboard, against what the worker
really serves and what promtool accepts."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from fs_search.activities._config import FsSearchConfig
from fs_search.worker._http import parse_address
from fs_search.worker._metrics import WorkerMetrics
from tests.infra.test_daemonset import TELEMETRY_FLUSH_S
from tests.infra.test_infra import (
    DAEMONSET,
    INFRA,
    K8S,
    MODES,
    WORKLOAD_KINDS,
    _env,
    _mode_id,
    _render,
    _worker_container,
)

PROMTOOL = shutil.which("promtool")
NO_PROMTOOL = "promtool is not installed (Debian: apt-get install prometheus; .ci/run does)"
RULES = INFRA / "prometheus" / "rules.yaml"
PODMONITOR = INFRA / "prometheus" / "podmonitor.yaml"
SCRAPE_CONFIG = INFRA / "prometheus" / "scrape-config.yaml"
DASHBOARD = INFRA / "grafana" / "fs-search-dashboard.json"
ALERTS = {
    "FsSearchWorkerNotReady",
    "FsSearchSlotsSaturated",
    "FsSearchErrorRate",
    "FsSearchSpillsFailing",
    "FsSearchHostQueueNotPolled",
}
# The Temporal SDK's families the rules and the dashboard read (tests/worker/test_operating.py
# sees them in a real worker's scrape).
SDK_FAMILIES = {
    "temporal_activity_schedule_to_start_latency_seconds_bucket",
    "temporal_num_pollers",
    "temporal_long_request_total",
    "temporal_long_request_failure_total",
}


def _workload(root: Path) -> dict[str, Any]:
    (workload,) = [m for m in _render(root) if m["kind"] in WORKLOAD_KINDS]
    return workload


def _config(root: Path) -> FsSearchConfig:
    env = _env(_workload(root), root)
    return FsSearchConfig.load(getenv=env.get, overrides={"sample_over_cap_glob_results": True})


def _fs_search_families() -> set[str]:
    """Every fs_search_* family a worker's scrape can hold (every source set, a call made)."""
    metrics = WorkerMetrics(per_workspace=False)
    s = metrics.sources
    s.running = lambda: (1, 0)
    s.held = lambda: 1
    s.capacity = lambda: (4, 16)
    s.workspaces = lambda: (1, 0)
    s.handed_back = lambda: 0
    s.checks = lambda: {"temporal": "ok"}
    s.draining = lambda: False
    metrics.call(tool="grep", outcome="ok", seconds=0.1, raw_bytes=10, workspace_id="w")
    metrics.rg(tool="grep", seconds=0.1)
    metrics.spill(store="s3", ok=True)
    text = metrics.render().decode()
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            names.add(name)
            if kind == "histogram":
                names |= {f"{name}_bucket", f"{name}_count", f"{name}_sum"}
    return names


def _metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\b((?:fs_search|temporal|process)_[a-z0-9_]+)\b", expr))


def _rules() -> list[dict[str, Any]]:
    (doc,) = yaml.safe_load_all(RULES.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def _dashboard_exprs() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]


@pytest.mark.parametrize("root", MODES, ids=_mode_id)
def test_probes_and_the_scrape_reach_the_address_the_worker_serves(root: Path) -> None:
    """The liveness, readiness and startup probes GET /livez and /readyz on the named port
    that FS_SEARCH_HTTP listens on (every interface), the annotations name that port and
    /metrics, and no port is a host port."""
    config = _config(root)
    assert config.http, "FS_SEARCH_HTTP must be set for the probes"
    host, port = parse_address(config.http)
    assert host == "0.0.0.0"
    workload = _workload(root)
    container = _worker_container(workload)
    (named,) = container["ports"]
    assert named == {"name": "http", "containerPort": port, "protocol": "TCP"}
    paths = {
        probe: container[probe]["httpGet"]
        for probe in ("startupProbe", "livenessProbe", "readinessProbe")
    }
    assert paths == {
        "startupProbe": {"path": "/livez", "port": "http"},
        "livenessProbe": {"path": "/livez", "port": "http"},
        "readinessProbe": {"path": "/readyz", "port": "http"},
    }
    # A liveness failure restarts the pod: not before the loop has been stuck for 30 s.
    live = container["livenessProbe"]
    assert live["periodSeconds"] * live["failureThreshold"] >= 30
    annotations = workload["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(port),
        "prometheus.io/path": "/metrics",
    }


@pytest.mark.parametrize("root", MODES, ids=_mode_id)
def test_the_grace_period_is_above_the_drain(root: Path) -> None:
    """terminationGracePeriodSeconds > the drain timeout + the final telemetry flush, so the
    kubelet never SIGKILLs a worker that is draining."""
    pod = _workload(root)["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] > _config(root).drain_timeout + TELEMETRY_FLUSH_S


def test_the_pod_monitor_selects_both_modes_on_the_http_port() -> None:
    (monitor,) = yaml.safe_load_all(PODMONITOR.read_text())
    assert monitor["kind"] == "PodMonitor"
    namespaces = {_workload(root)["metadata"]["namespace"] for root in MODES}
    assert set(monitor["spec"]["namespaceSelector"]["matchNames"]) == namespaces
    selector = monitor["spec"]["selector"]["matchLabels"]
    for root in MODES:
        labels = _workload(root)["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= labels.items()
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["port"] == "http" and endpoint["path"] == "/metrics"
    # Not applied with the kustomizations: the PodMonitor kind needs the operator.
    for root in MODES:
        assert all(m["kind"] != "PodMonitor" for m in _render(root))


def test_the_scrape_config_keeps_annotated_pods_of_both_modes() -> None:
    (config,) = yaml.safe_load_all(SCRAPE_CONFIG.read_text())
    (job,) = config["scrape_configs"]
    (sd,) = job["kubernetes_sd_configs"]
    assert set(sd["namespaces"]["names"]) == {_workload(r)["metadata"]["namespace"] for r in MODES}
    keep = job["relabel_configs"][0]
    assert keep["source_labels"] == ["__meta_kubernetes_pod_annotation_prometheus_io_scrape"]
    assert keep["action"] == "keep" and keep["regex"] == "true"
    assert config["rule_files"] == [RULES.name]


@pytest.mark.skipif(PROMTOOL is None, reason=NO_PROMTOOL)
def test_promtool_accepts_the_alert_rules() -> None:
    done = subprocess.run(
        [PROMTOOL or "promtool", "check", "rules", str(RULES)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(_rules())} rules found" in done.stdout


def test_the_alerts_are_there_and_read_what_the_worker_exports() -> None:
    """A worker not ready, slots saturated, error rate, spills failing, a host queue not
    polled; every metric they read is one the worker's scrape holds."""
    rules = _rules()
    assert {rule["alert"] for rule in rules} >= ALERTS
    known = _fs_search_families() | SDK_FAMILIES
    for rule in rules:
        assert _metric_names(rule["expr"]) <= known, (
            rule["alert"],
            _metric_names(rule["expr"]) - known,
        )
        assert rule["annotations"]["summary"] and rule["labels"]["severity"]


@pytest.mark.skipif(PROMTOOL is None, reason=NO_PROMTOOL)
def test_the_dashboard_queries_parse_and_read_what_the_worker_exports(tmp_path: Path) -> None:
    """Every panel's query is valid PromQL (promtool checks them as recording rules, with the
    dashboard's variables filled in) and reads metrics the worker exports."""
    exprs = _dashboard_exprs()
    assert len(exprs) >= 10
    known = _fs_search_families() | SDK_FAMILIES | {"process_resident_memory_bytes"}
    rules = []
    for n, expr in enumerate(exprs):
        assert _metric_names(expr) <= known, _metric_names(expr) - known
        filled = expr.replace("$namespace", ".*").replace("$pod", ".*")
        rules.append({"record": f"fs_search:panel_{n}", "expr": filled})
    path = tmp_path / "panels.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": rules}]}))
    done = subprocess.run(
        [PROMTOOL or "promtool", "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_daemonset_and_the_deployment_probe_alike() -> None:
    daemonset = _worker_container(_workload(DAEMONSET))
    deployment = _worker_container(_workload(K8S))
    for key in ("ports", "startupProbe", "livenessProbe", "readinessProbe"):
        assert daemonset[key] == deployment[key], key
