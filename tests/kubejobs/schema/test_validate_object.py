"""validate_object: valid objects pass; each invalid one is reported at the path of the bad field.

Expected paths and rules come from the CRD schemas in the shared directory and the reference documents
(crd-validation.md, ray-sdk-and-kuberay.md §5.2), not from the validator.
"""

from __future__ import annotations

import copy
import json
import pathlib
from collections.abc import Callable
from typing import Any, Optional

import pytest
from flytekitplugins.kubejobs.schema import ObjectInvalid, SchemaSet, object_problems, validate_object
from hypothesis import given, settings
from hypothesis import strategies as st

DELETE = object()

Path = tuple[Any, ...]

PT = ("spec", "pytorchReplicaSpecs")
MASTER_C0 = (*PT, "Master", "template", "spec", "containers", 0)
TF = ("spec", "tfReplicaSpecs")
MPI = ("spec", "mpiReplicaSpecs")
RCS = ("spec", "rayClusterSpec")
WG0 = (*RCS, "workerGroupSpecs", 0)


def apply(obj: dict[str, Any], changes: dict[Path, Any]) -> dict[str, Any]:
    for path, value in changes.items():
        node = obj
        for part in path[:-1]:
            node = node[part]
        if value is DELETE:
            del node[path[-1]]
        elif isinstance(node, list) and path[-1] == len(node):
            node.append(value)
        else:
            node[path[-1]] = value
    return obj


def second_container(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox", **extra}


# (id, object, changes, reported path, words of the message, found without schemas too)
INVALID: list[tuple[str, str, dict[Path, Any], Optional[str], list[str], bool]] = [
    # --- CRD schema, strict ---
    (
        "typo replica",
        "pytorch",
        {(*PT, "Worker", "replica"): 2},
        "spec.pytorchReplicaSpecs.Worker.replica",
        ["unknown field", '"replicas"'],
        False,
    ),
    (
        "unknown top-level spec field",
        "pytorch",
        {("spec", "runpolicy"): {}},
        "spec.runpolicy",
        ["unknown field", '"runPolicy"'],
        False,
    ),
    (
        "pod template creationTimestamp",
        "pytorch",
        {(*PT, "Master", "template", "metadata"): {"creationTimestamp": None}},
        "spec.pytorchReplicaSpecs.Master.template.metadata.creationTimestamp",
        ["unknown field"],
        False,
    ),
    (
        "int32 overflow",
        "pytorch",
        {("spec", "runPolicy", "backoffLimit"): 2**31},
        "spec.runPolicy.backoffLimit",
        ["int32", str(2**31)],
        False,
    ),
    (
        "int64 overflow",
        "pytorch",
        {("spec", "runPolicy", "activeDeadlineSeconds"): 2**63},
        "spec.runPolicy.activeDeadlineSeconds",
        ["int64"],
        False,
    ),
    (
        "replicas as word",
        "pytorch",
        {(*PT, "Worker", "replicas"): "two"},
        "spec.pytorchReplicaSpecs.Worker.replicas",
        ["expected integer", '"two"'],
        False,
    ),
    (
        "replicas null",
        "pytorch",
        {(*PT, "Worker", "replicas"): None},
        "spec.pytorchReplicaSpecs.Worker.replicas",
        ["null"],
        False,
    ),
    (
        "cpu as YAML float",
        "pytorch",
        {(*MASTER_C0, "resources", "limits", "cpu"): 0.5},
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.limits.cpu",
        ["integer or a string", "500m"],
        False,
    ),
    (
        "memory not a quantity",
        "pytorch",
        {(*MASTER_C0, "resources", "limits", "memory"): "2 GB"},
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.limits.memory",
        ["quantity"],
        True,  # the quantity grammar needs no schema
    ),
    (
        "duplicate container names",
        "pytorch",
        {(*PT, "Master", "template", "spec", "containers", 1): second_container("pytorch")},
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[1].name",
        ["duplicate", '"pytorch"', "[0]"],
        False,
    ),
    (
        "duplicate env names",
        "pytorch",
        {(*MASTER_C0, "env", 1): {"name": "A", "value": "2"}},
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].env[1].name",
        ["duplicate", '"A"'],
        False,
    ),
    (
        "duplicate port (protocol defaults to TCP)",
        "pytorch",
        {(*MASTER_C0, "ports", 1): {"containerPort": 23456, "protocol": "TCP", "name": "other"}},
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].ports[1]",
        ["duplicate", "23456", '"TCP"'],
        False,
    ),
    (
        "container missing name",
        "pytorch",
        {(*MASTER_C0, "name"): DELETE},
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].name",
        ["required"],
        True,
    ),
    (
        "ray enum upscalingMode",
        "ray",
        {(*RCS, "autoscalerOptions"): {"upscalingMode": "CONSERVATIVE"}},
        "spec.rayClusterSpec.autoscalerOptions.upscalingMode",
        ['"Conservative"', '"CONSERVATIVE"'],
        False,
    ),
    (
        "ray rayStartParams value not a string",
        "ray",
        {(*WG0, "rayStartParams"): {"num-cpus": 2}},
        "spec.rayClusterSpec.workerGroupSpecs[0].rayStartParams.num-cpus",
        ["expected string"],
        False,
    ),
    # --- Training Operator rules ---
    (
        "missing pytorch container",
        "pytorch",
        {(*MASTER_C0, "name"): "main"},
        "spec.pytorchReplicaSpecs.Master.template.spec.containers",
        ['no container named "pytorch"', '"main"'],
        True,
    ),
    (
        "master replicas 2",
        "pytorch",
        {(*PT, "Master", "replicas"): 2},
        "spec.pytorchReplicaSpecs.Master.replicas",
        ["must be set to 1", "2"],
        True,
    ),
    (
        "master replicas omitted",
        "pytorch",
        {(*PT, "Master", "replicas"): DELETE},
        "spec.pytorchReplicaSpecs.Master.replicas",
        ["must be set to 1", "missing"],
        True,
    ),
    (
        "worker replicas 0",
        "pytorch",
        {(*PT, "Worker", "replicas"): 0},
        "spec.pytorchReplicaSpecs.Worker.replicas",
        [">= 1"],
        True,
    ),
    (
        "pytorch replica type Chief",
        "pytorch",
        {(*PT, "Chief"): {"replicas": 1, "template": {"spec": {"containers": [{"name": "pytorch", "image": "x"}]}}}},
        "spec.pytorchReplicaSpecs.Chief",
        ['"Chief"', '"Master"', '"Worker"'],
        True,
    ),
    (
        "lower-case worker",
        "pytorch",
        {(*PT, "worker"): {"template": {"spec": {"containers": [{"name": "pytorch", "image": "x"}]}}}},
        "spec.pytorchReplicaSpecs.worker",
        ["unsupported replica type"],
        True,
    ),
    ("no replica specs", "pytorch", {(*PT,): {}}, "spec.pytorchReplicaSpecs", ["at least one"], True),
    (
        "container without image",
        "pytorch",
        {(*MASTER_C0, "image"): DELETE},
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].image",
        ["image"],
        True,
    ),
    (
        "no containers",
        "pytorch",
        {(*PT, "Worker", "template", "spec", "containers"): []},
        "spec.pytorchReplicaSpecs.Worker.template.spec.containers",
        ["at least one container"],
        True,
    ),
    (
        "restartPolicy enum",
        "pytorch",
        {(*PT, "Worker", "restartPolicy"): "Sometimes"},
        "spec.pytorchReplicaSpecs.Worker.restartPolicy",
        ['"Sometimes"', '"ExitCode"'],
        True,
    ),
    (
        "cleanPodPolicy enum",
        "pytorch",
        {("spec", "runPolicy", "cleanPodPolicy"): "Always"},
        "spec.runPolicy.cleanPodPolicy",
        ['"Always"', '"Running"'],
        True,
    ),
    (
        "managedBy",
        "pytorch",
        {("spec", "runPolicy", "managedBy"): "me"},
        "spec.runPolicy.managedBy",
        ["kubeflow.org/training-operator"],
        True,
    ),
    (
        "request above limit",
        "pytorch",
        {(*MASTER_C0, "resources", "requests", "memory"): "3Gi"},
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.requests.memory",
        ["more than the limit"],
        True,
    ),
    (
        "GPU request without limit",
        "pytorch",
        {(*MASTER_C0, "resources", "limits"): {"cpu": "2"}},
        'spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.limits["nvidia.com/gpu"]',
        ["extended resource"],
        True,
    ),
    (
        "container name not DNS-1123",
        "pytorch",
        {(*PT, "Worker", "template", "spec", "containers", 1): second_container("Side_car")},
        "spec.pytorchReplicaSpecs.Worker.template.spec.containers[1].name",
        ["DNS-1123"],
        True,
    ),
    ("name too long", "pytorch", {("metadata", "name"): "a" * 64}, "metadata.name", ["64 characters", "63"], True),
    ("name not DNS-1035", "pytorch", {("metadata", "name"): "1-train"}, "metadata.name", ["DNS-1035"], True),
    ("name missing", "pytorch", {("metadata", "name"): DELETE}, "metadata.name", ["required"], True),
    (
        "label value not a string",
        "pytorch",
        {("metadata", "labels"): {"team": 7}},
        "metadata.labels.team",
        ["strings"],
        True,
    ),
    (
        "elastic without Worker",
        "elastic",
        {
            (*PT, "Master"): {"replicas": 1, "template": {"spec": {"containers": [{"name": "pytorch", "image": "x"}]}}},
            (*PT, "Worker"): DELETE,
        },
        "spec.pytorchReplicaSpecs.Worker",
        ["required when elasticPolicy"],
        True,
    ),
    (
        "elastic min > max",
        "elastic",
        {("spec", "elasticPolicy", "minReplicas"): 4},
        "spec.elasticPolicy.minReplicas",
        ["more than maxReplicas"],
        True,
    ),
    (
        "elastic workers outside range",
        "elastic",
        {(*PT, "Worker", "replicas"): 5},
        "spec.pytorchReplicaSpecs.Worker.replicas",
        ["outside", "[1, 3]"],
        True,
    ),
    (
        "elastic rdzvBackend",
        "elastic",
        {("spec", "elasticPolicy", "rdzvBackend"): "redis"},
        "spec.elasticPolicy.rdzvBackend",
        ['"c10d"'],
        True,
    ),
    (
        "elastic nProcPerNode with nprocPerNode",
        "elastic",
        {("spec", "elasticPolicy", "nProcPerNode"): 2},
        "spec.elasticPolicy.nProcPerNode",
        ["spec.nprocPerNode"],
        True,
    ),
    ("nprocPerNode word", "elastic", {("spec", "nprocPerNode"): "all"}, "spec.nprocPerNode", ['"auto"'], True),
    (
        "tf missing tensorflow container",
        "tensorflow",
        {(*TF, "PS", "template", "spec", "containers", 0, "name"): "ps"},
        "spec.tfReplicaSpecs.PS.template.spec.containers",
        ['no container named "tensorflow"'],
        True,
    ),
    (
        "tf chief and master",
        "tensorflow",
        {
            (*TF, "Master"): {
                "replicas": 1,
                "template": {"spec": {"containers": [{"name": "tensorflow", "image": "x"}]}},
            }
        },
        "spec.tfReplicaSpecs",
        ['"Chief"', '"Master"'],
        True,
    ),
    (
        "tf chief replicas 2",
        "tensorflow",
        {(*TF, "Chief", "replicas"): 2},
        "spec.tfReplicaSpecs.Chief.replicas",
        ["1"],
        True,
    ),
    (
        "tf negative worker replicas",
        "tensorflow",
        {(*TF, "Worker", "replicas"): -1},
        "spec.tfReplicaSpecs.Worker.replicas",
        [">= 0", "-1"],
        True,
    ),
    (
        "tf negative ps replicas",
        "tensorflow",
        {(*TF, "PS", "replicas"): -3},
        "spec.tfReplicaSpecs.PS.replicas",
        [">= 0", "-3"],
        True,
    ),
    # --- the API server's own syntax rules: found with or without a schema ---
    (
        "nodeSelector key with a space",
        "tensorflow",
        {(*TF, "Worker", "template", "spec", "nodeSelector"): {"gpu type": "a100"}},
        "spec.tfReplicaSpecs.Worker.template.spec.nodeSelector",
        ["'gpu type'", "label key"],
        True,
    ),
    (
        "env name with =",
        "pytorch",
        {(*MASTER_C0, "env"): [{"name": "A=B", "value": "1"}]},
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].env",
        ["'A=B'", "environment variable name"],
        True,
    ),
    (
        "toleration operator In",
        "pytorch",
        {(*PT, "Master", "template", "spec", "tolerations"): [{"key": "gpu", "operator": "In"}]},
        "spec.pytorchReplicaSpecs.Master.template.spec.tolerations",
        ["Exists or Equal", "'In'"],
        True,
    ),
    (
        "volume without a source",
        "pytorch",
        {(*PT, "Master", "template", "spec", "volumes"): [{"name": "data"}]},
        "spec.pytorchReplicaSpecs.Master.template.spec.volumes",
        ["exactly one volume source"],
        True,
    ),
    (
        "image with leading whitespace",
        "pytorch",
        {(*MASTER_C0, "image"): " python:3.11"},
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].image",
        ["not a container image reference"],
        True,
    ),
    (
        "NaN memory",
        "pytorch",
        {(*MASTER_C0, "resources"): {"limits": {"memory": "NaN"}}},
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.limits.memory",
        ["NaN", "not a Kubernetes quantity"],
        True,
    ),
    (
        "full-width digits",
        "pytorch",
        {(*MASTER_C0, "resources"): {"requests": {"cpu": "\uff12"}}},
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.requests.cpu",
        ["not a Kubernetes quantity"],
        True,
    ),
    (
        "half a GPU",
        "pytorch",
        {(*MASTER_C0, "resources"): {"requests": {"nvidia.com/gpu": "0.5"}, "limits": {"nvidia.com/gpu": "0.5"}}},
        'spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.requests["nvidia.com/gpu"]',
        ["whole number"],
        True,
    ),
    (
        "tf unknown type",
        "tensorflow",
        {(*TF, "Workers"): {"template": {"spec": {"containers": [{"name": "tensorflow", "image": "x"}]}}}},
        "spec.tfReplicaSpecs.Workers",
        ["unsupported replica type"],
        True,
    ),
    (
        "tf successPolicy",
        "tensorflow",
        {("spec", "successPolicy"): "AnyWorker"},
        "spec.successPolicy",
        ['"AllWorkers"'],
        True,
    ),
    ("mpi without Launcher", "mpi", {(*MPI, "Launcher"): DELETE}, "spec.mpiReplicaSpecs.Launcher", ["Launcher"], True),
    (
        "mpi launcher replicas 2",
        "mpi",
        {(*MPI, "Launcher", "replicas"): 2},
        "spec.mpiReplicaSpecs.Launcher.replicas",
        ["1"],
        True,
    ),
    (
        "mpi container not named mpi",
        "mpi",
        {(*MPI, "Worker", "template", "spec", "containers", 0, "name"): "worker"},
        "spec.mpiReplicaSpecs.Worker.template.spec.containers",
        ['no container named "mpi"'],
        True,
    ),
    ("mpi slotsPerWorker 0", "mpi", {("spec", "slotsPerWorker"): 0}, "spec.slotsPerWorker", [">= 1"], True),
    # --- KubeRay rules ---
    (
        "ray ttl without shutdown",
        "ray",
        {("spec", "shutdownAfterJobFinishes"): False},
        "spec.ttlSecondsAfterFinished",
        ["shutdownAfterJobFinishes"],
        True,
    ),
    (
        "ray suspend without shutdown",
        "ray",
        {
            ("spec", "shutdownAfterJobFinishes"): DELETE,
            ("spec", "ttlSecondsAfterFinished"): 0,
            ("spec", "suspend"): True,
        },
        "spec.suspend",
        ["shutdownAfterJobFinishes"],
        True,
    ),
    (
        "ray duplicate worker group names",
        "ray",
        {
            (*RCS, "workerGroupSpecs", 1): {
                "groupName": "workers",
                "minReplicas": 0,
                "maxReplicas": 1,
                "replicas": 1,
                "template": {"spec": {"containers": [{"name": "ray-worker", "image": "x"}]}},
            }
        },
        "spec.rayClusterSpec.workerGroupSpecs[1].groupName",
        ["duplicate", '"workers"'],
        True,
    ),
    (
        "ray min > max",
        "ray",
        {(*WG0, "minReplicas"): 5},
        "spec.rayClusterSpec.workerGroupSpecs[0].minReplicas",
        ["more than maxReplicas"],
        True,
    ),
    (
        "ray replicas above max",
        "ray",
        {(*WG0, "replicas"): 9},
        "spec.rayClusterSpec.workerGroupSpecs[0].replicas",
        ["outside", "[1, 4]"],
        True,
    ),
    (
        "ray replicas above default max",
        "ray",
        {(*WG0, "maxReplicas"): DELETE, (*WG0, "replicas"): 9},
        None,
        [],
        True,
    ),  # maxReplicas defaults to 2147483647: valid
    ("ray name 48 characters", "ray", {("metadata", "name"): "r" * 48}, "metadata.name", ["48 characters", "47"], True),
    (
        "ray head container not first",
        "ray",
        {
            (*RCS, "headGroupSpec", "template", "spec", "containers"): [
                {"name": "fluentbit", "image": "x"},
                {"name": "ray-head", "image": "rayproject/ray"},
            ]
        },
        "spec.rayClusterSpec.headGroupSpec.template.spec.containers[1]",
        ["first container"],
        True,
    ),
    (
        "ray worker without containers",
        "ray",
        {(*WG0, "template", "spec", "containers"): []},
        "spec.rayClusterSpec.workerGroupSpecs[0].template.spec.containers",
        ["at least one container"],
        True,
    ),
    (
        "ray spec and selector",
        "ray",
        {("spec", "clusterSelector"): {"ray.io/cluster": "c"}},
        "spec.clusterSelector",
        ["rayClusterSpec"],
        True,
    ),
    ("ray no cluster", "ray", {RCS: DELETE}, "spec.rayClusterSpec", ["clusterSelector"], True),
    (
        "ray selector without cluster key",
        "ray",
        {RCS: DELETE, ("spec", "clusterSelector"): {"team": "a"}},
        'spec.clusterSelector["ray.io/cluster"]',
        ["existing RayCluster"],
        True,
    ),
    (
        "ray backoff with selector",
        "ray",
        {RCS: DELETE, ("spec", "clusterSelector"): {"ray.io/cluster": "c"}, ("spec", "backoffLimit"): 2},
        "spec.backoffLimit",
        ["clusterSelector"],
        True,
    ),
    (
        "ray submission mode",
        "ray",
        {("spec", "submissionMode"): "K8sMode"},
        "spec.submissionMode",
        ['"HTTPMode"'],
        True,
    ),
    (
        "ray sidecar with submitter template",
        "ray",
        {("spec", "submissionMode"): "SidecarMode", ("spec", "submitterPodTemplate"): {"spec": {"containers": []}}},
        "spec.submitterPodTemplate",
        ["SidecarMode"],
        True,
    ),
    ("ray runtimeEnvYAML", "ray", {("spec", "runtimeEnvYAML"): "pip: [numpy"}, "spec.runtimeEnvYAML", ["YAML"], True),
    (
        "ray activeDeadlineSeconds 0",
        "ray",
        {("spec", "activeDeadlineSeconds"): 0},
        "spec.activeDeadlineSeconds",
        ["> 0"],
        True,
    ),
    ("ray managedBy", "ray", {("spec", "managedBy"): "flyte"}, "spec.managedBy", ["ray.io/kuberay-operator"], True),
    (
        "ray deletion rules with shutdown",
        "ray",
        {
            ("spec", "deletionStrategy"): {
                "deletionRules": [{"policy": "DeleteCluster", "condition": {"jobStatus": "SUCCEEDED"}}]
            }
        },
        "spec.shutdownAfterJobFinishes",
        ["deletionRules"],
        True,
    ),
    (
        "ray deletion condition both",
        "ray",
        {
            ("spec", "shutdownAfterJobFinishes"): DELETE,
            ("spec", "ttlSecondsAfterFinished"): 0,
            ("spec", "deletionStrategy"): {
                "deletionRules": [
                    {"policy": "DeleteCluster", "condition": {"jobStatus": "FAILED", "jobDeploymentStatus": "Failed"}}
                ]
            },
        },
        "spec.deletionStrategy.deletionRules[0].condition",
        ["exactly one"],
        True,
    ),
    (
        "ray labels in rayStartParams",
        "ray",
        {(*WG0, "rayStartParams"): {"labels": "a=b"}},
        "spec.rayClusterSpec.workerGroupSpecs[0].rayStartParams.labels",
        ["labels field"],
        True,
    ),
    (
        "raycluster without head",
        "raycluster",
        {("spec", "headGroupSpec"): DELETE},
        "spec.headGroupSpec",
        ["required"],
        True,
    ),
    # --- identity ---
    (
        "unknown kind",
        "pytorch",
        {("kind",): "Deployment", ("apiVersion",): "apps/v1"},
        "kind",
        ["unsupported kind"],
        True,
    ),
    ("wrong version", "pytorch", {("apiVersion",): "kubeflow.org/v2"}, "apiVersion", ["kubeflow.org/v1"], True),
]


@pytest.mark.parametrize("key", ["pytorch", "elastic", "tensorflow", "mpi", "ray", "raycluster"])
def test_valid_objects_pass_with_and_without_schemas(
    key: str, make: Callable[[str], dict[str, Any]], schemas: Any
) -> None:
    obj = make(key)
    before = copy.deepcopy(obj)
    validate_object(obj, schemas)
    validate_object(obj, None, warn_without_schemas=False)
    assert obj == before  # never modified


@pytest.mark.parametrize(("case", "key", "changes", "path", "words", "rule"), INVALID, ids=[c[0] for c in INVALID])
def test_invalid_object_reports_path(
    case: Any,
    key: Any,
    changes: Any,
    path: Any,
    words: Any,
    rule: Any,
    make: Callable[[str], dict[str, Any]],
    schemas: Any,
) -> None:
    obj = apply(make(key), changes)
    if path is None:
        validate_object(obj, schemas)
        return
    with pytest.raises(ObjectInvalid) as info:
        validate_object(obj, schemas)
    found = {p.where: p.message for p in info.value.problems}
    assert path in found, f"{path} not in {found}"
    assert all(w in found[path] for w in words), found[path]
    assert isinstance(info.value, ValueError) and path in str(info.value)
    # Rule checks run without schemas; schema-only findings need the schemas.
    without = {p.where: p.message for p in object_problems(obj, None)}
    assert (path in without) is rule, without


def test_every_problem_is_reported_at_once(make: Callable[[str], dict[str, Any]], schemas: Any) -> None:
    obj = apply(
        make("pytorch"),
        {
            (*PT, "Worker", "replica"): 2,
            (*PT, "Master", "replicas"): 3,
            ("spec", "runPolicy", "backoffLimit"): -(2**31) - 1,
        },
    )
    with pytest.raises(ObjectInvalid) as info:
        validate_object(obj, schemas)
    assert sorted(info.value.paths) == [
        "spec.pytorchReplicaSpecs.Master.replicas",
        "spec.pytorchReplicaSpecs.Worker.replica",
        "spec.runPolicy.backoffLimit",
    ]
    assert str(info.value).startswith('PyTorchJob "train" is invalid (3 problems):')


def test_required_fields_with_schema_defaults_count_as_present(
    make: Callable[[str], dict[str, Any]], schemas: Any
) -> None:
    # workerGroupSpecs[].minReplicas/maxReplicas are `required` but defaulted by the API server (SOURCES.md).
    obj = apply(make("ray"), {(*WG0, "minReplicas"): DELETE, (*WG0, "maxReplicas"): DELETE})
    validate_object(obj, schemas)


def test_missing_schema_for_the_object_version(make: Callable[[str], dict[str, Any]], crd_dir: pathlib.Path) -> None:
    only_ray = SchemaSet.from_dir(crd_dir).schema(("ray.io", "v1", "RayJob"))
    schemas = SchemaSet({("ray.io", "v1", "RayJob"): only_ray})
    with pytest.raises(ObjectInvalid) as info:
        validate_object(make("pytorch"), schemas)
    assert info.value.paths == ["apiVersion"]
    assert "no schema for kubeflow.org/v1 PyTorchJob" in str(info.value)


def test_mpijob_v2beta1_uses_its_own_schema_and_rules(make: Callable[[str], dict[str, Any]], schemas: Any) -> None:
    obj = make("mpi")
    obj["apiVersion"] = "kubeflow.org/v2beta1"
    obj["spec"]["mpiImplementation"] = "OpenMPI"
    validate_object(obj, schemas)
    obj["spec"]["mpiReplicaSpecs"]["Worker"]["restartPolicy"] = "Always"
    obj["spec"]["mpiImplementation"] = "openmpi"
    with pytest.raises(ObjectInvalid) as info:
        validate_object(obj, schemas)
    assert sorted(info.value.paths) == ["spec.mpiImplementation", "spec.mpiReplicaSpecs.Worker.restartPolicy"]


def test_mpijob_main_container_overrides_the_default_name(make: Callable[[str], dict[str, Any]], schemas: Any) -> None:
    obj = make("mpi")
    obj["spec"]["mainContainer"] = "launcher"
    for role in ("Launcher", "Worker"):
        obj["spec"]["mpiReplicaSpecs"][role]["template"]["spec"]["containers"][0]["name"] = "launcher"
    validate_object(obj, schemas)


def test_not_a_mapping() -> None:
    with pytest.raises(ObjectInvalid, match="expected an object"):
        validate_object(["kind", "PyTorchJob"], None, warn_without_schemas=False)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=-(2**40), max_value=2**40))
def test_int32_range_matches_the_format(schemas: Any, valid_json: dict[str, str], value: int) -> None:
    obj = json.loads(valid_json["pytorch"])
    obj["spec"]["runPolicy"]["schedulingPolicy"] = {"minAvailable": value}  # int32, no rule on it
    problems = {p.where for p in object_problems(obj, schemas)}
    assert ("spec.runPolicy.schedulingPolicy.minAvailable" in problems) is not (-(2**31) <= value < 2**31)
