"""infra/ against the code: the image, the Kubernetes manifests, the collector, S3 policy and rules.

Every check reads the deployment files as data and compares them with what the project really
accepts or produces: the CLI parser, FsSearchConfig's keys, task_queue_for, Temporal's envconfig,
the spill store's and the S3 payload driver's object keys, botocore's S3 request model.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import botocore.session
import pytest
import yaml
from botocore.validate import ParamValidator
from temporalio.api.common.v1 import Payload
from temporalio.converter import StorageDriverStoreContext, StorageDriverWorkflowInfo
from temporalio.envconfig import ClientConfig

import fs_search.activities.storage._s3 as s3_module
from fs_search.activities._config import FsSearchConfig
from fs_search.activities._contract import task_queue_for
from fs_search.activities.storage import SpillKey, open_storage
from fs_search.activities.storage._s3 import S3SpillStore
from fs_search.worker._queue_owner import HOST_ID_ENV
from fs_search.worker.cli import build_parser

INFRA = Path(__file__).resolve().parents[2] / "infra"
K8S = INFRA / "k8s"
# The two ways to run the workers, each its own kustomization (apply one or the other):
# a Deployment per workspace (infra/k8s), one DaemonSet per node (infra/k8s/daemonset).
DAEMONSET = K8S / "daemonset"
SHARED = K8S / "shared"
MODES = [K8S, DAEMONSET]
WORKLOAD_KINDS = {"Deployment", "StatefulSet", "DaemonSet"}
CLUSTER_SCOPED = {"Namespace", "PersistentVolume", "ClusterRole", "ClusterRoleBinding"}


# --- loading ---------------------------------------------------------------------------------


def _mode_id(root: Path) -> str:
    return "daemonset" if root == DAEMONSET else "per-workspace"


def _text_files() -> list[Path]:
    return sorted(p for p in INFRA.rglob("*") if p.is_file())


def _yaml_files() -> list[Path]:
    return sorted(p for p in INFRA.rglob("*") if p.suffix in (".yaml", ".yml"))


def _json_files() -> list[Path]:
    return sorted(INFRA.rglob("*.json"))


def _docs(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


# The kustomization fields infra/k8s uses; _render implements exactly these.
KUSTOMIZE_FIELDS = {"apiVersion", "kind", "namespace", "resources", "images"}


def _render(directory: Path) -> list[dict[str, Any]]:
    """The objects `kubectl apply -k directory` creates.

    Implements the part of kustomize the manifests use (resources: files and directories,
    namespace, images); test_render_matches_kubectl_kustomize checks it against the real one.
    """
    (kustomization,) = _docs(directory / "kustomization.yaml")
    assert set(kustomization) <= KUSTOMIZE_FIELDS, set(kustomization) - KUSTOMIZE_FIELDS
    out: list[dict[str, Any]] = []
    for entry in kustomization["resources"]:
        path = directory / entry
        out += _render(path) if path.is_dir() else _docs(path)
    namespace = kustomization.get("namespace")
    for obj in out:
        if namespace and obj["kind"] not in CLUSTER_SCOPED:
            obj["metadata"]["namespace"] = namespace
        template = obj.get("spec", {}).get("template", {}).get("spec", {})
        for container in template.get("containers", []):
            for image in kustomization.get("images", []):
                if container["image"].split(":")[0] == image["name"]:
                    container["image"] = f"{image['name']}:{image['newTag']}"
    return out


def _manifests(root: Path = K8S) -> list[dict[str, Any]]:
    """What the kustomization at ``root`` applies, plus the *.example.yaml templates beside it."""
    out = _render(root)
    for path in sorted(root.glob("*.example.yaml")):
        out += _docs(path)
    return out


def _of_kind(kind: str, root: Path = K8S) -> list[dict[str, Any]]:
    return [m for m in _manifests(root) if m["kind"] == kind]


def _one(kind: str, name: str, root: Path = K8S) -> dict[str, Any]:
    found = [m for m in _of_kind(kind, root) if m["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name!r} in {root}, found {len(found)}"
    return found[0]


def _workloads() -> list[dict[str, Any]]:
    return [m for m in _manifests() if m["kind"] in WORKLOAD_KINDS]


def _workload_ids() -> list[str]:
    return [w["metadata"]["name"] for w in _workloads()]


def _worker_container(workload: dict[str, Any]) -> dict[str, Any]:
    containers = workload["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1, "the worker pod runs one container"
    return containers[0]


def _parsed_args(workload: dict[str, Any]) -> Any:
    return build_parser().parse_args(["worker", *_worker_container(workload).get("args", [])])


def _config_map(root: Path = K8S) -> dict[str, str]:
    return _one("ConfigMap", "fs-search-config", root)["data"]


def _env(workload: dict[str, Any], root: Path = K8S) -> dict[str, str]:
    """The plain environment the worker container gets (ConfigMaps, then literal values)."""
    container = _worker_container(workload)
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            env.update(_one("ConfigMap", source["configMapRef"]["name"], root)["data"])
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = str(item["value"])
    return env


def _dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of infra/Dockerfile, continuation lines joined."""
    joined = re.sub(r"\\\n", " ", (INFRA / "Dockerfile").read_text())
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            instruction, _, rest = line.partition(" ")
            out.append((instruction.upper(), rest.strip()))
    return out


def _docker_json(instruction: str) -> list[str]:
    values = [rest for ins, rest in _dockerfile() if ins == instruction]
    assert values, f"infra/Dockerfile has no {instruction}"
    parsed = json.loads(values[-1])
    assert isinstance(parsed, list), f"{instruction} must be in exec (JSON) form"
    return parsed


def _spill_url() -> str:
    return _config_map()["FS_SEARCH_SPILL_URL"]


# --- real object keys from the project's own code ----------------------------------------------


class _RecordingS3:
    """Stands in for the aioboto3 client: records put_object calls."""

    def __init__(self) -> None:
        self.puts: list[tuple[str, str]] = []

    async def put_object(self, *, Bucket: str, Key: str, **_: Any) -> None:  # noqa: N803
        self.puts.append((Bucket, Key))


class _FakeLazyClient:
    def __init__(self) -> None:
        self.s3 = _RecordingS3()

    async def get(self) -> _RecordingS3:
        return self.s3

    async def close(self) -> None:
        pass


class _FakeDriverClient:
    """Stands in for LazyAioboto3Client under Temporal's S3StorageDriver."""

    def __init__(self, endpoint_url: str | None = None) -> None:
        self.endpoint_url = endpoint_url
        self.puts: list[tuple[str, str]] = []

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        return False

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        self.puts.append((bucket, key))

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        raise KeyError(key)


async def _spill_object() -> tuple[str, str]:
    """(bucket, key) the S3 spill store writes for one artifact under the ConfigMap's URL."""
    store = S3SpillStore.from_url(_spill_url())
    store.client = _FakeLazyClient()  # type: ignore[assignment]
    ref = await store.save(SpillKey("agent-wf", "run-1", "7", "grep"), "a\nb\n")
    parsed = urlparse(ref.locator)
    return parsed.netloc, parsed.path.lstrip("/")


async def _payload_object(monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """(bucket, key) Temporal's S3 driver, as the plugin builds it, writes for a large payload."""
    monkeypatch.setattr(s3_module, "LazyAioboto3Client", _FakeDriverClient)
    external = open_storage(_spill_url()).external_storage()
    (driver,) = external.drivers
    target = StorageDriverWorkflowInfo(namespace="default", id="agent-wf", run_id="r1", type="A")
    (claim,) = await driver.store(StorageDriverStoreContext(target=target), [Payload(data=b"x")])
    return claim.claim_data["bucket"], claim.claim_data["key"]


# --- files parse ---------------------------------------------------------------------------------


def test_deliverables_exist() -> None:
    """infra/ holds the image, manifests, collector config, IAM policy, lifecycle and README."""
    for name in (
        "Dockerfile",
        "README.md",
        "otel-collector.yaml",
        "iam-policy.json",
        "s3-lifecycle.json",
        "k8s/kustomization.yaml",
    ):
        assert (INFRA / name).is_file(), f"infra/{name} is missing"
    assert _workloads(), "infra/k8s has no worker workload"


@pytest.mark.parametrize("path", _yaml_files(), ids=lambda p: str(p.relative_to(INFRA)))
def test_yaml_parses(path: Path) -> None:
    """Every YAML file under infra/ parses, every document is a mapping."""
    docs = _docs(path)
    assert docs, f"{path} has no documents"
    assert all(isinstance(d, dict) for d in docs)


@pytest.mark.parametrize("path", _json_files(), ids=lambda p: str(p.relative_to(INFRA)))
def test_json_parses(path: Path) -> None:
    """Every JSON file under infra/ parses to an object."""
    assert isinstance(json.loads(path.read_text()), dict)


# --- Kubernetes objects --------------------------------------------------------------------------


@pytest.mark.parametrize("root", MODES, ids=_mode_id)
def test_manifests_are_namespaced_kubernetes_objects(root: Path) -> None:
    """Each manifest has apiVersion/kind/name, and namespaced ones live in the mode's Namespace."""
    (namespace,) = [m for m in _render(root) if m["kind"] == "Namespace"]
    for m in _manifests(root):
        assert m.get("apiVersion") and m.get("kind") and m["metadata"].get("name"), m
        if m["kind"] not in CLUSTER_SCOPED:
            assert m["metadata"].get("namespace") == namespace["metadata"]["name"], m["metadata"]


@pytest.mark.parametrize(
    "directory",
    sorted(p.parent for p in K8S.rglob("kustomization.yaml")),
    ids=lambda p: str(p.relative_to(INFRA)),
)
def test_kustomization_lists_every_manifest_but_templates(directory: Path) -> None:
    """Each kustomization.yaml names every k8s file beside it, except *.example.yaml templates,
    and only the shared directory: never the other mode's kustomization."""
    (kustomization,) = _docs(directory / "kustomization.yaml")
    resources = kustomization["resources"]
    assert len(resources) == len(set(resources))
    files = {r for r in resources if (directory / r).is_file()}
    wanted = {
        p.name
        for p in directory.glob("*.yaml")
        if p.name != "kustomization.yaml" and not p.name.endswith(".example.yaml")
    }
    assert files == wanted
    directories = {(directory / r).resolve() for r in resources if (directory / r).is_dir()}
    assert directories <= {SHARED}, directories
    assert set(resources) == files | {r for r in resources if (directory / r).is_dir()}
    namespaces = [m for m in _render(directory) if m["kind"] == "Namespace"]
    if directory == SHARED:
        assert not namespaces and "namespace" not in kustomization, "each mode sets its own"
    else:
        assert directories == {SHARED}, "both modes use the shared ServiceAccount and ConfigMap"
        (namespace,) = namespaces
        assert kustomization.get("namespace") == namespace["metadata"]["name"]


@pytest.mark.parametrize("root", MODES, ids=_mode_id)
def test_references_between_objects_resolve(root: Path) -> None:
    """ConfigMaps, ServiceAccounts and claims a workload names are defined in the same
    kustomization; the Secret keys it reads are in the Secret template."""
    workloads = [m for m in _render(root) if m["kind"] in WORKLOAD_KINDS]
    assert workloads
    for workload in workloads:
        pod = workload["spec"]["template"]["spec"]
        _one("ServiceAccount", pod["serviceAccountName"], root)
        container = _worker_container(workload)
        for source in container.get("envFrom", []):
            if "configMapRef" in source:
                _one("ConfigMap", source["configMapRef"]["name"], root)
            if "secretRef" in source:
                _one("Secret", source["secretRef"]["name"], K8S)
        for item in container.get("env", []):
            ref = item.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                assert ref["key"] in _one("Secret", ref["name"], K8S)["stringData"], ref
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for mount in container.get("volumeMounts", []):
            assert mount["name"] in volumes, mount
        for volume in volumes.values():
            if "persistentVolumeClaim" in volume:
                _one("PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"], root)
        selector = workload["spec"]["selector"]["matchLabels"]
        labels = workload["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= labels.items(), "the selector must match the pod template"


@pytest.mark.parametrize("root", MODES, ids=_mode_id)
def test_render_matches_kubectl_kustomize(root: Path) -> None:
    """_render gives what `kubectl kustomize` (the kustomize behind `kubectl apply -k`) does."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    done = subprocess.run(
        [kubectl, "kustomize", str(root)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr

    def key(obj: dict[str, Any]) -> str:
        return json.dumps(obj, sort_keys=True)

    real = [d for d in yaml.safe_load_all(done.stdout) if d is not None]
    assert sorted(map(key, real)) == sorted(map(key, _render(root)))


def test_secret_template_has_no_empty_values() -> None:
    """The Secret template holds placeholders only: an empty TEMPORAL_API_KEY would turn TLS on."""
    for secret in _of_kind("Secret"):
        for key, value in secret.get("stringData", {}).items():
            assert str(value).strip(), f"{key} is empty"


# --- the worker workload -------------------------------------------------------------------------


@pytest.mark.parametrize("workload", _workloads(), ids=_workload_ids())
def test_workload_args_parse_with_the_real_cli(workload: dict[str, Any]) -> None:
    """The container's args are accepted by `fs-search worker` and keep the image's entrypoint."""
    container = _worker_container(workload)
    assert "command" not in container, "keep the image's ENTRYPOINT (fs-search worker)"
    args = _parsed_args(workload)
    assert args.command == "worker"


@pytest.mark.parametrize("workload", _workloads(), ids=_workload_ids())
def test_workload_passes_an_explicit_workspace_id(workload: dict[str, Any]) -> None:
    """The workload names its workspace id (pods move; the default id follows the host name)."""
    args = _parsed_args(workload)
    assert args.workspace_id, "pass --workspace-id"
    labels = workload["spec"]["template"]["metadata"]["labels"]
    assert labels.get("fs-search/workspace-id") == args.workspace_id


@pytest.mark.parametrize("workload", _workloads(), ids=_workload_ids())
def test_workload_settings_load_as_a_valid_config(workload: dict[str, Any]) -> None:
    """The workload's flags and FS_SEARCH_* env give a valid FsSearchConfig (sampling chosen)."""
    args = _parsed_args(workload)
    env = _env(workload)
    assert args.sample is not None or "FS_SEARCH_SAMPLE_OVER_CAP_GLOB_RESULTS" in env
    config = FsSearchConfig.load(
        getenv=env.get, overrides={"sample_over_cap_glob_results": args.sample}
    )
    assert config.spill_url and config.spill_url.startswith("s3://"), "workers share S3"


@pytest.mark.parametrize("workload", _workloads(), ids=_workload_ids())
def test_workspace_is_mounted_read_only_where_the_worker_looks(workload: dict[str, Any]) -> None:
    """--workspace is a read-only volume mount of the container."""
    args = _parsed_args(workload)
    mounts = {m["mountPath"]: m for m in _worker_container(workload).get("volumeMounts", [])}
    assert args.workspace in mounts, f"{args.workspace} is not mounted"
    assert mounts[args.workspace].get("readOnly") is True


@pytest.mark.parametrize("workload", _workloads(), ids=_workload_ids())
def test_workload_runs_one_worker_pinned_to_the_workspace_node(workload: dict[str, Any]) -> None:
    """One replica, on the node whose local PersistentVolume holds the checkout."""
    assert workload["spec"].get("replicas") == 1
    pod = workload["spec"]["template"]["spec"]
    node = pod["nodeSelector"]["kubernetes.io/hostname"]
    args = _parsed_args(workload)
    mount = next(
        m for m in _worker_container(workload)["volumeMounts"] if m["mountPath"] == args.workspace
    )
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    claim = _one("PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])
    pv = _one("PersistentVolume", claim["spec"]["volumeName"])
    assert pv["spec"]["claimRef"]["name"] == claim["metadata"]["name"]
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain", "never delete a checkout"
    terms = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert [e["values"] for t in terms for e in t["matchExpressions"]] == [[node]]
    for obj in (pv, claim):
        assert obj["metadata"]["labels"]["fs-search/workspace-id"] == args.workspace_id


@pytest.mark.parametrize("workload", _workloads(), ids=_workload_ids())
def test_workload_security_and_shutdown(workload: dict[str, Any]) -> None:
    """Non-root (the image's uid), read-only root fs, no hostPath, a grace period above the
    drain (docs/operating.md; tests/infra/test_operating.py checks the probes)."""
    pod = workload["spec"]["template"]["spec"]
    container = _worker_container(workload)
    uid = _docker_user_uid()
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == uid
    assert "fsGroup" not in pod["securityContext"], "fsGroup would chown the checkout"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert not any("hostPath" in v for v in pod.get("volumes", []))
    drain = FsSearchConfig.load(
        getenv=_env(workload).get, overrides={"sample_over_cap_glob_results": True}
    ).drain_timeout
    assert drain < pod["terminationGracePeriodSeconds"] <= 120
    assert container["resources"]["requests"] and container["resources"]["limits"]


# --- settings names ------------------------------------------------------------------------------


def test_fs_search_env_names_are_config_keys() -> None:
    """Every FS_SEARCH_* name in infra/ (manifests, comments, docs) is a FsSearchConfig key, or
    the host id (read by the worker itself, not a search setting)."""
    known = {FsSearchConfig.env_name(k) for k in FsSearchConfig.model_fields} | {HOST_ID_ENV}
    seen = set()
    for path in _text_files():
        for name in re.findall(r"\bFS_SEARCH_[A-Z0-9_]+", path.read_text()):
            seen.add(name)
            assert name in known, f"{path.relative_to(INFRA)}: {name} is not a setting"
    assert "FS_SEARCH_SPILL_URL" in seen


def test_configmap_sets_the_required_sampling_choice() -> None:
    """The ConfigMap sets FS_SEARCH_SAMPLE_OVER_CAP_GLOB_RESULTS to true or false."""
    assert _config_map()["FS_SEARCH_SAMPLE_OVER_CAP_GLOB_RESULTS"] in ("true", "false")


def test_temporal_env_names_are_read_by_envconfig(tmp_path: Path) -> None:
    """Every TEMPORAL_* name in infra/ changes what temporalio.envconfig loads."""
    cert = tmp_path / "cert.pem"
    cert.write_text("x")
    baseline = ClientConfig.load_client_connect_config(disable_file=True, override_env_vars={})
    names = {n for p in _text_files() for n in re.findall(r"\bTEMPORAL_[A-Z0-9_]+", p.read_text())}
    assert "TEMPORAL_ADDRESS" in names
    for name in sorted(names):
        value = str(cert) if name.endswith("_PATH") else "true" if name == "TEMPORAL_TLS" else "a:1"
        loaded = ClientConfig.load_client_connect_config(
            disable_file=True, override_env_vars={name: value}
        )
        assert loaded != baseline, f"{name} is not a Temporal envconfig setting"


@pytest.mark.parametrize("workload", _workloads(), ids=_workload_ids())
def test_workload_temporal_env_connects_where_the_configmap_says(workload: dict[str, Any]) -> None:
    """The workload's TEMPORAL_* env loads through envconfig to the ConfigMap's address."""
    env = {k: v for k, v in _env(workload).items() if k.startswith("TEMPORAL_")}
    loaded = ClientConfig.load_client_connect_config(disable_file=True, override_env_vars=env)
    assert loaded["target_host"] == _config_map()["TEMPORAL_ADDRESS"]
    assert loaded.get("namespace") == _config_map()["TEMPORAL_NAMESPACE"]


def test_queue_names_match_task_queue_for() -> None:
    """Each workload's queue, task_queue_for(id), is what its manifest and the README name."""
    manifests_text = "\n".join(p.read_text() for p in sorted(K8S.glob("*.yaml")))
    readme = (INFRA / "README.md").read_text()
    ids = {_parsed_args(w).workspace_id for w in _workloads()}
    for workspace_id in ids:
        assert task_queue_for(workspace_id) in manifests_text
        assert task_queue_for(workspace_id) in readme
    everything = "\n".join(p.read_text() for p in _text_files())
    mentioned = re.findall(
        r"(?:queue(?: is)?|--task-queue|schedules on)\s+`?(fs-search/[A-Za-z0-9](?:[\w.-]*\w)?)",
        everything,
    )
    assert mentioned
    for queue in mentioned:
        assert queue in {task_queue_for(i) for i in ids}, f"{queue} is no workload's queue"


# --- S3 --------------------------------------------------------------------------------------------


def _allows(policy: dict[str, Any], action: str, resource: str) -> bool:
    for statement in policy["Statement"]:
        actions = statement["Action"]
        resources = statement["Resource"]
        actions = [actions] if isinstance(actions, str) else actions
        resources = [resources] if isinstance(resources, str) else resources
        if (
            statement["Effect"] == "Allow"
            and any(fnmatch.fnmatchcase(action, a) for a in actions)
            and any(fnmatch.fnmatchcase(resource, r) for r in resources)
        ):
            return True
    return False


async def test_iam_policy_covers_spill_artifacts_payloads_and_the_bucket(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The policy allows Put/GetObject on the real spill and payload keys, ListBucket, no more."""
    policy = json.loads((INFRA / "iam-policy.json").read_text())
    spill_bucket, spill_key = await _spill_object()
    payload_bucket, payload_key = await _payload_object(monkeypatch)
    assert spill_bucket == payload_bucket
    for key in (spill_key, payload_key):
        for action in ("s3:PutObject", "s3:GetObject"):
            assert _allows(policy, action, f"arn:aws:s3:::{spill_bucket}/{key}"), (action, key)
    assert _allows(policy, "s3:ListBucket", f"arn:aws:s3:::{spill_bucket}")
    assert not _allows(policy, "s3:PutObject", f"arn:aws:s3:::{spill_bucket}/elsewhere/x")
    assert not _allows(policy, "s3:DeleteObject", f"arn:aws:s3:::{spill_bucket}/{spill_key}")


async def test_lifecycle_expires_spill_artifacts_and_payloads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Enabled rules expire the real spill keys after the file store's TTL and payload keys later."""
    rules = json.loads((INFRA / "s3-lifecycle.json").read_text())["Rules"]

    def expiry_days(key: str) -> int:
        matching = [
            r
            for r in rules
            if r["Status"] == "Enabled"
            and key.startswith(r["Filter"]["Prefix"])
            and "Days" in r.get("Expiration", {})
        ]
        assert len(matching) == 1, f"{key}: {len(matching)} expiring rules"
        return matching[0]["Expiration"]["Days"]

    _, spill_key = await _spill_object()
    _, payload_key = await _payload_object(monkeypatch)
    ttl_days = FsSearchConfig.model_fields["spill_ttl_hours"].default / 24
    assert expiry_days(spill_key) == ttl_days
    assert expiry_days(payload_key) > expiry_days(spill_key)
    assert all("AbortIncompleteMultipartUpload" in r for r in rules)


def test_lifecycle_is_a_valid_put_bucket_lifecycle_configuration() -> None:
    """s3-lifecycle.json validates against botocore's PutBucketLifecycleConfiguration input."""
    model = botocore.session.get_session().get_service_model("s3")
    shape = model.operation_model("PutBucketLifecycleConfiguration").input_shape
    document = json.loads((INFRA / "s3-lifecycle.json").read_text())
    report = ParamValidator().validate(
        {"Bucket": "my-bucket", "LifecycleConfiguration": document}, shape
    )
    assert not report.has_errors(), report.generate_report()


# --- OpenTelemetry ---------------------------------------------------------------------------------


def _collector() -> dict[str, Any]:
    (config,) = _docs(INFRA / "otel-collector.yaml")
    return config


def test_collector_receives_otlp_and_pipelines_use_defined_components() -> None:
    """OTLP gRPC 4317 + HTTP 4318 in; traces and metrics pipelines name only defined components."""
    config = _collector()
    protocols = config["receivers"]["otlp"]["protocols"]
    assert protocols["grpc"]["endpoint"].endswith(":4317")
    assert protocols["http"]["endpoint"].endswith(":4318")
    pipelines = config["service"]["pipelines"]
    assert {"traces", "metrics"} <= set(pipelines)
    for name, pipeline in pipelines.items():
        assert "otlp" in pipeline["receivers"], name
        for section in ("receivers", "processors", "exporters"):
            for component in pipeline.get(section, []):
                assert component in (config.get(section) or {}), f"{name}: {component} undefined"
        assert "batch" in pipeline["processors"]


def test_worker_otel_env_points_at_the_collector() -> None:
    """The ConfigMap's OTEL exporters are supported and its endpoint port is the collector's."""
    data = _config_map()
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER"):
        assert data[name] in ("otlp", "console", "none"), name
    assert data["OTEL_SERVICE_NAME"]
    protocol = data.get("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    assert protocol in ("grpc", "http/protobuf")
    receiver = _collector()["receivers"]["otlp"]["protocols"][
        "grpc" if protocol == "grpc" else "http"
    ]
    port = urlparse(data["OTEL_EXPORTER_OTLP_ENDPOINT"]).port
    assert receiver["endpoint"].endswith(f":{port}")


# --- the image -------------------------------------------------------------------------------------


def _docker_user_uid() -> int:
    users = [rest for ins, rest in _dockerfile() if ins == "USER"]
    assert users, "the image must not run as root"
    uid = users[-1].split(":")[0]
    assert uid.isdigit(), "USER must be numeric so runAsNonRoot can check it"
    return int(uid)


def test_dockerfile_runs_fs_search_worker_as_non_root() -> None:
    """ENTRYPOINT ends in `fs-search worker`, CMD's args parse, USER is non-root, base is 3.11."""
    entrypoint = _docker_json("ENTRYPOINT")
    assert entrypoint[-2:] == ["fs-search", "worker"]
    args = build_parser().parse_args(["worker", *_docker_json("CMD")])
    assert args.workspace == "/workspace"
    assert _docker_user_uid() != 0
    (base,) = [rest for ins, rest in _dockerfile() if ins == "FROM"]
    assert base.startswith("python:3.11-slim")


def test_dockerfile_pip_installs_the_repository() -> None:
    """The repo is copied in and installed with `pip install --no-cache-dir` from that copy."""
    instructions = _dockerfile()
    copies = [rest.split() for ins, rest in instructions if ins == "COPY"]
    destinations = [c[-1] for c in copies if c[0] == "."]
    assert destinations, "COPY . <dir> brings the repository in"
    installs = [rest for ins, rest in instructions if ins == "RUN" and "pip install" in rest]
    assert any(
        re.search(rf"pip install --no-cache-dir {re.escape(d)}(\s|$)", run)
        for run in installs
        for d in destinations
    ), installs
    assert not any(ins == "ADD" and "http" in rest for ins, rest in instructions)


def test_docker_context_keeps_what_pip_install_needs() -> None:
    """The Dockerfile's ignore file keeps pyproject.toml, README.md and the package directories."""
    ignore = INFRA / "Dockerfile.dockerignore"
    patterns = [
        line.strip()
        for line in ignore.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    needed = ["pyproject.toml", "README.md", "activities", "workflows", "worker"]
    for path in needed:
        assert (INFRA.parent / path).exists(), path
        hits = [p for p in patterns if fnmatch.fnmatchcase(path, p.lstrip("/"))]
        assert not hits, f"{path} is excluded by {hits}"


def test_manifest_image_is_the_documented_one() -> None:
    """The workloads run the image the README tells you to build and push."""
    readme = (INFRA / "README.md").read_text()
    for workload in _workloads():
        image = _worker_container(workload)["image"]
        assert f"-t {image} " in readme, image


@pytest.mark.parametrize("workload", _workloads(), ids=_workload_ids())
def test_every_workload_names_its_host_by_the_node(workload: dict[str, Any]) -> None:
    """FS_SEARCH_HOST_ID is the pod's node (downward API): a rollout's new pod on the same node
    is the same host as the old one, so the queue check never refuses it."""
    env = {item["name"]: item for item in _worker_container(workload).get("env", [])}
    assert env.get(HOST_ID_ENV, {}).get("valueFrom") == {"fieldRef": {"fieldPath": "spec.nodeName"}}
