"""Adversarial configs: values Python takes and the Kubernetes API server (or the operator) refuses.

Each one must fail where it is written, with a ValueError/TypeError whose message names the field and shows
the value, and without a CRD directory configured (none of these rules needs a schema). Before these checks
were wired in, most of them were accepted and failed only when the job's pods were created. The expected
verdicts come from the API server's validation rules (label syntax, EnvVar names, Toleration operators and
effects, Volume sources and names, the quantity grammar, whole extended resources), not from our code.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest
from flytekit import PodTemplate, Resources, task
from flytekitplugins.kfoperators import (
    PS,
    Chief,
    Elastic,
    HorovodJob,
    Launcher,
    Master,
    MPIJob,
    PyTorch,
    TfJob,
    Worker,
)
from flytekitplugins.kubejobs import ComputeTemplate
from flytekitplugins.raycluster import AutoscalerOptionsConfig, HeadNodeConfig, RayJobConfig, WorkerNodeConfig
from kubernetes.client import V1Container, V1PodSpec, V1ResourceRequirements, V1Toleration, V1Volume

Case = tuple[str, Callable[[], object], tuple[str, ...]]
BAD_ENV: Any = [{"name": "A=B", "value": "1"}]  # a plain dict where the client model types a V1EnvVar


def train() -> None:
    """A task body; the decorations below are what is checked."""


def _ray_group(**spec: Any) -> WorkerNodeConfig:
    """A Ray worker group whose pod template carries ``spec`` (kubernetes client models)."""
    containers = spec.pop("containers", [V1Container(name="ray-worker")])
    return WorkerNodeConfig("w", 1, pod_template=PodTemplate(pod_spec=V1PodSpec(containers=containers, **spec)))


def _quantity_cases() -> list[Case]:
    """Spellings ``float()``/``Decimal()`` accept or the kubernetes client's parser lets through, but the
    API server's grammar (ASCII digits, SI/binary suffixes, exponent) does not, in every place that takes one."""
    spellings = [
        "inf",
        "Infinity",
        "-inf",
        "NaN",
        "nan",
        "nanGi",
        "infMi",
        "1_000",
        "\uff11\uff12",
        "١٢",
        "1K",
        "2Gb",
        "1 Gi",
    ]
    spellings += ["0x10", "1.2.3", "1e", "e3", "", " "]
    places: list[tuple[str, Callable[[str], object], str]] = [
        ("worker-mem", lambda v: Worker(requests=Resources(mem=v)), "Worker.requests.mem"),
        ("master-cpu", lambda v: Master(limits=Resources(cpu=v)), "Master.limits.cpu"),
        ("template-memory", lambda v: ComputeTemplate(name="t", memory=v), "ComputeTemplate('t').memory"),
        ("head-cpu", lambda v: HeadNodeConfig(requests=Resources(cpu=v)), "HeadNodeConfig.requests.cpu"),
        (
            "ray-pod-template-memory",
            lambda v: _ray_group(containers=[V1Container(name="ray-worker", resources=_limits(memory=v))]),
            "WorkerNodeConfig('w').pod_template resources.limits['memory']",
        ),
        (
            "autoscaler-mem",
            lambda v: AutoscalerOptionsConfig(limits=Resources(mem=v)),
            "AutoscalerOptionsConfig.limits",
        ),
    ]
    cases: list[Case] = []
    for place, make, field in places:
        for spelling in spellings:
            cases.append((f"{place}-{spelling!r}", functools.partial(make, spelling), (field, repr(spelling))))
    for value in (float("inf"), float("nan"), -1.0):
        cases.append((f"float-{value}", functools.partial(_cpu_request, value), ("Worker.requests.cpu",)))
    return cases


def _cpu_request(value: float) -> Worker:
    return Worker(requests=Resources(cpu=value))


def _limits(**amounts: str) -> V1ResourceRequirements:
    return V1ResourceRequirements(limits=amounts)


CASES: list[Case] = [
    # node selectors: Kubernetes label keys and values
    ("selector-key-space", lambda: Worker(node_selector={"gpu type": "a100"}), ("Worker.node_selector", "'gpu type'")),
    ("selector-value-space", lambda: Worker(node_selector={"gpu": "a 100"}), ("Worker.node_selector", "'a 100'")),
    ("selector-key-dash", lambda: Master(node_selector={"-gpu": "x"}), ("Master.node_selector", "'-gpu'")),
    ("selector-value-64", lambda: PS(node_selector={"gpu": "v" * 64}), ("PS.node_selector", "v" * 64)),
    ("selector-prefix-upper", lambda: Chief(node_selector={"Example.COM/gpu": "a"}), ("Chief.node_selector",)),
    ("selector-empty-name", lambda: Worker(node_selector={"example.com/": "a"}), ("Worker.node_selector",)),
    ("selector-non-ascii", lambda: Launcher(node_selector={"zone": "zürich"}), ("Launcher.node_selector", "zürich")),
    ("selector-newline", lambda: Worker(node_selector={"zone\n": "a"}), ("Worker.node_selector", "zone\\n")),
    (
        "template-selector",
        lambda: ComputeTemplate(name="t", node_selector={"gpu type": "x"}),
        ("ComputeTemplate('t').node_selector", "'gpu type'"),
    ),
    (
        "ray-selector",
        lambda: _ray_group(node_selector={"gpu type": "x"}),
        ("WorkerNodeConfig('w').pod_template.pod_spec.nodeSelector", "'gpu type'"),
    ),
    # env var names
    ("env-equals", lambda: Worker(env={"A=B": "1"}), ("Worker.env", "'A=B'")),
    ("env-non-ascii", lambda: Worker(env={"NAÏVE": "1"}), ("Worker.env", "NAÏVE")),
    ("env-newline", lambda: Master(env={"LINE\nBREAK": "1"}), ("Master.env", "LINE\\nBREAK")),
    ("env-tab", lambda: Launcher(env={"TAB\t": "1"}), ("Launcher.env", "TAB\\t")),
    ("env-list-equals", lambda: Chief(env=[{"name": "X=1", "value": "2"}]), ("Chief.env", "'X=1'")),
    ("autoscaler-env", lambda: AutoscalerOptionsConfig(env={"A=B": "1"}), ("AutoscalerOptionsConfig.env", "'A=B'")),
    (
        "ray-container-env",
        lambda: _ray_group(containers=[V1Container(name="ray-worker", env=BAD_ENV)]),
        ("WorkerNodeConfig('w').pod_template.pod_spec.containers[0].env", "'A=B'"),
    ),
    # GPUs and other extended resources are whole numbers
    ("gpu-half", lambda: Worker(requests=Resources(gpu="0.5")), ("Worker.requests.gpu", "'0.5'")),
    ("gpu-milli", lambda: Worker(limits=Resources(gpu="500m")), ("Worker.limits.gpu", "'500m'")),
    (
        "gpu-template-float",
        lambda: ComputeTemplate(name="t", gpu=0.5),  # type: ignore[arg-type]
        ("ComputeTemplate('t').gpu", "0.5"),
    ),
    ("gpu-ray-head", lambda: HeadNodeConfig(requests=Resources(gpu="0.25")), ("HeadNodeConfig.requests.gpu", "0.25")),
    ("gpu-ray-worker", lambda: WorkerNodeConfig("w", 1, limits=Resources(gpu="1.5")), ("limits.gpu", "'1.5'")),
    (
        "extended-half",
        lambda: ComputeTemplate(name="t", extended_resources={"example.com/fpga": "0.5"}),
        ("ComputeTemplate('t').extended_resources['example.com/fpga']", "'0.5'"),
    ),
    # tolerations: operators Exists/Equal, the three taint effects
    (
        "toleration-in",
        lambda: Worker(tolerations=[{"key": "gpu", "operator": "In"}]),
        ("Worker.tolerations[0]", "'In'"),
    ),
    (
        "toleration-lowercase",
        lambda: Worker(tolerations=[{"key": "gpu", "operator": "exists"}]),
        ("Worker.tolerations[0].operator", "'exists'"),
    ),
    (
        "toleration-effect",
        lambda: Master(tolerations=[{"key": "gpu", "effect": "NoRun"}]),
        ("Master.tolerations[0].effect", "'NoRun'"),
    ),
    (
        "toleration-exists-value",
        lambda: Worker(tolerations=[{"key": "gpu", "operator": "Exists", "value": "x"}]),
        ("Worker.tolerations[0].value", "'x'"),
    ),
    (
        "toleration-empty-key",
        lambda: Worker(tolerations=[{"operator": "Equal", "value": "x"}]),
        ("Worker.tolerations[0]", "'Equal'"),
    ),
    (
        "toleration-seconds",
        lambda: Worker(tolerations=[{"key": "a", "effect": "NoSchedule", "tolerationSeconds": 5}]),
        ("Worker.tolerations[0].tolerationSeconds", "'NoSchedule'"),
    ),
    (
        "toleration-model",
        lambda: PS(tolerations=[V1Toleration(key="gpu", operator="Gt")]),
        ("PS.tolerations[0].operator", "'Gt'"),
    ),
    (
        "template-toleration",
        lambda: ComputeTemplate(name="t", tolerations=[{"key": "gpu", "operator": "NotIn"}]),
        ("ComputeTemplate('t').tolerations[0].operator", "'NotIn'"),
    ),
    (
        "ray-toleration",
        lambda: _ray_group(tolerations=[V1Toleration(key="gpu", operator="In")]),
        ("WorkerNodeConfig('w').pod_template.pod_spec.tolerations[0].operator", "'In'"),
    ),
    # volumes: a DNS-1123 label name and exactly one source; mounts with a name and a path
    ("volume-no-source", lambda: Worker(volumes=[{"name": "data"}]), ("Worker.volumes[0]", "'data'", "none")),
    ("volume-upper", lambda: Worker(volumes=[{"name": "Data", "emptyDir": {}}]), ("Worker.volumes[0].name", "'Data'")),
    ("volume-underscore", lambda: Chief(volumes=[{"name": "my_vol", "emptyDir": {}}]), ("Chief.volumes[0]", "my_vol")),
    ("volume-no-name", lambda: Worker(volumes=[{"emptyDir": {}}]), ("Worker.volumes[0].name", "None")),
    (
        "volume-two-sources",
        lambda: Worker(volumes=[{"name": "d", "emptyDir": {}, "hostPath": {"path": "/"}}]),
        ("Worker.volumes[0]", "hostPath"),
    ),
    ("volume-model-no-source", lambda: Master(volumes=[V1Volume(name="data")]), ("Master.volumes[0]", "'data'")),
    ("mount-no-path", lambda: Worker(volume_mounts=[{"name": "data"}]), ("Worker.volume_mounts[0].mountPath", "None")),
    (
        "mount-colon",
        lambda: Worker(volume_mounts=[{"name": "d", "mountPath": "/a:b"}]),
        ("Worker.volume_mounts[0].mountPath", "'/a:b'"),
    ),
    ("ray-volume", lambda: _ray_group(volumes=[V1Volume(name="data")]), ("pod_spec.volumes[0]", "'data'")),
    # images: no whitespace, ASCII only
    ("image-leading-space", lambda: Worker(image=" ghcr.io/acme/train:1"), ("Worker.image", "' ghcr.io/acme/train:1'")),
    ("image-newline", lambda: Master(image="ghcr.io/acme/train:1\n"), ("Master.image", "train:1\\n")),
    ("image-non-ascii", lambda: PS(image="ghcr.io/ácme/train:1"), ("PS.image", "ácme")),
    ("image-inner-space", lambda: Launcher(image="img :1"), ("Launcher.image", "'img :1'")),
    ("autoscaler-image", lambda: AutoscalerOptionsConfig(image=" rayproject/ray"), ("AutoscalerOptionsConfig.image",)),
    (
        "ray-container-image",
        lambda: _ray_group(containers=[V1Container(name="ray-worker", image="ray:2 ")]),
        ("pod_spec.containers[0].image", "'ray:2 '"),
    ),
    # mpirun -np workers*slots must fit an int32
    ("mpi-np-overflow", lambda: MPIJob(worker=Worker(replicas=2**16), slots=2**16), ("MPIJob", "slots", "4294967296")),
    ("horovod-np-overflow", lambda: HorovodJob(worker=Worker(replicas=2**31 - 1), slots=2), ("HorovodJob", "slots")),
    # timeouts must be finite
    ("rdzv-timeout-nan", lambda: Elastic(rdzv_configs={"timeout": float("nan")}), ("Elastic.rdzv_configs['timeout']",)),
    ("rdzv-join-inf", lambda: Elastic(rdzv_configs={"join_timeout": float("inf")}), ("Elastic.rdzv_configs",)),
    ("monitor-nan", lambda: Elastic(monitor_interval=float("nan")), ("Elastic.monitor_interval", "nan")),
    ("monitor-inf", lambda: Elastic(monitor_interval=float("inf")), ("Elastic.monitor_interval", "inf")),
    # task-level resources on our task types, at decoration
    (
        "task-mem-pytorch",
        lambda: task(requests=Resources(mem="2Gb"), task_config=PyTorch(worker=Worker(replicas=1)))(train),
        ("requests.mem", "'2Gb'"),
    ),
    (
        "task-cpu-tf",
        lambda: task(limits=Resources(cpu="NaN"), task_config=TfJob(worker=Worker(replicas=1)))(train),
        ("limits.cpu", "'NaN'"),
    ),
    (
        "task-gpu-mpi",
        lambda: task(requests=Resources(gpu="0.5"), task_config=MPIJob(worker=Worker(replicas=1)))(train),
        ("requests.gpu", "'0.5'"),
    ),
    (
        "task-resources-elastic",
        lambda: task(resources=Resources(cpu="inf"), task_config=Elastic(nnodes=2))(train),
        ("requests.cpu", "'inf'"),
    ),
    (
        "task-mem-ray",
        lambda: task(
            requests=Resources(mem="1_000"), task_config=RayJobConfig(worker_node_config=[WorkerNodeConfig("w", 1)])
        )(train),
        ("requests.mem", "'1_000'"),
    ),
    # a task-level pod template on our task types, at decoration (flytekit passes it through unchecked)
    (
        "task-pod-template-selector-pytorch",
        lambda: task(
            pod_template=PodTemplate(pod_spec={"nodeSelector": {"pool": "a b"}}),
            task_config=PyTorch(worker=Worker(replicas=1)),
        )(train),
        ("pod_template.pod_spec.nodeSelector", "'a b'"),
    ),
    (
        "task-pod-template-image-ray",
        lambda: task(
            pod_template=PodTemplate(pod_spec=V1PodSpec(containers=[V1Container(name="primary", image="ray:2 ")])),
            task_config=RayJobConfig(worker_node_config=[WorkerNodeConfig("w", 1)]),
        )(train),
        ("pod_template.pod_spec.containers[0].image", "'ray:2 '"),
    ),
    (
        "task-pod-template-env-tf",
        lambda: task(
            pod_template=PodTemplate(pod_spec={"containers": [{"name": "primary", "env": [{"name": "A=B"}]}]}),
            task_config=TfJob(worker=Worker(replicas=1)),
        )(train),
        ("pod_template.pod_spec.containers[0].env", "'A=B'"),
    ),
    (
        "task-pod-template-two-volume-sources",
        lambda: task(
            pod_template=PodTemplate(pod_spec={"volumes": [{"name": "d", "emptyDir": {}, "hostPath": {"path": "/"}}]}),
            task_config=MPIJob(worker=Worker(replicas=1)),
        )(train),
        ("pod_template.pod_spec.volumes[0]", "hostPath"),
    ),
    *_quantity_cases(),
]


@pytest.mark.parametrize(("make", "needles"), [pytest.param(c[1], c[2], id=c[0]) for c in CASES])
def test_an_adversarial_config_is_refused_where_it_is_written(
    make: Callable[[], object], needles: tuple[str, ...]
) -> None:
    with pytest.raises((ValueError, TypeError)) as caught:
        make()
    assert type(caught.value) in (ValueError, TypeError), repr(caught.value)  # not a decimal or parser error
    message = str(caught.value)
    for needle in needles:
        assert needle in message, message
    assert "\n" not in message.strip(), message  # one line


def test_the_table_is_large_and_covers_every_rule() -> None:
    assert len(CASES) >= 140
    prefixes = {case_id.split("-")[0] for case_id, _, _ in CASES}
    assert {"selector", "env", "gpu", "toleration", "volume", "mount", "image", "mpi", "rdzv", "task"} <= prefixes
