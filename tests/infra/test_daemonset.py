"""infra/k8s/daemonset against the code: one `fs-search worker --workspaces-root` per node.

The DaemonSet is checked like the per-workspace Deployment (test_infra.py): its args go through
the real CLI parser, its settings load as a FsSearchConfig, the host directory is mounted
read-only where --workspaces-root points, its grace period covers the fleet's drain, and its
security context is the Deployment's. The two modes are separate kustomizations that never
include each other.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fs_search.activities._config import FsSearchConfig
from fs_search.worker._app import DEFAULT_PER_WORKSPACE
from fs_search.worker._fleet import WORKSPACE_ID, scan_root
from fs_search.worker._queue_owner import DESCRIBES, HOST_ID_ENV
from fs_search.worker.cli import build_parser
from tests.infra.test_infra import (
    CLUSTER_SCOPED,
    DAEMONSET,
    INFRA,
    K8S,
    WORKLOAD_KINDS,
    _config_map,
    _docker_user_uid,
    _docs,
    _env,
    _render,
    _worker_container,
)

SANDBOXES_ROOT = "/var/lib/agent-sandboxes"
# The final telemetry flush after the drain: ~15 s when the collector is unreachable.
TELEMETRY_FLUSH_S = 15
# What Pod Security "restricted" admits (besides the hostPath this mode needs).
RESTRICTED_VOLUME_TYPES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}


def _daemonset() -> dict[str, Any]:
    (daemonset,) = [m for m in _render(DAEMONSET) if m["kind"] == "DaemonSet"]
    return daemonset


def _deployment() -> dict[str, Any]:
    deployments = [m for m in _render(K8S) if m["kind"] == "Deployment"]
    assert deployments
    return deployments[0]


def _pod() -> dict[str, Any]:
    return _daemonset()["spec"]["template"]["spec"]


def _args() -> Any:
    container = _worker_container(_daemonset())
    return build_parser().parse_args(["worker", *container.get("args", [])])


def _config() -> FsSearchConfig:
    env = _env(_daemonset(), DAEMONSET)
    return FsSearchConfig.load(
        getenv=env.get, overrides={"sample_over_cap_glob_results": _args().sample}
    )


def _quantity(value: str | int) -> float:
    """A Kubernetes quantity (CPU or bytes) as a number."""
    match = re.fullmatch(r"([0-9.]+)(m|Ki|Mi|Gi|Ti|k|M|G|T)?", str(value))
    assert match, value
    number, suffix = float(match[1]), match[2] or ""
    scale = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
    scale |= {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "": 1}
    return number * scale[suffix]


def _root_mount() -> tuple[dict[str, Any], dict[str, Any]]:
    """(volumeMount, volume) at --workspaces-root."""
    root = _args().workspaces_root
    mounts = [m for m in _worker_container(_daemonset())["volumeMounts"] if m["mountPath"] == root]
    assert len(mounts) == 1, f"{root} is not mounted once"
    (volume,) = [v for v in _pod()["volumes"] if v["name"] == mounts[0]["name"]]
    return mounts[0], volume


# --- the two modes -------------------------------------------------------------------------------


def test_the_modes_are_separate_kustomizations() -> None:
    """infra/k8s runs Deployments only, infra/k8s/daemonset one DaemonSet only, in other
    namespaces; neither kustomization includes the other."""
    per_workspace = [m for m in _render(K8S) if m["kind"] in WORKLOAD_KINDS]
    daemonset = [m for m in _render(DAEMONSET) if m["kind"] in WORKLOAD_KINDS]
    assert {m["kind"] for m in per_workspace} == {"Deployment"}
    assert [m["kind"] for m in daemonset] == ["DaemonSet"]
    assert not [m for m in _render(DAEMONSET) if m["kind"] in CLUSTER_SCOPED - {"Namespace"}]
    assert not [m for m in _render(DAEMONSET) if m["kind"] == "PersistentVolumeClaim"]
    (default_kustomization,) = _docs(K8S / "kustomization.yaml")
    assert "daemonset" not in {r.rstrip("/") for r in default_kustomization["resources"]}
    namespaces = {
        root: [m["metadata"]["name"] for m in _render(root) if m["kind"] == "Namespace"]
        for root in (K8S, DAEMONSET)
    }
    assert namespaces == {K8S: ["fs-search"], DAEMONSET: ["fs-search-nodes"]}


def test_per_workspace_checkouts_are_not_under_the_sandboxes_root() -> None:
    """The example per-workspace checkouts lie outside the DaemonSet's root: applying both
    examples never serves one directory twice."""
    _, volume = _root_mount()
    root = volume["hostPath"]["path"].rstrip("/") + "/"
    for pv in (m for m in _render(K8S) if m["kind"] == "PersistentVolume"):
        path = pv["spec"]["local"]["path"]
        assert not (path + "/").startswith(root), path


def test_namespaces_pod_security() -> None:
    """Per-workspace stays restricted; the DaemonSet's namespace must enforce privileged for
    hostPath, and warns and audits against restricted."""
    (default,) = [m for m in _render(K8S) if m["kind"] == "Namespace"]
    assert default["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    (nodes,) = [m for m in _render(DAEMONSET) if m["kind"] == "Namespace"]
    labels = nodes["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"
    assert labels["pod-security.kubernetes.io/audit"] == "restricted"


# --- the DaemonSet -------------------------------------------------------------------------------


def test_args_parse_with_the_real_cli_and_serve_a_root() -> None:
    """`fs-search worker --workspaces-root /workspaces --scan-interval 2`: the image's
    entrypoint, no --workspace, no --workspace-id (under a root the ids are the names)."""
    container = _worker_container(_daemonset())
    assert "command" not in container, "keep the image's ENTRYPOINT (fs-search worker)"
    args = _args()
    assert args.command == "worker"
    assert args.workspaces_root == "/workspaces"
    assert args.workspace is None
    assert args.workspace_id is None, "the CLI refuses --workspace-id with --workspaces-root"
    assert args.scan_interval == 2.0


def test_settings_load_as_a_valid_config() -> None:
    """The ConfigMap plus the DaemonSet's env: sampling chosen, S3, shared and fair slots,
    Landlock required."""
    env = _env(_daemonset(), DAEMONSET)
    assert "FS_SEARCH_SAMPLE_OVER_CAP_GLOB_RESULTS" in env or _args().sample is not None
    config = _config()
    assert config.spill_url == "s3://my-bucket/fs-search"
    assert config.max_concurrent_searches == 8
    assert config.max_concurrent_per_workspace == DEFAULT_PER_WORKSPACE == 4
    assert config.max_concurrent_per_workspace < config.max_concurrent_searches
    assert config.rg_threads == 2
    assert config.sandbox == "required"
    assert config.timeout_ms == 30_000


def test_same_temporal_s3_and_otel_settings_as_the_deployment() -> None:
    """Both modes read the one shared ConfigMap: same Temporal, S3, AWS and OTel settings."""
    assert _config_map(DAEMONSET) == _config_map(K8S)
    daemonset_env = _env(_daemonset(), DAEMONSET)
    deployment_env = _env(_deployment(), K8S)
    shared = re.compile(r"TEMPORAL_|AWS_|OTEL_|FS_SEARCH_(SPILL_URL|S3_|SAMPLE|TIMEOUT)")
    for name in {n for n in daemonset_env | deployment_env if shared.match(n)}:
        assert daemonset_env.get(name) == deployment_env.get(name), name
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" in daemonset_env
    assert "TEMPORAL_ADDRESS" in daemonset_env

    def secret_keys(workload: dict[str, Any]) -> set[tuple[str, str]]:
        return {
            (i["name"], i["valueFrom"]["secretKeyRef"]["key"])
            for i in _worker_container(workload)["env"]
            if "secretKeyRef" in i.get("valueFrom", {})
        }

    assert secret_keys(_daemonset()) == secret_keys(_deployment())
    assert secret_keys(_daemonset())


def test_the_host_root_is_mounted_read_only_where_the_worker_looks() -> None:
    """--workspaces-root is a read-only hostPath mount of the sandboxes root (which must exist),
    with host-to-container propagation so sandboxes mounted later show up."""
    mount, volume = _root_mount()
    assert mount.get("readOnly") is True
    assert mount.get("mountPropagation", "None") in ("None", "HostToContainer")
    assert volume["hostPath"] == {"path": SANDBOXES_ROOT, "type": "Directory"}
    host_paths = [v for v in _pod()["volumes"] if "hostPath" in v]
    assert host_paths == [volume], "the sandboxes root is the only host path"
    other_mounts = [
        m for m in _worker_container(_daemonset())["volumeMounts"] if m["name"] != volume["name"]
    ]
    assert [m["mountPath"] for m in other_mounts] == ["/tmp"]


def test_the_mounted_layout_is_what_the_fleet_serves(tmp_path: Path) -> None:
    """A root laid out as the README describes is scanned into the ids it names."""
    root = tmp_path / "agent-sandboxes"
    for name in ("sbx-42", "repo.main_2", ".cache", "bad name"):
        (root / name).mkdir(parents=True)
    (root / "escape").symlink_to(tmp_path)
    scan = scan_root(str(root))
    assert set(scan.found) == {"sbx-42", "repo.main_2"}
    assert set(scan.skipped) == {"bad name", "escape"}
    assert all(WORKSPACE_ID.fullmatch(name) for name in scan.found)


def test_grace_period_covers_the_drain() -> None:
    """terminationGracePeriodSeconds >= the drain timeout + the telemetry flush, the same as
    the Deployment's (the fleet's drain is the drain timeout, never longer)."""
    grace = _pod()["terminationGracePeriodSeconds"]
    drain = _config().drain_timeout
    assert drain < _config().timeout_ms / 1000 + 5, "the drain timeout bounds the fleet's drain"
    assert grace >= drain + TELEMETRY_FLUSH_S
    assert grace == _deployment()["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]


def test_security_context_is_the_deployments() -> None:
    """Non-root (the image's uid), no privilege escalation (Landlock's no_new_privs), read-only
    root fs, every capability dropped, RuntimeDefault seccomp, no host namespaces, no API token."""
    pod, container = _pod(), _worker_container(_daemonset())
    deployment_pod = _deployment()["spec"]["template"]["spec"]
    assert pod["securityContext"] == deployment_pod["securityContext"]
    assert container["securityContext"] == _worker_container(_deployment())["securityContext"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == _docker_user_uid()
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "fsGroup" not in pod["securityContext"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    for host in ("hostNetwork", "hostPID", "hostIPC"):
        assert not pod.get(host), host
    assert pod["automountServiceAccountToken"] is False
    assert pod["enableServiceLinks"] is False
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert container[probe] == _worker_container(_deployment())[probe]


def test_restricted_but_for_the_host_root() -> None:
    """Pod Security "restricted" would admit the pod if it were not for the one hostPath."""
    pod = _pod()
    _, root_volume = _root_mount()
    for volume in pod["volumes"]:
        kinds = set(volume) - {"name"}
        assert kinds <= RESTRICTED_VOLUME_TYPES or volume == root_volume, volume
    for container in pod["containers"] + pod.get("initContainers", []):
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False
        assert not context.get("privileged")
        assert "ALL" in context["capabilities"]["drop"]
        assert set(context["capabilities"].get("add", [])) <= {"NET_BIND_SERVICE"}
        assert not any("hostPort" in port for port in container.get("ports", [])), "no host ports"


def test_schedules_on_labelled_nodes_and_rolls_with_a_poller() -> None:
    """Sandbox nodes only; a rollout starts the new pod before the old one stops."""
    spec = _daemonset()["spec"]
    assert spec["template"]["spec"]["nodeSelector"] == {"fs-search/sandboxes": "true"}
    strategy = spec["updateStrategy"]
    assert strategy["type"] == "RollingUpdate"
    assert strategy["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    assert spec["minReadySeconds"] > 0


def test_the_host_id_is_the_node() -> None:
    """FS_SEARCH_HOST_ID comes from the pod's node (downward API), so a rollout's new pod and a
    restarted one share the old pod's queues while another node's worker is a name clash; the
    sandboxes are not declared shared across nodes."""
    env = {item["name"]: item for item in _worker_container(_daemonset())["env"]}
    assert env[HOST_ID_ENV] == {
        "name": HOST_ID_ENV,
        "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
    }
    assert not _config().allow_shared_queue


def test_a_rollout_waits_for_the_new_pod_to_check_its_queues() -> None:
    """Each queue is checked (who else polls it) before it is polled, at DESCRIBES' rate: the
    new pod must be given time to attach a node's sandboxes (600 here, twice the number the
    memory is sized for) before the old pod stops."""
    checks_per_s = 1 / DESCRIBES.interval
    assert _daemonset()["spec"]["minReadySeconds"] * checks_per_s >= 600


def test_resources_are_sized_for_many_workspaces() -> None:
    """CPU limit >= half the rg threads at full load; memory limit >= the process, a few hundred
    idle workspaces and every running search's raw output twice (output + parsed result); both
    larger than one per-workspace worker's."""
    resources = _worker_container(_daemonset())["resources"]
    config = _config()
    assert _quantity(resources["limits"]["cpu"]) >= (
        config.max_concurrent_searches * (config.rg_threads or 1) / 2
    )
    process, idle_workspaces = 145e6, 300 * 0.3e6
    searches = config.max_concurrent_searches * 2 * config.raw_output_max_bytes
    assert _quantity(resources["limits"]["memory"]) >= process + idle_workspaces + searches
    for kind in ("requests", "limits"):
        for name in ("cpu", "memory"):
            assert _quantity(resources[kind][name]) > 0
    assert _quantity(resources["requests"]["memory"]) <= _quantity(resources["limits"]["memory"])
    deployment = _worker_container(_deployment())["resources"]["limits"]
    for name in ("cpu", "memory"):
        assert _quantity(resources["limits"][name]) > _quantity(deployment[name]), name


def test_image_is_the_deployments() -> None:
    """Both modes run the same image and tag."""
    image = _worker_container(_daemonset())["image"]
    assert image == _worker_container(_deployment())["image"]
    assert image == "registry.example.com/fs-search:0.1.0"


def test_readme_explains_the_choice() -> None:
    """infra/README.md has the section, the apply command, the root and the id -> queue rule."""
    readme = (INFRA / "README.md").read_text()
    assert "## Per-workspace Deployment or one DaemonSet per node?" in readme
    assert "kubectl apply -k infra/k8s/daemonset" in readme
    assert SANDBOXES_ROOT in readme
    assert "fs-search/<name>" in readme
    assert "SEARCH_FAILED" in readme
    assert "schedule-to-start" in readme
    assert "k8s/daemonset/worker-daemonset.yaml" in readme
    assert "k8s/shared/configmap.yaml" in readme
