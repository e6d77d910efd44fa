"""BackendConfig from propeller configuration, and object names."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from flytekitplugins.kubejobs.backend import BackendConfig
from flytekitplugins.kubejobs.backend.naming import object_name
from flytekitplugins.kubejobs.backend.plugins_config import parse_go_duration
from flytekitplugins.kubejobs.wire.kinds import KINDS

PROPELLER = """
propeller:
  workers: 4
plugins:
  k8s:
    default-cpus: 500m
    default-memory: 1Gi
    gpu-resource-name: amd.com/gpu
    default-labels: {team: ml}
    default-annotations: {a: b}
    default-env-vars: {X: "1"}
    default-tolerations: [{key: d, operator: Exists}]
    resource-tolerations:
      amd.com/gpu: [{key: gpu, operator: Exists, effect: NoSchedule}]
    add-tolerations-for-extended-resources: [example.com/fpga]
    interruptible-tolerations: [{key: spot, operator: Exists}]
    interruptible-node-selector: {pool: spot}
    interruptible-node-selector-requirement: {key: spot, operator: In, values: ["true"]}
    enable-distributed-error-aggregation: true
    inject-finalizer: true
    default-node-selector: {zone: a}
    default-affinity: {nodeAffinity: {}}
    scheduler-name: volcano
    image-pull-policy: Always
    default-pod-template-name: base
    default-security-context: {runAsUser: 1000}
    default-pod-security-context: {fsGroup: 2000}
    default-pod-dns-config: {nameservers: [1.1.1.1]}
    enable-host-networking-pod: true
    gpu-device-node-label: example.com/accelerator
    gpu-partition-size-node-label: example.com/partition
    non-interruptible-node-selector-requirement: {key: spot, operator: NotIn, values: ["true"]}
  ray:
    enableIngress: true
    dashboardURLTemplate: {displayName: Dashboard, templateUris: ["https://ray/{{ .podName }}"]}
    logs: {kubernetes-enabled: true}
    shutdownAfterJobFinishes: false
    ttlSecondsAfterFinished: 120
    serviceType: ClusterIP
    includeDashboard: false
    dashboardHost: 127.0.0.1
    enableUsageStats: true
    serviceAccount: ray-sa
    defaults:
      headNode: {startParameters: {block: "true"}, ipAddress: $MY_IP}
    logsSidecar: {name: logs, image: busybox}
  kf-operator:
    timeout: 1m30s
  logs:
    kubernetes-enabled: false
    kubernetes-template-uri: "https://k8s/{{ .podName }}"
"""


def _check(cfg: BackendConfig) -> None:
    k8s, ray = cfg.k8s, cfg.ray
    assert (k8s.default_cpus, k8s.default_memory, k8s.gpu_resource_name) == ("500m", "1Gi", "amd.com/gpu")
    assert k8s.default_labels == {"team": "ml"} and k8s.default_annotations == {"a": "b"}
    assert k8s.default_env_vars == {"X": "1"}
    assert k8s.resource_tolerations == {"amd.com/gpu": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]}
    assert k8s.add_tolerations_for_extended_resources == ["example.com/fpga"]
    assert k8s.interruptible_node_selector_requirement == {"key": "spot", "operator": "In", "values": ["true"]}
    assert k8s.enable_distributed_error_aggregation is True
    assert k8s.default_tolerations == [{"key": "d", "operator": "Exists"}]
    assert k8s.interruptible_tolerations == [{"key": "spot", "operator": "Exists"}]
    assert k8s.interruptible_node_selector == {"pool": "spot"}
    assert ray.enable_ingress is True
    assert (ray.shutdown_after_job_finishes, ray.ttl_seconds_after_finished, ray.service_type) == (
        False,
        120,
        "ClusterIP",
    )
    assert (ray.include_dashboard, ray.dashboard_host, ray.enable_usage_stats, ray.service_account) == (
        False,
        "127.0.0.1",
        True,
        "ray-sa",
    )
    assert ray.head_start_parameters == {"block": "true"} and ray.head_ip_address == "$MY_IP"
    assert ray.worker_start_parameters == {"disable-usage-stats": "true"}
    assert ray.logs_sidecar == {"name": "logs", "image": "busybox"}
    assert cfg.kf_operator.timeout == 90.0
    assert cfg.logs.kubernetes_template_uri == "https://k8s/{{ .podName }}"
    assert cfg.logs.kubernetes_enabled is False


def test_from_yaml_whole_config_section_and_file(tmp_path: Path) -> None:
    _check(BackendConfig.from_yaml(PROPELLER))
    import yaml

    section = yaml.safe_dump(yaml.safe_load(PROPELLER)["plugins"])
    _check(BackendConfig.from_yaml(section))
    path = tmp_path / "propeller.yaml"
    path.write_text(PROPELLER)
    _check(BackendConfig.from_yaml(path))
    _check(BackendConfig.from_yaml(str(path)))


# plugins.k8s.inject-finalizer is read by nothing on purpose (README deviation 11: no finalizer).
IGNORED_KEYS = {("k8s", "inject-finalizer")}


def _sections() -> list[tuple[str, str, object]]:
    import yaml

    plugins = yaml.safe_load(PROPELLER)["plugins"]
    return [(section, key, value) for section, keys in plugins.items() for key, value in keys.items()]


@pytest.mark.parametrize(("section", "key", "value"), _sections(), ids=[f"{s}.{k}" for s, k, _ in _sections()])
def test_every_propeller_key_is_read_with_its_spelling(section: Any, key: Any, value: Any) -> None:
    # One key at a time against the defaults: a misspelt key would be ignored and leave the defaults.
    cfg = BackendConfig.from_flyte_config({section: {key: value}})
    if (section, key) in IGNORED_KEYS:
        assert cfg == BackendConfig()
    else:
        assert cfg != BackendConfig(), f"plugins.{section}.{key} is not read"


def test_defaults_match_flyte() -> None:
    cfg = BackendConfig.from_flyte_config({})
    assert cfg == BackendConfig()
    assert cfg.k8s.default_annotations == {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
    assert (cfg.k8s.default_cpus, cfg.k8s.default_memory) == ("1000m", "1024Mi")
    assert (cfg.ray.shutdown_after_job_finishes, cfg.ray.ttl_seconds_after_finished) == (True, 3600)
    assert cfg.ray.service_type == "NodePort" and cfg.ray.logs is None
    assert cfg.kf_operator.timeout == 60.0
    assert cfg.schemas() is None


def test_legacy_node_ip_address() -> None:
    cfg = BackendConfig.from_flyte_config({"ray": {"nodeIPAddress": "$OLD"}})
    assert cfg.ray.head_ip_address == cfg.ray.worker_ip_address == "$OLD"


@pytest.mark.parametrize(
    ("plugins", "match"),
    [
        ({"k8s": {"default-cpus": "lots"}}, r"plugins\.k8s\.default-cpus"),
        ({"k8s": {"default-tolerations": {"key": "x"}}}, r"plugins\.k8s\.default-tolerations must be a list"),
        ({"k8s": {"enable-distributed-error-aggregation": "yes"}}, r"enable-distributed-error-aggregation"),
        ({"ray": {"ttlSecondsAfterFinished": "60"}}, r"plugins\.ray\.ttlSecondsAfterFinished must be an int"),
        ({"kf-operator": {"timeout": "soon"}}, r"plugins\.kf-operator\.timeout"),
        ({"k8s": []}, r"plugins\.k8s must be a mapping"),
    ],
)
def test_bad_config_names_the_key(plugins: dict[str, Any], match: str) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        BackendConfig.from_flyte_config(plugins)


@pytest.mark.parametrize(
    ("text", "seconds"), [("1m", 60), ("1h30m", 5400), ("90s", 90), ("500ms", 0.5), ("0", 0), (30, 30)]
)
def test_go_durations(text: Any, seconds: float) -> None:
    assert parse_go_duration("t", text) == pytest.approx(seconds)


def test_schemas_are_loaded_once(crd_dir: Path) -> None:
    cfg = BackendConfig(crd_dir=str(crd_dir))
    assert cfg.schemas() is not None and cfg.schemas() is BackendConfig(crd_dir=str(crd_dir)).schemas()


DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


@pytest.mark.parametrize("raw", ["abc-n0-0", "A" * 100, "exec_1-Node.2-0", "0abc-n0-1", "-x-", "é" * 70, "", "a" * 63])
@pytest.mark.parametrize("limit", sorted({k.max_name_length for k in KINDS.values()}))
def test_names_are_dns_1035_within_the_limit(raw: Any, limit: Any) -> None:
    name = object_name(raw, limit)
    assert DNS_1035.match(name) and len(name) <= limit
    assert object_name(raw, limit) == name


def test_long_names_keep_a_prefix_and_stay_distinct() -> None:
    a, b = object_name("x" * 60 + "-n0-0", 47), object_name("x" * 60 + "-n0-1", 47)
    assert a != b and a.startswith("xxxx") and len(a) == 47


def test_object_name_from_execution_id(kit: SimpleNamespace) -> None:
    obj = kit.build(
        kit.template("pytorch", {"workerReplicas": {"replicas": 1}}), kit.metadata(name="f7e", node="n1", attempt=2)
    )
    assert obj["metadata"]["name"] == "f7e-n1-2"


def test_from_yaml_names_a_missing_file() -> None:
    with pytest.raises(ValueError, match="neither an existing file nor YAML text"):
        BackendConfig.from_yaml("/no/such/propeller.yaml")
