"""Shared types: every bad value fails at construction with the field and value named."""

from __future__ import annotations

from typing import Any

import pytest
from flytekit import Resources
from flytekitplugins.kubejobs import CleanPodPolicy, ComputeTemplate, ReplicaRole, RestartPolicy, RunPolicy
from flytekitplugins.kubejobs.policies import SchedulingPolicy


class Worker(ReplicaRole):
    operator_role = "Worker"


class Master(ReplicaRole):
    operator_role = "Master"
    fixed_replicas = 1


@pytest.mark.parametrize(
    ("build", "error", "names"),
    [
        (lambda: Worker(replicas=-1), ValueError, ["Worker.replicas", "-1"]),
        (lambda: Worker(replicas=2.5), TypeError, ["Worker.replicas", "2.5"]),
        (lambda: Worker(replicas="2"), TypeError, ["Worker.replicas", "'2'"]),
        (lambda: Worker(replicas=True), TypeError, ["Worker.replicas", "True"]),
        (lambda: Worker(replicas=2**31), ValueError, ["Worker.replicas", str(2**31)]),
        (lambda: Master(replicas=2), ValueError, ["Master.replicas", "2"]),
        (lambda: Worker(restart_policy="sometimes"), ValueError, ["Worker.restart_policy", "sometimes"]),
        (lambda: Worker(restart_policy=7), ValueError, ["Worker.restart_policy", "7"]),
        (lambda: Worker(requests=Resources(cpu="lots")), ValueError, ["Worker.requests.cpu", "lots"]),
        (lambda: Worker(limits=Resources(mem="-1Gi")), ValueError, ["Worker.limits.mem", "-1Gi"]),
        (lambda: Worker(requests=Resources(cpu=("1", "2"))), TypeError, ["Worker.requests.cpu"]),
        (lambda: Worker(requests={"cpu": "1"}), TypeError, ["Worker.requests"]),
        (lambda: Worker(image=3), TypeError, ["Worker.image", "3"]),
        (lambda: Worker(node_selector={"a": 1}), TypeError, ["Worker.node_selector", "1"]),
        (lambda: Worker(tolerations={"key": "gpu"}), TypeError, ["Worker.tolerations"]),
        (lambda: Worker(env={"A": 1}), TypeError, ["Worker.env", "1"]),
        (lambda: Worker(env=[{"value": "x"}]), ValueError, ["Worker.env[0]"]),
        (
            lambda: Worker(requests=Resources(cpu="2"), limits=Resources(cpu="1")),
            ValueError,
            ["Worker", "cpu", "'2'", "'1'"],
        ),
        (lambda: RunPolicy(clean_pod_policy="sometimes"), ValueError, ["RunPolicy.clean_pod_policy", "sometimes"]),
        (lambda: RunPolicy(backoff_limit=-1), ValueError, ["RunPolicy.backoff_limit", "-1"]),
        (lambda: RunPolicy(active_deadline_seconds=-5), ValueError, ["RunPolicy.active_deadline_seconds", "-5"]),
        (lambda: RunPolicy(ttl_seconds_after_finished=1.5), TypeError, ["RunPolicy.ttl_seconds_after_finished"]),
        (lambda: RunPolicy(suspend="yes"), TypeError, ["RunPolicy.suspend", "yes"]),
        (lambda: SchedulingPolicy(min_available=0), ValueError, ["SchedulingPolicy.min_available", "0"]),
        (lambda: ComputeTemplate(name=""), ValueError, ["ComputeTemplate.name"]),
        (lambda: ComputeTemplate(name="t", cpu="x"), ValueError, ["ComputeTemplate('t').cpu", "x"]),
        (lambda: ComputeTemplate(name="t", gpu=-1), ValueError, ["ComputeTemplate('t').gpu", "-1"]),
        (lambda: ComputeTemplate(name="t", gpu_resource_name="cpu"), ValueError, ["gpu_resource_name", "cpu"]),
        (
            lambda: ComputeTemplate(name="t", extended_resources={"bad name!": 1}),
            ValueError,
            ["extended_resources", "bad name!"],
        ),
    ],
)
def test_bad_input_names_field_and_value(build: Any, error: Any, names: list[Any]) -> None:
    with pytest.raises(error) as info:
        build()
    for name in names:
        assert name in str(info.value)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("always", RestartPolicy.ALWAYS),
        ("Failure", RestartPolicy.FAILURE),
        ("on_failure", RestartPolicy.FAILURE),
        ("OnFailure", RestartPolicy.FAILURE),
        (0, RestartPolicy.NEVER),
        (RestartPolicy.ALWAYS, RestartPolicy.ALWAYS),
    ],
)
def test_restart_policy_accepts_names_case_insensitively(given: Any, expected: Any) -> None:
    assert Worker(restart_policy=given).restart_policy is expected


def test_enum_values_are_the_flyteidl_numbers() -> None:
    from flyteidl.plugins import common_pb2
    from flyteidl.plugins.kubeflow import common_pb2 as kf

    assert RestartPolicy.NEVER.value == common_pb2.RESTART_POLICY_NEVER
    assert RestartPolicy.FAILURE.value == common_pb2.RESTART_POLICY_ON_FAILURE
    assert RestartPolicy.ALWAYS.value == common_pb2.RESTART_POLICY_ALWAYS
    assert CleanPodPolicy.NONE.value == kf.CLEANPOD_POLICY_NONE
    assert CleanPodPolicy.RUNNING.value == kf.CLEANPOD_POLICY_RUNNING
    assert CleanPodPolicy.ALL.value == kf.CLEANPOD_POLICY_ALL


def test_numeric_quantities_become_strings_and_user_resources_are_untouched() -> None:
    given = Resources(cpu=2, mem="4Gi", gpu=1)
    worker = Worker(requests=given, limits=Resources(cpu=2.5))
    assert (worker.requests.cpu, worker.requests.mem, worker.requests.gpu) == ("2", "4Gi", "1")
    assert worker.limits.cpu == "2.5"
    assert given.cpu == 2 and given.gpu == 1


def test_user_given_k8s_objects_are_copied_not_shared() -> None:
    tolerations = [{"key": "spot", "operator": "Exists"}]
    worker = Worker(tolerations=tolerations)
    tolerations[0]["key"] = "changed"
    assert worker.tolerations[0]["key"] == "spot"


def test_kubernetes_client_models_are_accepted_as_wire_dicts() -> None:
    from kubernetes.client import V1Toleration

    worker = Worker(tolerations=[V1Toleration(key="gpu", operator="Exists", effect="NoSchedule")])
    assert worker.tolerations == ({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},)
