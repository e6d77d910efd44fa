"""Compute templates named by string: the backend applies a stored template exactly as the same template given as
a ``ComputeTemplate`` object is applied at serialization (pod template < template < explicit requests/limits;
node selectors merge, template keys winning; tolerations appended), on every Training Operator role, every Ray
group and the TrainJob target; and refuses what it cannot resolve, naming the template and the ones that exist."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from functools import partial
from types import SimpleNamespace
from typing import Any

import pytest
from flytekit import PodTemplate, Resources
from flytekitplugins.kfoperators import PS, Chief, Launcher, Master, MPIJob, PyTorch, TfJob, Worker
from flytekitplugins.kfoperators.serialize import mpi_custom, pytorch_custom, tensorflow_custom
from flytekitplugins.kubejobs import ComputeTemplate
from flytekitplugins.kubejobs.backend import BackendConfig, BuildError, build_object
from flytekitplugins.kubejobs.backend.trainjob_config import TrainJobConfig
from flytekitplugins.kubejobs.wire.compute import TemplateSet, parse_configmap
from flytekitplugins.raycluster import HeadNodeConfig, RayJobConfig, WorkerNodeConfig
from flytekitplugins.raycluster.serialize import ray_job_custom
from kubernetes.client import V1Container, V1PodSpec, V1ResourceRequirements, V1Toleration

GPU_AMD = ComputeTemplate(
    name="a100x8",
    cpu=8,
    memory="64Gi",
    gpu=2,
    gpu_resource_name="amd.com/gpu",
    extended_resources={"example.com/fpga": 1},
    node_selector={"pool": "a100", "zone": "a"},
    tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
)
CPU_ONLY = ComputeTemplate(name="cpu-large", cpu=6)
FPGA_ONLY = ComputeTemplate(name="fpga", extended_resources={"example.com/fpga": 2})
NVIDIA = ComputeTemplate(name="nvidia", memory="8Gi", gpu=1, node_selector={"pool": "t4"})
TEMPLATES = (GPU_AMD, CPU_ONLY, FPGA_ONLY, NVIDIA)


def stored(*templates: ComputeTemplate) -> TemplateSet:
    """The templates as the connector holds them: written as ConfigMaps and parsed back."""
    specs = [parse_configmap(t.to_spec().to_configmap("flyte"), "flyte") for t in templates]
    return TemplateSet({s.name: s for s in specs}, source="namespace 'flyte'")


def named(config: BackendConfig, templates: TemplateSet) -> BackendConfig:
    return dataclasses.replace(config, compute_templates=templates)


def by_name(role: Any) -> Any:
    """The same role, its ComputeTemplate object replaced by the template's name."""
    template = role.compute_template
    return dataclasses.replace(role, compute_template=template.name) if isinstance(template, ComputeTemplate) else role


def _serialized(make: Callable[[], Any], custom: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return custom(make())


ROLE_VARIANTS = {
    "template only": dict(),
    "explicit cpu request": dict(requests=Resources(cpu="4")),
    "explicit gpus": dict(requests=Resources(gpu="4"), limits=Resources(gpu="4", cpu="16")),
    "role node selector wins over template": dict(node_selector={"zone": "b"}),
    "role tolerations appended": dict(tolerations=[{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]),
}


@pytest.mark.parametrize("template", TEMPLATES, ids=[t.name for t in TEMPLATES])
@pytest.mark.parametrize("variant", sorted(ROLE_VARIANTS))
@pytest.mark.parametrize("platform_gpu", ["nvidia.com/gpu", "amd.com/gpu"])
def test_a_named_template_builds_the_object_its_compute_template_object_builds(
    kit: SimpleNamespace, template: ComputeTemplate, variant: str, platform_gpu: str
) -> None:
    config = dataclasses.replace(
        BackendConfig.from_flyte_config({"k8s": {"gpu-resource-name": platform_gpu}}), crd_dir=kit.config.crd_dir
    )
    extra = ROLE_VARIANTS[variant]
    kinds: list[tuple[str, Callable[[bool], Any], Callable[[Any], dict[str, Any]]]] = [
        (
            "pytorch",
            lambda name: PyTorch(
                worker=Worker(replicas=2, compute_template=template.name if name else template, **extra),
                master=Master(compute_template=CPU_ONLY.name if name else CPU_ONLY),
            ),
            pytorch_custom,
        ),
        (
            "tensorflow",
            lambda name: TfJob(
                worker=Worker(replicas=2, compute_template=template.name if name else template, **extra),
                ps=PS(replicas=1, compute_template=FPGA_ONLY.name if name else FPGA_ONLY),
                chief=Chief(replicas=1, requests=Resources(cpu="1")),
            ),
            tensorflow_custom,
        ),
        (
            "mpi",
            lambda name: MPIJob(
                worker=Worker(replicas=2, compute_template=template.name if name else template, **extra),
                launcher=Launcher(compute_template=CPU_ONLY.name if name else CPU_ONLY),
                slots=2,
            ),
            mpi_custom,
        ),
    ]
    for task_type, make, custom in kinds:
        as_object = kit.build(kit.template(task_type, _serialized(partial(make, False), custom)), config=config)
        as_name = kit.build(
            kit.template(task_type, _serialized(partial(make, True), custom)), config=named(config, stored(*TEMPLATES))
        )
        assert as_name == as_object, task_type


def _ray(name: bool, template: ComputeTemplate, pod_template: Any, **extra: Any) -> RayJobConfig:
    return RayJobConfig(
        head_node_config=HeadNodeConfig(compute_template=CPU_ONLY.name if name else CPU_ONLY),
        worker_node_config=[
            WorkerNodeConfig(
                "gpu",
                replicas=2,
                compute_template=template.name if name else template,
                pod_template=pod_template,
                **extra,
            ),
            WorkerNodeConfig("plain", replicas=1, requests=Resources(cpu="1")),
        ],
    )


POD_TEMPLATE = PodTemplate(
    pod_spec=V1PodSpec(
        containers=[
            V1Container(
                name="ray-worker",
                resources=V1ResourceRequirements(requests={"cpu": "1", "ephemeral-storage": "10Gi"}),
            )
        ],
        node_selector={"pool": "base", "disk": "ssd"},
        tolerations=[V1Toleration(key="base", operator="Exists")],
    )
)


@pytest.mark.parametrize("template", TEMPLATES, ids=[t.name for t in TEMPLATES])
@pytest.mark.parametrize(
    "extra",
    [{}, {"requests": Resources(cpu="4")}, {"requests": Resources(gpu="1"), "limits": Resources(gpu="1")}],
    ids=["template only", "explicit cpu", "explicit gpu"],
)
@pytest.mark.parametrize("pod_template", [None, POD_TEMPLATE], ids=["no pod template", "pod template"])
def test_a_named_template_on_ray_groups_builds_what_the_object_builds(
    kit: SimpleNamespace, template: ComputeTemplate, extra: dict[str, Any], pod_template: Any
) -> None:
    as_object = kit.build(kit.template("ray", ray_job_custom(_ray(False, template, pod_template, **extra)), 0))
    as_name = kit.build(
        kit.template("ray", ray_job_custom(_ray(True, template, pod_template, **extra)), 0),
        config=named(kit.config, stored(*TEMPLATES)),
    )
    assert as_name == as_object


def test_the_trainjob_target_applies_named_templates(kit: SimpleNamespace) -> None:
    trainjob = TrainJobConfig.from_section({"task-types": ["pytorch"]})
    config = dataclasses.replace(kit.config, trainjob=trainjob)

    def make(name: bool) -> PyTorch:
        return PyTorch(worker=Worker(replicas=2, compute_template=GPU_AMD.name if name else GPU_AMD))

    as_object = build_object(
        kit.template("pytorch", _serialized(lambda: make(False), pytorch_custom)), kit.metadata(), config
    )
    as_name = build_object(
        kit.template("pytorch", _serialized(lambda: make(True), pytorch_custom)),
        kit.metadata(),
        named(config, stored(GPU_AMD)),
    )
    assert as_object["kind"] == "TrainJob" and as_name == as_object
    assert as_name["spec"]["trainer"]["resourcesPerNode"]["limits"]["amd.com/gpu"] == "2"


def _pytorch_naming(kit: SimpleNamespace, name: str) -> Any:
    custom = _serialized(lambda: PyTorch(worker=Worker(replicas=1, compute_template=name)), pytorch_custom)
    return kit.template("pytorch", custom)


def test_an_unknown_name_is_refused_naming_it_and_the_templates_that_exist(kit: SimpleNamespace) -> None:
    with pytest.raises(BuildError) as info:
        kit.build(_pytorch_naming(kit, "h100"), config=named(kit.config, stored(GPU_AMD, CPU_ONLY)))
    assert str(info.value) == (
        "Worker: compute template 'h100' does not exist in namespace 'flyte'; existing templates: 'a100x8', 'cpu-large'"
    )


def test_a_name_without_templates_given_says_where_they_come_from(kit: SimpleNamespace) -> None:
    with pytest.raises(BuildError, match=r"no compute templates were given .*--templates FILE or --from-cluster"):
        kit.build(_pytorch_naming(kit, "a100x8"))


def test_a_template_stored_invalid_is_refused_with_why(kit: SimpleNamespace) -> None:
    bad = CPU_ONLY.to_spec().to_configmap("flyte")
    bad["data"]["memory"] = "lots"
    templates = TemplateSet.from_configmaps([bad], "flyte")
    with pytest.raises(BuildError) as info:
        kit.build(_pytorch_naming(kit, "cpu-large"), config=named(kit.config, templates))
    assert "compute template 'cpu-large' in namespace 'flyte' is invalid" in str(info.value)
    assert "memory is not a Kubernetes quantity: 'lots'" in str(info.value)


def test_a_request_above_the_template_limit_is_refused_not_clamped(kit: SimpleNamespace) -> None:
    # An 8-CPU request under a template whose cpu (request = limit) is 6: the object is refused at construction,
    # the named one when it is built.
    with pytest.raises(ValueError, match="cpu request '8' is above its limit '6'"):
        Worker(replicas=1, compute_template=CPU_ONLY, requests=Resources(cpu="8"))
    custom = _serialized(
        lambda: PyTorch(worker=Worker(replicas=1, compute_template="cpu-large", requests=Resources(cpu="8"))),
        pytorch_custom,
    )
    with pytest.raises(BuildError, match="Worker: the cpu request '8' is above its limit '6' after compute template"):
        kit.build(kit.template("pytorch", custom), config=named(kit.config, stored(CPU_ONLY)))


@pytest.mark.parametrize(
    ("ext", "message"),
    [
        ({"replicaSpecs": {"Worker": {"computeTemplate": "../etc"}}}, "computeTemplate must be a DNS-1123 label"),
        ({"replicaSpecs": {"Worker": {"computeTemplate": "a,b=c"}}}, "computeTemplate must be a DNS-1123 label"),
        ({"replicaSpecs": {"Worker": {"computeTemplate": 7}}}, "computeTemplate must be a DNS-1123 label"),
    ],
)
def test_forged_template_names_are_refused(kit: SimpleNamespace, ext: dict[str, Any], message: str) -> None:
    custom = {"workerReplicas": {"replicas": 1}, "kubejobs": {"version": 1, **ext}}
    with pytest.raises(BuildError, match=message):
        kit.build(kit.template("pytorch", custom), config=named(kit.config, stored(CPU_ONLY)))


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        (
            {"workers": {"nope": {"computeTemplate": "cpu-large"}}},
            "names groups the ray custom does not have: ['nope']",
        ),
        ({"head": {"computeTemplate": "cpu-large", "securityContext": {"privileged": True}}}, "unknown keys"),
        ({"head": {"explicitResources": {"requests": {"cpu": "1"}}}}, "needs a computeTemplate"),
        ({"tail": {}}, "unknown keys ['tail']"),
        ({"head": {"computeTemplate": "cpu-large", "explicitResources": {"requests": {"cpu": "NaN"}}}}, "quantity"),
    ],
)
def test_malformed_ray_groups_sections_are_refused(kit: SimpleNamespace, groups: dict[str, Any], message: str) -> None:
    custom = ray_job_custom(RayJobConfig([WorkerNodeConfig("w", replicas=1)]))
    custom["kubejobs"] = {"version": 1, "rayGroups": groups}
    with pytest.raises(BuildError) as info:
        kit.build(kit.template("ray", custom, 0), config=named(kit.config, stored(CPU_ONLY)))
    assert message in str(info.value)


def test_a_template_cannot_carry_pod_settings_beyond_resources_tolerations_and_node_selector() -> None:
    cm = CPU_ONLY.to_spec().to_configmap("flyte")
    for key, value in (("hostNetwork", "true"), ("securityContext", '{"privileged": true}'), ("image", "evil:1")):
        forged = {**cm, "data": {**cm["data"], key: value}}
        templates = TemplateSet.from_configmaps([forged], "flyte")
        assert templates.names() == []
        assert f"unknown keys ['{key}']" in templates.invalid["cpu-large"]
