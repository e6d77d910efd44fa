"""PyTorchJob building, v0 and v1 customs (expected values: flyte-backend-behaviour.md §1.2-1.3, §10)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from flytekitplugins.kubejobs.backend import BackendConfig, BuildError
from flytekitplugins.kubejobs.backend.plugins_config import K8sConfig

ELASTIC = {"rdzvBackend": "c10d", "minReplicas": 1, "maxReplicas": 4, "nprocPerNode": 8, "maxRestarts": 3}

# (custom, version, expected {role: replicas}, elastic expected)
CASES = [
    (
        "v1 deprecated fields",
        {"workerReplicas": {"replicas": 3}, "masterReplicas": {"replicas": 5}},
        1,
        {"Master": 1, "Worker": 3},
        False,
    ),
    (
        "v1 common wins",
        {"workerReplicas": {"replicas": 3, "common": {"replicas": 2}}},
        1,
        {"Master": 1, "Worker": 2},
        False,
    ),
    ("v1 zero workers is master-only", {"workerReplicas": {}}, 1, {"Master": 1}, False),
    ("v1 missing roles", {}, 1, {"Master": 1}, False),
    ("v1 elastic drops master", {"workerReplicas": {"replicas": 4}, "elasticConfig": ELASTIC}, 1, {"Worker": 4}, True),
    ("v0 workers", {"workers": 3}, 0, {"Master": 1, "Worker": 3}, False),
    ("v0 elastic", {"workers": 2, "elasticConfig": ELASTIC}, 0, {"Worker": 2}, True),
    ("v1 struct floats", {"workerReplicas": {"replicas": 2.0}}, 1, {"Master": 1, "Worker": 2}, False),
    ("v1 snake case", {"worker_replicas": {"replicas": 2}}, 1, {"Master": 1, "Worker": 2}, False),
]


@pytest.mark.parametrize(("custom", "version", "roles", "elastic"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_replica_specs(kit: SimpleNamespace, custom: Any, version: Any, roles: Any, elastic: Any) -> None:
    obj = kit.build(kit.template("pytorch", custom, version))
    assert obj["apiVersion"] == "kubeflow.org/v1" and obj["kind"] == "PyTorchJob"
    specs = obj["spec"]["pytorchReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == roles
    for spec in specs.values():
        assert [c["name"] for c in spec["template"]["spec"]["containers"]] == ["pytorch"]
        assert spec["restartPolicy"] == "Never"
        assert spec["template"]["spec"]["containers"][0]["image"] == "img:1"
    if elastic:  # all five fields, always
        assert obj["spec"]["elasticPolicy"] == {
            "rdzvBackend": "c10d",
            "minReplicas": 1,
            "maxReplicas": 4,
            "nProcPerNode": 8,
            "maxRestarts": 3,
        }
    else:
        assert "elasticPolicy" not in obj["spec"]


def test_elastic_policy_writes_zeros_and_validation_refuses_them(kit: SimpleNamespace) -> None:
    from flytekitplugins.kubejobs.backend import build_object

    t = kit.template("pytorch", {"workerReplicas": {"replicas": 1}, "elasticConfig": {}})
    obj = build_object(t, kit.metadata(), validate=False)  # what Flyte writes (quirk 7)
    assert obj["spec"]["elasticPolicy"] == {
        "rdzvBackend": "",
        "minReplicas": 0,
        "maxReplicas": 0,
        "nProcPerNode": 0,
        "maxRestarts": 0,
    }
    # deviation: validated, the object the training operator would refuse is a BuildError here
    with pytest.raises(BuildError, match=r"spec\.elasticPolicy\.minReplicas"):
        kit.build(t)


def test_deviation_elastic_without_workers_is_an_error(kit: SimpleNamespace) -> None:
    # Flyte emits an empty pytorchReplicaSpecs, which the training-operator webhook rejects on the cluster.
    with pytest.raises(BuildError, match="elastic PyTorch job needs at least one worker"):
        kit.build(kit.template("pytorch", {"elasticConfig": ELASTIC}))


def test_worker_env_names_and_error_aggregation(kit: SimpleNamespace) -> None:
    obj = kit.build(kit.template("pytorch", {"workerReplicas": {"replicas": 2}}))
    worker = obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    master = obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert worker["env"][-1] == {"name": "_F_WN", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    assert "_F_WN" not in kit.env_of(master) and "_F_DES" not in kit.env_of(worker)
    cfg = BackendConfig(k8s=K8sConfig(enable_distributed_error_aggregation=True))
    obj = kit.build(kit.template("pytorch", {"workerReplicas": {"replicas": 2}}), config=cfg)
    worker = obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert worker["env"][-2:] == [
        {"name": "_F_WN", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "_F_DES", "value": "Earliest"},
    ]


def test_v0_has_no_env_names(kit: SimpleNamespace) -> None:
    obj = kit.build(kit.template("pytorch", {"workers": 2}, 0))
    worker = obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert "_F_WN" not in kit.env_of(worker)


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ({}, {"cleanPodPolicy": "None"}),
        (
            {
                "cleanPodPolicy": "CLEANPOD_POLICY_ALL",
                "ttlSecondsAfterFinished": 60,
                "activeDeadlineSeconds": 3600,
                "backoffLimit": 2,
            },
            {"cleanPodPolicy": "All", "ttlSecondsAfterFinished": 60, "activeDeadlineSeconds": 3600, "backoffLimit": 2},
        ),
        ({"cleanPodPolicy": 1, "backoffLimit": 0}, {"cleanPodPolicy": "Running"}),
    ],
)
def test_run_policy(kit: SimpleNamespace, policy: dict[str, Any], expected: dict[str, Any]) -> None:
    obj = kit.build(kit.template("pytorch", {"workerReplicas": {"replicas": 1}, "runPolicy": policy}))
    assert obj["spec"]["runPolicy"] == expected


def test_no_run_policy_is_an_empty_object(kit: SimpleNamespace) -> None:
    assert kit.build(kit.template("pytorch", {"workerReplicas": {"replicas": 1}}))["spec"]["runPolicy"] == {}


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("RESTART_POLICY_ON_FAILURE", "OnFailure"),
        ("RESTART_POLICY_ALWAYS", "Always"),
        (2, "Always"),
        ("RESTART_POLICY_NEVER", "Never"),
    ],
)
def test_restart_policy(kit: SimpleNamespace, policy: Any, expected: str) -> None:
    custom = {"workerReplicas": {"replicas": 1, "restartPolicy": policy}}
    obj = kit.build(kit.template("pytorch", custom))
    assert obj["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == expected
    assert obj["spec"]["pytorchReplicaSpecs"]["Master"]["restartPolicy"] == "Never"


def test_image_precedence_role_over_override_over_task(kit: SimpleNamespace) -> None:
    custom = {"workerReplicas": {"replicas": 1, "image": "worker:2"}, "masterReplicas": {}}
    obj = kit.build(kit.template("pytorch", custom), kit.metadata(override_image="node:3"))
    specs = obj["spec"]["pytorchReplicaSpecs"]
    assert specs["Worker"]["template"]["spec"]["containers"][0]["image"] == "worker:2"
    assert specs["Master"]["template"]["spec"]["containers"][0]["image"] == "node:3"


def _res(obj: dict[str, Any], role: str) -> Any:
    c = obj["spec"]["pytorchReplicaSpecs"][role]["template"]["spec"]["containers"][0]["resources"]
    return {side: {k: str(v) for k, v in c.get(side, {}).items()} for side in ("requests", "limits")}


def test_resources_role_over_task_over_platform_defaults(kit: SimpleNamespace) -> None:
    worker_res = {"requests": [{"name": "CPU", "value": "4"}], "limits": [{"name": "MEMORY", "value": "8Gi"}]}
    custom = {"workerReplicas": {"replicas": 1, "resources": worker_res}, "masterReplicas": {"resources": {}}}
    t = kit.template(
        "pytorch", custom, requests={"cpu": "2", "gpu": "1", "ephemeral-storage": "1Gi"}, limits={"gpu": "1"}
    )
    obj = kit.build(t, kit.metadata(override_requests={"cpu": "3", "memory": "3Gi"}))
    worker, master = _res(obj, "Worker"), _res(obj, "Master")
    # Worker: role cpu/memory (defaulted: cpu limit <- request, memory request <- limit); task GPU and storage kept;
    # the node override is replaced wholesale by the role resources (quirk 4).
    assert kit.quantities(worker["requests"]) == kit.quantities(
        {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "1", "ephemeral-storage": "1Gi"}
    )
    assert kit.quantities(worker["limits"]) == kit.quantities(
        {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "1", "ephemeral-storage": "1Gi"}
    )
    # Master has an empty resources message: ignored, so task < node override < platform defaults.
    assert kit.quantities(master["requests"]) == kit.quantities(
        {"cpu": "3", "memory": "3Gi", "nvidia.com/gpu": "1", "ephemeral-storage": "1Gi"}
    )
    assert kit.quantities(master["limits"]) == kit.quantities(
        {"cpu": "3", "memory": "3Gi", "nvidia.com/gpu": "1", "ephemeral-storage": "1Gi"}
    )


def test_platform_defaults_fill_cpu_and_memory(kit: SimpleNamespace) -> None:
    cfg = BackendConfig(k8s=K8sConfig(default_cpus="500m", default_memory="2Gi"))
    obj = kit.build(kit.template("pytorch", {"workerReplicas": {"replicas": 1}}, limits={"memory": "4Gi"}), config=cfg)
    res = _res(obj, "Worker")
    assert kit.quantities(res["requests"]) == kit.quantities({"cpu": "500m", "memory": "4Gi"})
    assert kit.quantities(res["limits"]) == kit.quantities({"cpu": "500m", "memory": "4Gi"})


def test_request_above_limit_is_lowered_to_the_limit(kit: SimpleNamespace) -> None:
    custom = {
        "workerReplicas": {
            "replicas": 1,
            "resources": {"requests": [{"name": "CPU", "value": "8"}], "limits": [{"name": "CPU", "value": "2"}]},
        }
    }
    res = _res(kit.build(kit.template("pytorch", custom)), "Worker")
    assert kit.q(res["requests"]["cpu"]) == kit.q(res["limits"]["cpu"]) == 2


def test_pod_target_renames_only_the_primary_container(kit: SimpleNamespace) -> None:
    pod = {
        "containers": [
            {"name": "sidecar", "image": "side:1"},
            {"name": "primary", "image": "img:9", "args": ["train"]},
        ],
        "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory"}}],
    }
    t = kit.template(
        "pytorch", {"workerReplicas": {"replicas": 1}}, pod_spec=pod, primary="primary", pod_labels={"team": "ml"}
    )
    obj = kit.build(t, kit.metadata(labels={"exec": "e1"}))
    spec = obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    assert [c["name"] for c in spec["spec"]["containers"]] == ["sidecar", "pytorch"]
    assert spec["spec"]["volumes"] == pod["volumes"]
    assert spec["metadata"]["labels"] == {"team": "ml", "exec": "e1"}
    # _F_WN lands on containers[0] even when that is a sidecar (quirk 8)
    assert spec["spec"]["containers"][0]["env"][-1]["name"] == "_F_WN"


def test_missing_primary_container_is_an_error(kit: SimpleNamespace) -> None:
    t = kit.template(
        "pytorch", {"workerReplicas": {"replicas": 1}}, pod_spec={"containers": [{"name": "a"}]}, primary="primary"
    )
    with pytest.raises(BuildError, match=r"primary container \[primary\] not defined"):
        kit.build(t)
    t = kit.template("pytorch", {"workerReplicas": {"replicas": 1}}, pod_spec={"containers": [{"name": "a"}]})
    with pytest.raises(BuildError, match=r"primary_container_name"):
        kit.build(t)


@pytest.mark.parametrize("version", [2, 7])
def test_unsupported_version(kit: SimpleNamespace, version: int) -> None:
    with pytest.raises(BuildError, match=rf"unsupported task template version \[{version}\]"):
        kit.build(kit.template("pytorch", {"workerReplicas": {"replicas": 1}}, version))


def test_missing_custom(kit: SimpleNamespace) -> None:
    with pytest.raises(BuildError, match="no custom"):
        kit.build(kit.template("pytorch", None))
