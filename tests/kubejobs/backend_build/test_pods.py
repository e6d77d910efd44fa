"""The shared pod building every replica and group starts from (flyte-backend-behaviour.md §6)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from flyteidl.core import tasks_pb2
from flytekitplugins.kubejobs.backend import BackendConfig, BuildError

GPU_T = {"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
SPOT_T = {"key": "spot", "operator": "Exists", "effect": "NoSchedule"}
DEFAULT_T = {"key": "d", "operator": "Exists"}
REQ = {"key": "spot", "operator": "In", "values": ["true"]}
NON_REQ = {"key": "spot", "operator": "DoesNotExist"}

SCHED_CONFIG = BackendConfig.from_flyte_config(
    {
        "k8s": {
            "resource-tolerations": {"nvidia.com/gpu": [GPU_T]},
            "interruptible-tolerations": [SPOT_T],
            "default-tolerations": [DEFAULT_T],
            "interruptible-node-selector": {"pool": "spot"},
            "default-node-selector": {"zone": "a"},
            "interruptible-node-selector-requirement": REQ,
            "non-interruptible-node-selector-requirement": NON_REQ,
            "default-labels": {"dl": "1"},
            "default-annotations": {"da": "1"},
            "default-env-vars": {"DEFAULT_ENV": "x"},
            "scheduler-name": "volcano",
        }
    }
)


def _specs(obj: dict[str, Any]) -> Any:
    return obj["spec"]["pytorchReplicaSpecs"]


def test_resource_tolerations_only_where_requested(kit: SimpleNamespace) -> None:
    custom = {"workerReplicas": {"replicas": 1, "resources": {"limits": [{"name": "GPU", "value": "1"}]}}}
    obj = kit.build(kit.template("pytorch", custom), config=SCHED_CONFIG)
    worker = _specs(obj)["Worker"]["template"]["spec"]
    master = _specs(obj)["Master"]["template"]["spec"]
    assert worker["tolerations"] == [GPU_T, DEFAULT_T]
    assert master["tolerations"] == [DEFAULT_T]
    assert worker["schedulerName"] == "volcano"


@pytest.mark.parametrize(
    ("interruptible", "tolerations", "selector", "requirement"),
    [
        (True, [SPOT_T, DEFAULT_T], {"zone": "a", "pool": "spot"}, REQ),
        (False, [DEFAULT_T], {"zone": "a"}, NON_REQ),
    ],
)
def test_interruptible_scheduling(
    kit: SimpleNamespace, interruptible: bool, tolerations: list[Any], selector: dict[str, Any], requirement: Any
) -> None:
    obj = kit.build(
        kit.template("pytorch", {"workerReplicas": {"replicas": 1}}),
        kit.metadata(interruptible=interruptible),
        config=SCHED_CONFIG,
    )
    for spec in _specs(obj).values():
        pod = spec["template"]["spec"]
        assert pod["tolerations"] == tolerations
        assert pod["nodeSelector"] == selector
        terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert terms == [{"matchExpressions": [requirement]}]


def test_affinity_is_always_present(kit: SimpleNamespace) -> None:
    obj = kit.build(kit.template("pytorch", {"workerReplicas": {"replicas": 1}}))
    assert _specs(obj)["Worker"]["template"]["spec"]["affinity"] == {}


def test_labels_annotations_and_env(kit: SimpleNamespace) -> None:
    t = kit.template("pytorch", {"workerReplicas": {"replicas": 1}}, task_labels={"tl": "1"})
    m = kit.metadata(labels={"el": "1", "dl": "override"}, annotations={"ea": "1"}, env={"EXEC_ENV": "y"})
    obj = kit.build(t, m, config=SCHED_CONFIG)
    assert obj["metadata"]["labels"] == {"dl": "override", "tl": "1", "el": "1"}
    assert obj["metadata"]["annotations"] == {"da": "1", "ea": "1"}
    worker = _specs(obj)["Worker"]["template"]
    assert worker["metadata"]["labels"] == {"dl": "override", "el": "1"}  # task metadata goes to the CR only
    env = kit.env_of(worker["spec"]["containers"][0])
    assert env["EXEC_ENV"] == "y" and env["DEFAULT_ENV"] == "x"
    assert env["FLYTE_INTERNAL_EXECUTION_ID"] == "abc123" and env["FLYTE_INTERNAL_TASK_NAME"] == "wf.train"
    assert env["FLYTE_ATTEMPT_NUMBER"] == "0"
    assert obj["metadata"]["namespace"] == "proj-dev"


def test_service_account_from_execution(kit: SimpleNamespace) -> None:
    obj = kit.build(kit.template("pytorch", {"workerReplicas": {"replicas": 1}}), kit.metadata(sa="trainer"))
    assert {s["template"]["spec"]["serviceAccountName"] for s in _specs(obj).values()} == {"trainer"}


def test_task_template_vars_are_rendered(kit: SimpleNamespace) -> None:
    obj = kit.build(
        kit.template("pytorch", {"workerReplicas": {"replicas": 1}}),
        template_vars={"input": "s3://in", "outputPrefix": "s3://out"},
    )
    args = _specs(obj)["Worker"]["template"]["spec"]["containers"][0]["args"]
    assert args[:5] == ["pyflyte-execute", "--inputs", "s3://in", "--output-prefix", "s3://out"]
    obj = kit.build(kit.template("pytorch", {"workerReplicas": {"replicas": 1}}))
    assert "{{.input}}" in _specs(obj)["Worker"]["template"]["spec"]["containers"][0]["args"]


def test_gpu_accelerator_and_shared_memory(kit: SimpleNamespace) -> None:
    ext = tasks_pb2.ExtendedResources(
        gpu_accelerator=tasks_pb2.GPUAccelerator(device="nvidia-tesla-a100", partition_size="1g.5gb"),
        shared_memory=tasks_pb2.SharedMemory(mount_path="/dev/shm", mount_name="shm", size_limit="2Gi"),
    )
    custom = {"workerReplicas": {"replicas": 1, "resources": {"limits": [{"name": "GPU", "value": "1"}]}}}
    obj = kit.build(kit.template("pytorch", custom, extended=ext))
    worker = _specs(obj)["Worker"]["template"]["spec"]
    master = _specs(obj)["Master"]["template"]["spec"]
    terms = worker["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [
        {
            "matchExpressions": [
                {"key": "k8s.amazonaws.com/accelerator", "operator": "In", "values": ["nvidia-tesla-a100"]},
                {"key": "k8s.amazonaws.com/gpu-partition-size", "operator": "In", "values": ["1g.5gb"]},
            ]
        }
    ]
    assert {
        "key": "k8s.amazonaws.com/accelerator",
        "value": "nvidia-tesla-a100",
        "operator": "Equal",
        "effect": "NoSchedule",
    } in worker["tolerations"]
    assert master["affinity"] == {}  # no GPU limit on the master
    for pod in (worker, master):
        assert {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}} in pod["volumes"]
        assert {"name": "shm", "mountPath": "/dev/shm"} in pod["containers"][0]["volumeMounts"]


def test_node_override_of_extended_resources_replaces_each_field_it_sets(kit: SimpleNamespace) -> None:
    # Reference §6.2 step 8: the node override applies on top of the task's, field by field.
    task_ext = tasks_pb2.ExtendedResources(
        gpu_accelerator=tasks_pb2.GPUAccelerator(device="nvidia-tesla-t4", partition_size="1g.5gb"),
        shared_memory=tasks_pb2.SharedMemory(mount_path="/dev/shm", mount_name="shm"),
    )
    custom = {"workerReplicas": {"replicas": 1, "resources": {"limits": [{"name": "GPU", "value": "1"}]}}}
    meta = kit.metadata()
    meta.overrides.extended_resources.gpu_accelerator.device = "nvidia-h100"
    meta.overrides.extended_resources.gpu_accelerator.unpartitioned = True
    obj = kit.build(kit.template("pytorch", custom, extended=task_ext), meta)
    worker = _specs(obj)["Worker"]["template"]["spec"]
    terms = worker["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [
        {
            "matchExpressions": [
                {"key": "k8s.amazonaws.com/accelerator", "operator": "In", "values": ["nvidia-h100"]},
                {"key": "k8s.amazonaws.com/gpu-partition-size", "operator": "DoesNotExist"},
            ]
        }
    ]
    device_tolerations = [t for t in worker["tolerations"] if t["key"] == "k8s.amazonaws.com/accelerator"]
    assert device_tolerations == [
        {"key": "k8s.amazonaws.com/accelerator", "value": "nvidia-h100", "operator": "Equal", "effect": "NoSchedule"}
    ]
    # the override set no shared memory: the task's stays
    assert {"name": "shm", "emptyDir": {"medium": "Memory"}} in worker["volumes"]


def test_shared_memory_needs_a_name(kit: SimpleNamespace) -> None:
    ext = tasks_pb2.ExtendedResources(shared_memory=tasks_pb2.SharedMemory(mount_path="/dev/shm"))
    with pytest.raises(BuildError, match="mount name is not set"):
        kit.build(kit.template("pytorch", {"workerReplicas": {"replicas": 1}}, extended=ext))


def test_node_pod_template_override_replaces_the_pod(kit: SimpleNamespace) -> None:
    m = kit.metadata()
    m.overrides.pod_template.pod_spec.update(
        {"containers": [{"name": "main", "image": "over:1"}], "priorityClassName": "high"}
    )
    m.overrides.pod_template.primary_container_name = "main"
    m.overrides.pod_template.metadata.labels["o"] = "1"
    obj = kit.build(kit.template("pytorch", {"workerReplicas": {"replicas": 1}}), m)
    worker = _specs(obj)["Worker"]["template"]
    assert worker["spec"]["containers"][0]["name"] == "pytorch"
    assert worker["spec"]["containers"][0]["image"] == "over:1"
    assert worker["spec"]["priorityClassName"] == "high"
    assert worker["metadata"]["labels"] == {"o": "1"}


def test_no_container_is_an_error(kit: SimpleNamespace) -> None:
    t = kit.template("pytorch", {"workerReplicas": {"replicas": 1}})
    t.ClearField("container")
    with pytest.raises(BuildError, match="unable to create container with no definition"):
        kit.build(t)


def test_unknown_task_type(kit: SimpleNamespace) -> None:
    with pytest.raises(BuildError, match="task type 'spark' is not one of"):
        kit.build(kit.template("spark", {}))


def test_unparsable_task_resources_name_the_field(kit: SimpleNamespace) -> None:
    with pytest.raises(BuildError, match=r"container.resources.requests.cpu is not a valid Kubernetes quantity"):
        kit.build(kit.template("pytorch", {"workerReplicas": {"replicas": 1}}, requests={"cpu": "lots"}))


def test_inputs_are_not_mutated(kit: SimpleNamespace) -> None:
    t = kit.template("ray", {"rayCluster": {"workerGroupSpec": [{"groupName": "w", "replicas": 1}]}}, 0)
    m = kit.metadata(labels={"a": "b"})
    t_bytes, m_bytes = t.SerializeToString(deterministic=True), m.SerializeToString(deterministic=True)
    cfg = SCHED_CONFIG
    before = repr(cfg)
    kit.build(t, m, config=cfg)
    assert t.SerializeToString(deterministic=True) == t_bytes and m.SerializeToString(deterministic=True) == m_bytes
    assert repr(cfg) == before


def test_deviation_object_metadata_has_no_owner_or_finalizer(kit: SimpleNamespace) -> None:
    # Propeller's PluginManager adds ownerReferences (to the workflow CR) and an optional finalizer; a
    # connector has no owner object and deletes the job itself.
    obj = kit.build(kit.template("mpi", {"workerReplicas": {"replicas": 1}}))
    assert set(obj) == {"apiVersion", "kind", "metadata", "spec"}
    assert set(obj["metadata"]) == {"name", "namespace", "labels", "annotations"}


def test_deviation_flyte_env_is_what_the_connector_knows(kit: SimpleNamespace) -> None:
    # Go also sets FLYTE_INTERNAL_EXECUTION_WORKFLOW and FLYTE_EXECUTION_URL when propeller knows them; a
    # connector's TaskExecutionMetadata carries neither.
    obj = kit.build(kit.template("tensorflow", {"workerReplicas": {"replicas": 1}}, args=["x"]))
    c = obj["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert [e["name"] for e in c["env"]] == [
        "FLYTE_INTERNAL_EXECUTION_ID",
        "FLYTE_INTERNAL_EXECUTION_PROJECT",
        "FLYTE_INTERNAL_EXECUTION_DOMAIN",
        "FLYTE_ATTEMPT_NUMBER",
        "FLYTE_INTERNAL_TASK_PROJECT",
        "FLYTE_INTERNAL_TASK_DOMAIN",
        "FLYTE_INTERNAL_TASK_NAME",
        "FLYTE_INTERNAL_TASK_VERSION",
    ]


BASE_TEMPLATE = {
    "metadata": {"labels": {"from": "template", "team": "base"}},
    "spec": {
        "containers": [
            {"name": "default", "image": "ignored:0", "volumeMounts": [{"name": "cache", "mountPath": "/cache"}]},
            {
                "name": "primary",
                "resources": {"limits": {"example.com/nic": "1"}, "requests": {"example.com/nic": "1"}},
            },
        ],
        "volumes": [{"name": "cache", "emptyDir": {}}],
        "priorityClassName": "batch",
    },
}


@pytest.mark.parametrize("by", ["task", "default"])
def test_base_pod_template(kit: SimpleNamespace, by: str) -> None:
    if by == "task":
        cfg = BackendConfig(pod_templates={"base": BASE_TEMPLATE})
        t = kit.template("pytorch", {"workerReplicas": {"replicas": 1}})
        t.metadata.pod_template_name = "base"
    else:
        cfg = BackendConfig.from_flyte_config({"k8s": {"default-pod-template-name": "base"}})
        cfg = BackendConfig(k8s=cfg.k8s, pod_templates={"base": BASE_TEMPLATE})
        t = kit.template("pytorch", {"workerReplicas": {"replicas": 1}})
    obj = kit.build(t, kit.metadata(labels={"team": "exec"}), config=cfg)
    worker = obj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    c = worker["spec"]["containers"][0]
    assert c["name"] == "pytorch" and c["image"] == "img:1"  # the task's values win
    assert c["volumeMounts"] == [{"name": "cache", "mountPath": "/cache"}]
    assert kit.q(c["resources"]["limits"]["example.com/nic"]) == 1
    assert worker["spec"]["priorityClassName"] == "batch" and worker["spec"]["volumes"] == [
        {"name": "cache", "emptyDir": {}}
    ]
    assert worker["metadata"]["labels"] == {"from": "template", "team": "exec"}


def test_missing_named_pod_template_is_an_error(kit: SimpleNamespace) -> None:
    t = kit.template("pytorch", {"workerReplicas": {"replicas": 1}})
    t.metadata.pod_template_name = "nope"
    with pytest.raises(BuildError, match="PodTemplate 'nope' does not exist"):
        kit.build(t)
    cfg = BackendConfig.from_flyte_config({"k8s": {"default-pod-template-name": "absent"}})
    kit.build(kit.template("pytorch", {"workerReplicas": {"replicas": 1}}), config=cfg)  # default: optional


def test_deviation_resource_tolerations_in_name_order(kit: SimpleNamespace) -> None:
    cfg = BackendConfig.from_flyte_config(
        {"k8s": {"resource-tolerations": {"nvidia.com/gpu": [GPU_T], "cpu": [SPOT_T], "memory": [DEFAULT_T]}}}
    )
    custom = {"workerReplicas": {"replicas": 1, "resources": {"limits": [{"name": "GPU", "value": "1"}]}}}
    obj = kit.build(kit.template("pytorch", custom), config=cfg)
    assert _specs(obj)["Worker"]["template"]["spec"]["tolerations"] == [SPOT_T, DEFAULT_T, GPU_T]


def test_template_vars_must_be_strings(kit: SimpleNamespace) -> None:
    with pytest.raises(TypeError, match="template_vars must map str to str"):
        kit.build(kit.template("pytorch", {"workerReplicas": {"replicas": 1}}), template_vars={"input": 3})
