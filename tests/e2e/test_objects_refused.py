"""The reverse of test_objects_accepted.py: bad objects that our offline validation refuses (without a CRD
schema where the rule needs none), and that the real API server refuses too (dryRun=All, fieldValidation=
Strict, so the structural schema and the training operator's webhook run; nothing is stored).

Two tables. Job objects the API server refuses when the job is created; and pod settings it accepts inside a
job (a custom resource's pod template gets no core validation) but refuses when the operator creates the
job's pods: for those, the same pod spec is sent as a Pod, which is what the operator will send.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from flytekitplugins.kubejobs.schema import object_problems

pytestmark = pytest.mark.slow


def _container(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox:1.36", **extra}


def _pytorchjob(spec: dict[str, Any] | None = None, container: dict[str, Any] | None = None) -> dict[str, Any]:
    pod: Any = {"containers": [container or _container("pytorch")], **(spec or {})}
    replica = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": pod}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "bad"},
        "spec": {"pytorchReplicaSpecs": {"Master": copy.deepcopy(replica), "Worker": copy.deepcopy(replica)}},
    }


def _with(obj: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    node = obj
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return obj


MASTER = ("spec", "pytorchReplicaSpecs", "Master")
BAD_JOBS: list[tuple[str, dict[str, Any], str]] = [
    ("unknown field", _with(_pytorchjob(), (*MASTER, "replica"), 1), "spec.pytorchReplicaSpecs.Master.replica"),
    ("two masters", _with(_pytorchjob(), (*MASTER, "replicas"), 2), "spec.pytorchReplicaSpecs.Master.replicas"),
    (
        "no pytorch container",
        _pytorchjob(container=_container("trainer")),
        "spec.pytorchReplicaSpecs.Master.template.spec.containers",
    ),
    (
        "memory not a quantity",
        _pytorchjob(container=_container("pytorch", resources={"limits": {"memory": "2 GB"}})),
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.limits.memory",
    ),
    (
        "NaN cpu",
        _pytorchjob(container=_container("pytorch", resources={"requests": {"cpu": "NaN"}})),
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.requests.cpu",
    ),
    (
        "Arabic-Indic digits",
        _pytorchjob(container=_container("pytorch", resources={"requests": {"cpu": "\u0662"}})),
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.requests.cpu",
    ),
]

SPEC = "spec.pytorchReplicaSpecs.Master.template.spec"
BAD_PODS: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    ("node selector key", {"nodeSelector": {"gpu type": "a100"}}, {}, f"{SPEC}.nodeSelector"),
    ("toleration operator", {"tolerations": [{"key": "gpu", "operator": "In"}]}, {}, f"{SPEC}.tolerations"),
    ("volume name", {"volumes": [{"name": "Data", "emptyDir": {}}]}, {}, f"{SPEC}.volumes"),
    ("env name with =", {}, {"env": [{"name": "A=B", "value": "1"}]}, f"{SPEC}.containers[0].env"),
    ("image with a leading space", {}, {"image": " busybox:1.36"}, f"{SPEC}.containers[0].image"),
    (
        "half a GPU",
        {},
        {"resources": {"requests": {"nvidia.com/gpu": "0.5"}, "limits": {"nvidia.com/gpu": "0.5"}}},
        f'{SPEC}.containers[0].resources.requests["nvidia.com/gpu"]',
    ),
]


def _refusal(call: Any) -> str:
    """The API server's message when ``call`` is refused; fails the test when it is accepted."""
    from kubernetes import client

    try:
        call()
    except client.ApiException as e:
        assert 400 <= e.status < 500, e
        return str(json.loads(e.body or "{}").get("message"))
    raise AssertionError("the API server accepted it")


@pytest.mark.parametrize(("obj", "path"), [pytest.param(o, p, id=c) for c, o, p in BAD_JOBS])
def test_a_bad_job_is_refused_offline_and_by_the_api_server(
    obj: dict[str, Any], path: str, k8s: Any, schemas: Any, namespace: str
) -> None:
    from kubernetes import client

    assert path in {p.where for p in object_problems(obj, schemas)}
    message = _refusal(
        lambda: client.CustomObjectsApi(k8s).create_namespaced_custom_object(
            "kubeflow.org", "v1", namespace, "pytorchjobs", obj, dry_run="All", field_validation="Strict"
        )
    )
    assert message


@pytest.mark.parametrize(("spec", "container", "path"), [pytest.param(s, c, p, id=i) for i, s, c, p in BAD_PODS])
def test_a_bad_pod_setting_is_refused_offline_without_a_schema_and_by_the_api_server(
    spec: dict[str, Any], container: dict[str, Any], path: str, k8s: Any, namespace: str
) -> None:
    from kubernetes import client

    obj = _pytorchjob(spec, _container("pytorch", **container))
    assert path in {p.where for p in object_problems(obj, None)}
    pod: Any = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bad"},
        "spec": copy.deepcopy(obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]),
    }
    message = _refusal(lambda: client.CoreV1Api(k8s).create_namespaced_pod(namespace, pod, dry_run="All"))
    assert "Invalid" in message or "invalid" in message or "must" in message, message


def test_a_volume_without_a_source_is_refused_offline_though_the_api_server_makes_it_an_empty_dir(
    k8s: Any, namespace: str
) -> None:
    # Deliberately stricter than Kubernetes (issue 14): the API server defaults a source-less volume to an
    # emptyDir, so a forgotten claim silently becomes scratch space that is lost with the pod.
    from kubernetes import client

    spec = {"volumes": [{"name": "data"}]}
    obj = _pytorchjob(spec)
    assert f"{SPEC}.volumes" in {p.where for p in object_problems(obj, None)}
    pod: Any = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "v"},
        "spec": {**spec, "containers": [_container("c")]},
    }
    created: Any = client.CoreV1Api(k8s).create_namespaced_pod(namespace, pod, dry_run="All")
    assert created.spec.volumes[0].empty_dir is not None
