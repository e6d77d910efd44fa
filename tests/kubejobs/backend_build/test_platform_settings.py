"""The platform settings of propeller's ``plugins.k8s`` section reach every pod the backend builds, for every
job kind, and yield to what the task sets itself. What each setting does is Flyte's (flytek8s pod building):
image-pull-policy and default-security-context on the task's container, default-affinity,
default-pod-security-context, default-pod-dns-config and enable-host-networking-pod on the pod."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import SimpleNamespace
from typing import Any

import pytest
from flytekitplugins.kubejobs.backend import BackendConfig

AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["train"]}]}]
        }
    }
}
SETTINGS: dict[str, Any] = {
    "image-pull-policy": "Always",
    "default-affinity": AFFINITY,
    "default-security-context": {"runAsNonRoot": True, "allowPrivilegeEscalation": False},
    "default-pod-security-context": {"fsGroup": 2000},
    "default-pod-dns-config": {"nameservers": ["10.0.0.10"], "options": [{"name": "ndots", "value": "2"}]},
    "enable-host-networking-pod": False,
}
WORKERS = {"workerReplicas": {"replicas": 1}}
CUSTOMS: dict[str, tuple[dict[str, Any], int]] = {
    "pytorch": (WORKERS, 1),
    "tensorflow": ({"chiefReplicas": {"replicas": 1}, **WORKERS}, 1),
    "mpi": ({**WORKERS, "slots": 1}, 1),
    "ray": ({"rayCluster": {"workerGroupSpec": [{"groupName": "w", "replicas": 1}]}}, 0),
}
TASK_CONTAINERS = {"pytorch": "pytorch", "tensorflow": "tensorflow", "mpi": "mpi", "ray": ("ray-head", "ray-worker")}


def _pod_specs(obj: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    spec = obj["spec"]
    if obj["kind"] == "RayJob":
        cluster = spec["rayClusterSpec"]
        yield cluster["headGroupSpec"]["template"]["spec"]
        for group in cluster["workerGroupSpecs"]:
            yield group["template"]["spec"]
        return
    replicas = next(value for key, value in spec.items() if key.endswith("ReplicaSpecs"))
    for replica in replicas.values():
        yield replica["template"]["spec"]


@pytest.mark.parametrize("task_type", sorted(CUSTOMS))
def test_every_platform_setting_reaches_every_pod(kit: SimpleNamespace, task_type: str) -> None:
    custom, version = CUSTOMS[task_type]
    config = BackendConfig.from_flyte_config({"k8s": SETTINGS})
    obj = kit.build(kit.template(task_type, custom, version), config=config)
    specs = list(_pod_specs(obj))
    assert len(specs) >= 2
    names = TASK_CONTAINERS[task_type]
    for spec in specs:
        assert spec["affinity"] == AFFINITY
        assert spec["securityContext"] == SETTINGS["default-pod-security-context"]
        assert spec["dnsConfig"] == SETTINGS["default-pod-dns-config"]
        assert spec["hostNetwork"] is False
        (task_container,) = [c for c in spec["containers"] if c["name"] in names]
        assert task_container["imagePullPolicy"] == "Always"
        assert task_container["securityContext"] == SETTINGS["default-security-context"]


def test_the_tasks_own_settings_win_over_the_platform_defaults(kit: SimpleNamespace) -> None:
    own_affinity: dict[str, Any] = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}
    pod_spec = {
        "containers": [
            {"name": "primary", "image": "img:1", "imagePullPolicy": "Never", "securityContext": {"runAsUser": 7}}
        ],
        "affinity": own_affinity,
        "securityContext": {"fsGroup": 1},
        "dnsConfig": {"nameservers": ["1.1.1.1"]},
        "hostNetwork": True,
    }
    config = BackendConfig.from_flyte_config({"k8s": SETTINGS})
    template = kit.template("pytorch", WORKERS, pod_spec=pod_spec, primary="primary")
    obj = kit.build(template, config=config)
    for spec in _pod_specs(obj):
        assert (spec["affinity"], spec["securityContext"], spec["dnsConfig"]) == (
            own_affinity,
            {"fsGroup": 1},
            {"nameservers": ["1.1.1.1"]},
        )
        assert spec["hostNetwork"] is True
        (container,) = [c for c in spec["containers"] if c["name"] == "pytorch"]
        assert (container["imagePullPolicy"], container["securityContext"]) == ("Never", {"runAsUser": 7})
