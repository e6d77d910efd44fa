"""The stored form of compute templates (wire.compute): one validation for ComputeTemplate objects and the
ConfigMaps platform engineers write, a round trip through the ConfigMap, and refusals that name the ConfigMap and
the field, whatever an attacker with write access to a ConfigMap puts in it."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from flytekit import Resources
from flytekitplugins.kfoperators import PS, Chief, Evaluator, Launcher, Master, PyTorch, Worker
from flytekitplugins.kfoperators.serialize import pytorch_custom
from flytekitplugins.kubejobs import ComputeTemplate
from flytekitplugins.kubejobs.extension import warn_extension_once
from flytekitplugins.kubejobs.userwarnings import ComputeTemplateNameWarning, ExtensionKeyWarning
from flytekitplugins.kubejobs.wire.compute import (
    LABELS,
    TemplateSet,
    TemplateSpec,
    parse_configmap,
    parse_document,
)
from flytekitplugins.raycluster import HeadNodeConfig, RayJobConfig, WorkerNodeConfig
from flytekitplugins.raycluster.serialize import ray_job_custom

A100 = ComputeTemplate(
    name="a100x8",
    cpu=8,
    memory="64Gi",
    gpu=8,
    gpu_resource_name="amd.com/gpu",
    extended_resources={"rdma/hca": 1},
    node_selector={"pool": "a100"},
    tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
)


def configmap(data: dict[str, Any], name: str = "t", namespace: str = "flyte", **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "labels": dict(LABELS), **meta}, "data": data}


def test_a_template_round_trips_through_its_configmap() -> None:
    cm = A100.to_spec().to_configmap("flyte")
    assert cm["metadata"] == {"name": "a100x8", "namespace": "flyte", "labels": LABELS}
    assert all(isinstance(v, str) for v in cm["data"].values())  # ConfigMap data holds strings only
    assert parse_configmap(cm, "flyte") == A100.to_spec()
    assert parse_document("doc", A100.to_spec().to_document()) == A100.to_spec()
    assert A100.to_spec().amounts() == {"cpu": "8", "memory": "64Gi", "amd.com/gpu": "8", "rdma/hca": "1"}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"cpu": "lots"}, "compute template 't' (ConfigMap flyte/t).cpu is not a Kubernetes quantity: 'lots'"),
        ({"memory": "NaN"}, ".memory is not a Kubernetes quantity: 'NaN'"),
        ({"gpu": "0.5"}, ".gpu must be a whole number, got '0.5'"),
        ({"gpu": "-1"}, ".gpu must be a whole number, got '-1'"),
        ({"gpuResourceName": "cpu"}, ".gpuResourceName is not an accelerator resource name: 'cpu'"),
        ({"extendedResources": '{"rdma/hca": "0.5"}'}, "extendedResources['rdma/hca']"),
        ({"extendedResources": "{not json"}, ".extendedResources is not JSON"),
        ({"nodeSelector": '{"gpu type": "a"}'}, "nodeSelector key 'gpu type' is not a Kubernetes label key"),
        ({"nodeSelector": '["a"]'}, "nodeSelector must be a dict of str to str"),
        ({"tolerations": '{"key": "a"}'}, ".tolerations must be a list of objects"),
        ({"tolerations": '[{"key": "a", "operator": "Maybe"}]'}, "tolerations[0].operator must be Exists or Equal"),
        # fields a toleration does not have, and fields a template does not have: nothing beyond resources,
        # tolerations and a node selector can be smuggled into the pods
        ({"tolerations": '[{"key": "a", "operator": "Exists", "privileged": true}]'}, "unknown fields ['privileged']"),
        ({"securityContext": '{"privileged": true}'}, "unknown keys ['securityContext']"),
        ({"hostNetwork": "true", "cpu": "1"}, "unknown keys ['hostNetwork']"),
        ({"image": "evil:latest"}, "unknown keys ['image']"),
        ({"cpu": 2}, ".cpu must be a string in ConfigMap data"),
    ],
)
def test_a_malformed_stored_template_is_refused_naming_the_configmap_and_the_field(
    data: dict[str, Any], message: str
) -> None:
    with pytest.raises((TypeError, ValueError)) as info:
        parse_configmap(configmap(data), "flyte")
    assert message in str(info.value)


def test_the_cache_s_view_keeps_malformed_templates_apart_and_ignores_other_namespaces() -> None:
    objs: list[Any] = [
        configmap({"cpu": "2"}, "good"),
        configmap({"cpu": "lots"}, "bad"),
        configmap({"cpu": "64"}, "good", namespace="team-a"),  # same name, planted elsewhere: no template
        configmap({"cpu": "64"}, "planted", namespace="team-a"),
        {"metadata": {"name": "unlabelled", "namespace": "flyte"}, "data": {"cpu": "1"}},
        {"metadata": "garbage"},
        "not an object",
        {**configmap({}, "binary"), "binaryData": {"cpu": "Mg=="}},
    ]
    found = TemplateSet.from_configmaps(objs, "flyte")
    assert found.names() == ["good"] and found.templates["good"].cpu == "2"
    assert sorted(found.invalid) == ["bad", "binary", "unlabelled"]
    assert "does not carry the compute template label" in found.invalid["unlabelled"]
    assert "binaryData" in found.invalid["binary"]
    with pytest.raises(LookupError, match="'planted' does not exist in namespace 'flyte'; existing templates: 'good'"):
        found.resolve("Worker", "planted")


def test_a_configmap_from_another_namespace_is_refused() -> None:
    with pytest.raises(ValueError, match="is not in the templates namespace 'flyte'"):
        parse_configmap(configmap({"cpu": "1"}, namespace="team-a"), "flyte")


def test_compute_template_objects_get_the_same_checks_as_stored_ones() -> None:
    with pytest.raises(ValueError, match=r"ComputeTemplate\('x'\)\.memory is not a Kubernetes quantity: 'lots'"):
        ComputeTemplate(name="x", memory="lots")
    with pytest.raises(
        ValueError, match=r"ComputeTemplate\('x'\)\.tolerations\[0\] has unknown fields \['privileged'\]"
    ):
        ComputeTemplate(name="x", tolerations=[{"key": "a", "operator": "Exists", "privileged": True}])
    with pytest.raises(ValueError, match=r"compute template 'x' \(doc\)\.memory is not a Kubernetes quantity"):
        parse_document("doc", {"name": "x", "memory": "lots"})
    with pytest.raises(ValueError, match="unknown keys \\['memroy'\\]"):
        parse_document("doc", {"name": "x", "memroy": "1Gi"})
    assert TemplateSpec("x", cpu="1").to_document() == {"name": "x", "cpu": "1"}


ROLES = [Worker, Master, PS, Chief, Evaluator, Launcher]


@pytest.mark.parametrize("role", ROLES, ids=[r.__name__ for r in ROLES])
def test_every_role_takes_a_template_name_and_checks_it(role: Any) -> None:
    assert role(compute_template="a100x8").compute_template == "a100x8"
    assert role(compute_template="a100x8").template_name == "a100x8"
    assert role(compute_template=A100).template_object is A100
    for bad in ("A100", "a100_x8", "", "-a", "a" * 64):
        with pytest.raises(ValueError) as info:
            role(compute_template=bad)
        assert f"{role.__name__}.compute_template must be a DNS-1123 label" in str(info.value)
        assert repr(bad)[:50] in str(info.value)
    with pytest.raises(
        TypeError, match=f"{role.__name__}.compute_template must be a ComputeTemplate or a template name"
    ):
        role(compute_template=8)


def test_ray_groups_take_a_template_name_and_check_it() -> None:
    assert HeadNodeConfig(compute_template="cpu-large").compute_template == "cpu-large"
    assert WorkerNodeConfig("w", replicas=1, compute_template="a100x8").k8s_pod is None  # nothing applied locally
    with pytest.raises(ValueError, match=r"HeadNodeConfig.compute_template must be a DNS-1123 label .*'Big'"):
        HeadNodeConfig(compute_template="Big")
    with pytest.raises(ValueError, match=r"WorkerNodeConfig\('w'\).compute_template must be a DNS-1123 label"):
        WorkerNodeConfig("w", replicas=1, compute_template="a.b")


def test_a_named_template_travels_in_the_extension_and_the_idl_keeps_only_the_role_s_own_resources() -> None:
    named = pytorch_custom(PyTorch(worker=Worker(replicas=2, compute_template="a100x8", requests=Resources(cpu="4"))))
    plain = pytorch_custom(PyTorch(worker=Worker(replicas=2, requests=Resources(cpu="4"))))
    assert named.pop("kubejobs") == {"version": 1, "replicaSpecs": {"Worker": {"computeTemplate": "a100x8"}}}
    assert named == plain  # what a stock backend reads is what it would read without the template


def test_ray_groups_naming_templates_travel_in_the_ray_groups_section() -> None:
    cfg = RayJobConfig(
        head_node_config=HeadNodeConfig(compute_template="cpu-large"),
        worker_node_config=[
            WorkerNodeConfig("gpu", replicas=1, compute_template="a100x8", requests=Resources(cpu="4", gpu="1")),
            WorkerNodeConfig("cpu", replicas=1),
        ],
    )
    assert ray_job_custom(cfg)["kubejobs"] == {
        "version": 1,
        "rayGroups": {
            "head": {"computeTemplate": "cpu-large"},
            "workers": {
                "gpu": {
                    "computeTemplate": "a100x8",
                    # limits = requests when only requests are given, as the group's k8sPod says
                    "explicitResources": {"requests": {"cpu": "4", "gpu": "1"}, "limits": {"cpu": "4", "gpu": "1"}},
                }
            },
        },
    }
    assert "kubejobs" not in ray_job_custom(RayJobConfig([WorkerNodeConfig("cpu", replicas=1)]))


def test_serialization_warns_once_that_a_stock_backend_ignores_template_names(monkeypatch: pytest.MonkeyPatch) -> None:
    import flytekitplugins.kubejobs.extension as extension

    monkeypatch.setattr(extension, "_warned", set())
    monkeypatch.setattr(extension, "_warned_names", set())
    custom = pytorch_custom(PyTorch(worker=Worker(replicas=2, compute_template="a100x8")))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_extension_once("pytorch", custom["kubejobs"])
        warn_extension_once("pytorch", custom["kubejobs"])
    assert [w.category for w in caught] == [ComputeTemplateNameWarning]
    assert issubclass(ComputeTemplateNameWarning, ExtensionKeyWarning)
    message = str(caught[0].message)
    assert "Worker -> 'a100x8'" in message and "stock Flyte backend ignores the names" in message
    assert "WITHOUT the templates' resources" in message
