"""Malformed customs never crash the builder: each input gives a BuildError or an object that passes the
CRD schema (checked independently with jsonschema)."""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

import pytest
from flytekitplugins.kubejobs.backend import BuildError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

KEYS = [
    "workerReplicas",
    "masterReplicas",
    "replicas",
    "image",
    "resources",
    "requests",
    "limits",
    "name",
    "value",
    "restartPolicy",
    "common",
    "runPolicy",
    "cleanPodPolicy",
    "backoffLimit",
    "elasticConfig",
    "rdzvBackend",
    "minReplicas",
    "maxReplicas",
    "nprocPerNode",
    "psReplicas",
    "chiefReplicas",
    "evaluatorReplicas",
    "launcherReplicas",
    "command",
    "slots",
    "workers",
    "numWorkers",
    "rayCluster",
    "headGroupSpec",
    "workerGroupSpec",
    "groupName",
    "rayStartParams",
    "k8sPod",
    "podSpec",
    "containers",
    "metadata",
    "labels",
    "enableAutoscaling",
    "autoscalerOptions",
    "upscalingMode",
    "runtimeEnv",
    "runtimeEnvYaml",
    "shutdownAfterJobFinishes",
    "ttlSecondsAfterFinished",
    "kubejobs",
    "version",
    "replicaSpecs",
    "Worker",
    "Master",
    "nodeSelector",
    "tolerations",
    "env",
    "volumes",
    "suspend",
]

leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False)
    | st.sampled_from(["", "1", "-1", "2Gi", "CPU", "GPU", "RESTART_POLICY_ALWAYS", "lots", "w", "ray-worker"])
    | st.text(max_size=8)
)
json_values = st.recursive(
    leaves,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=25,
)
customs = st.dictionaries(st.sampled_from(KEYS), json_values, max_size=5)

GOOD = {
    "pytorch": {
        "workerReplicas": {"replicas": 2, "resources": {"limits": [{"name": "CPU", "value": "2"}]}},
        "runPolicy": {"cleanPodPolicy": "CLEANPOD_POLICY_ALL"},
        "elasticConfig": {"minReplicas": 1},
    },
    "tensorflow": {"workerReplicas": {"replicas": 2}, "psReplicas": {"common": {"replicas": 1}}},
    "mpi": {"workerReplicas": {"replicas": 2, "command": ["sshd"]}, "slots": 2},
    "ray": {
        "rayCluster": {
            "headGroupSpec": {"rayStartParams": {"a": "b"}},
            "workerGroupSpec": [
                {"groupName": "w", "replicas": 1, "k8sPod": {"podSpec": {"containers": [{"name": "ray-worker"}]}}}
            ],
            "autoscalerOptions": {"env": [{"key": "A", "value": "1"}]},
        },
        "kubejobs": {"version": 1},
    },
}


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    out = copy.deepcopy(value)
    target = out
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = new
    return out


def _build_or_build_error(kit: SimpleNamespace, task_type: str, custom: Any, version: int) -> None:
    try:
        template = kit.template(task_type, custom, version)
    except (TypeError, ValueError):
        return  # not representable in a protobuf Struct: cannot reach a connector
    try:
        kit.build(template)  # a built object must pass the CRD schema (kit.build checks it)
    except BuildError as e:
        assert str(e)


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(task_type=st.sampled_from(sorted(GOOD)), custom=customs, version=st.integers(-1, 3))
def test_random_customs(kit: SimpleNamespace, task_type: str, custom: Any, version: int) -> None:
    _build_or_build_error(kit, task_type, custom, version)


@FUZZ
@given(task_type=st.sampled_from(sorted(GOOD)), data=st.data(), value=json_values, version=st.sampled_from([0, 1]))
def test_one_field_of_a_good_custom_replaced(
    kit: SimpleNamespace, task_type: str, data: st.DataObject, value: Any, version: int
) -> None:
    good = GOOD[task_type]
    path = data.draw(st.sampled_from(_paths(good)[1:]))
    _build_or_build_error(kit, task_type, _replace(good, path, value), version)


@pytest.mark.parametrize("task_type", sorted(GOOD))
def test_huge_replica_counts_are_refused_by_name(kit: SimpleNamespace, task_type: str) -> None:
    custom = copy.deepcopy(GOOD[task_type])
    if task_type == "ray":
        custom["rayCluster"]["workerGroupSpec"][0]["replicas"] = 2**31
    else:
        custom["workerReplicas"]["replicas"] = 2**31
    with pytest.raises(BuildError, match="replicas"):
        kit.build(kit.template(task_type, custom, 1))


pod_specs = st.dictionaries(
    st.sampled_from(["containers", "volumes", "tolerations", "nodeSelector", "affinity", "restartPolicy"]),
    json_values
    | st.lists(st.dictionaries(st.sampled_from(["name", "image", "env", "resources", "args", "ports"]), json_values)),
    max_size=4,
)


@FUZZ
@given(task_type=st.sampled_from(sorted(GOOD)), pod_spec=pod_specs, primary=st.sampled_from(["primary", "", "x"]))
def test_random_task_pod_specs(kit: SimpleNamespace, task_type: str, pod_spec: dict[str, Any], primary: str) -> None:
    try:
        template = kit.template(
            task_type, GOOD[task_type], 0 if task_type == "ray" else 1, pod_spec=pod_spec, primary=primary
        )
    except (TypeError, ValueError):
        return
    try:
        kit.build(template)
    except BuildError as e:
        assert str(e)
