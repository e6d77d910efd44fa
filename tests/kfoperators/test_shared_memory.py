"""The /dev/shm volume of PyTorch and Elastic tasks: the official plugin's default (flytekitplugins-kfpytorch
1.16 ``add_shared_mem_volume_to_pod_template``), its opt-outs and refusals, and the job our backend builds
from it (the volume and the mount on every role). What the pod template looks like is checked against the
official plugin in test_differential.py."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import flytekitplugins.kfpytorch as official
import pytest
from flyteidl.admin.agent_pb2 import TaskExecutionMetadata
from flytekit import PodTemplate, Resources, task
from flytekitplugins.kfoperators import Elastic, Master, PyTorch, Worker
from flytekitplugins.kubejobs.backend import BackendConfig, build_object
from flytekitplugins.kubejobs.userwarnings import KubejobsDeprecationWarning
from kubernetes.client import V1Container, V1EmptyDirVolumeSource, V1PodSpec, V1Volume, V1VolumeMount

from .task_functions import train

Register = Callable[[Any], Any]
# The official plugin's volume and mount (pod_template.py there).
SHM_VOLUME = {"name": "shm", "emptyDir": {"medium": "Memory"}}
SHM_MOUNT = {"name": "shm", "mountPath": "/dev/shm"}


def _roles(register: Register, crd_dir: Path, config: Any, **task_kwargs: Any) -> dict[str, Any]:
    template = register(task(task_config=config, **task_kwargs)(train))
    meta = TaskExecutionMetadata(namespace="proj-dev")
    meta.task_execution_id.node_execution_id.execution_id.name = "exec1"
    obj = build_object(template, meta, BackendConfig(crd_dir=str(crd_dir)))
    specs: dict[str, Any] = obj["spec"]["pytorchReplicaSpecs"]
    return specs


@pytest.mark.parametrize(
    ("config", "roles"),
    [
        (PyTorch(worker=Worker(replicas=2)), {"Master", "Worker"}),
        (PyTorch(master=Master(image="reg/m"), worker=Worker(replicas=1, image="reg/w")), {"Master", "Worker"}),
        (Elastic(nnodes="2:4", nproc_per_node=2), {"Worker"}),
    ],
)
def test_the_backend_mounts_dev_shm_on_every_role_of_a_default_task(
    register: Register, crd_dir: Path, config: Any, roles: set[str]
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the default warns about nothing
        specs = _roles(register, crd_dir, config)
    assert set(specs) == roles
    for role, spec in specs.items():
        pod = spec["template"]["spec"]
        (container,) = pod["containers"]
        assert container["name"] == "pytorch", role  # the Training Operator's container, renamed from primary
        assert pod["volumes"] == [SHM_VOLUME], role
        assert container["volumeMounts"] == [SHM_MOUNT], role


@pytest.mark.parametrize("config", [PyTorch(worker=Worker(replicas=2)), Elastic(nnodes=2)])
def test_task_shared_memory_with_a_size_reaches_every_role_instead(
    register: Register, crd_dir: Path, config: Any
) -> None:
    specs = _roles(register, crd_dir, config, shared_memory="2Gi", requests=Resources(mem="4Gi"))
    for role, spec in specs.items():
        pod = spec["template"]["spec"]
        volumes = [v for v in pod.get("volumes", []) if v["emptyDir"].get("medium") == "Memory"]
        assert len(volumes) == 1 and volumes[0]["emptyDir"]["sizeLimit"] == "2Gi", role
        mounts = pod["containers"][0]["volumeMounts"]
        assert [m["mountPath"] for m in mounts] == ["/dev/shm"], role


def test_opting_out_leaves_the_container_runtime_default(register: Register, crd_dir: Path) -> None:
    specs = _roles(register, crd_dir, PyTorch(worker=Worker(replicas=1), increase_shared_mem=False))
    for spec in specs.values():
        assert "volumes" not in spec["template"]["spec"]
        assert "volumeMounts" not in spec["template"]["spec"]["containers"][0]


def test_the_default_does_not_warn_and_the_deprecated_true_names_the_replacement() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert (
            task(task_config=PyTorch(worker=Worker(replicas=1), increase_shared_mem=False))(train).pod_template is None
        )
        default = task(task_config=Elastic())(train)
    with pytest.warns(KubejobsDeprecationWarning, match=r"increase_shared_mem=False.*@task\(shared_memory=True\)"):
        explicit = PyTorch(worker=Worker(replicas=1), increase_shared_mem=True)
    assert default.pod_template is not None
    assert task(task_config=explicit)(train).pod_template == default.pod_template


def _template(*containers: V1Container, volumes: Any = None) -> PodTemplate:
    return PodTemplate(pod_spec=V1PodSpec(containers=list(containers), volumes=volumes))


SHM_MOUNTED = V1Container(name="primary", volume_mounts=[V1VolumeMount(name="own", mount_path="/dev/shm")])
REFUSED = [
    # refused by the official plugin too
    pytest.param(lambda: _template(V1Container(name="primary"), V1Container(name="sidecar")), "2 containers", id="two"),
    pytest.param(lambda: _template(SHM_MOUNTED), "already mounts /dev/shm", id="mounted"),
    # the official plugin sends these and the API server refuses the pod
    pytest.param(
        lambda: _template(
            V1Container(name="primary"), volumes=[V1Volume(name="shm", empty_dir=V1EmptyDirVolumeSource())]
        ),
        "volume named 'shm'",
        id="volume-name",
    ),
]


@pytest.mark.parametrize(("make", "message"), REFUSED)
@pytest.mark.parametrize("config", [PyTorch(worker=Worker(replicas=1)), Elastic(nnodes=2)])
def test_conflicting_pod_templates_are_refused_at_construction(
    make: Callable[[], PodTemplate], message: str, config: Any
) -> None:
    with pytest.raises(ValueError, match=rf"{message}.*increase_shared_mem=False"):
        task(task_config=config, pod_template=make())(train)
    task(task_config=config, pod_template=make(), shared_memory=True)(train)  # the opt-outs accept them
    task(task_config=type(config)(**{**_fields(config), "increase_shared_mem": False}), pod_template=make())(train)


def _fields(config: Any) -> dict[str, Any]:
    return {k: getattr(config, k) for k in ("nnodes",) if hasattr(config, k)} or {"worker": Worker(replicas=1)}


def test_the_official_plugin_refuses_the_same_two() -> None:
    makers: list[Callable[[], PodTemplate]] = [
        lambda: _template(V1Container(name="primary"), V1Container(name="b")),
        lambda: _template(SHM_MOUNTED),
    ]
    for make in makers:
        with warnings.catch_warnings(), pytest.raises(ValueError):
            warnings.simplefilter("ignore")
            task(task_config=official.PyTorch(num_workers=1), pod_template=make())(train)


def test_a_role_mounting_dev_shm_itself_is_refused() -> None:
    worker = Worker(
        replicas=1, volumes=[{"name": "own", "emptyDir": {}}], volume_mounts=[{"name": "own", "mountPath": "/dev/shm"}]
    )
    with pytest.raises(ValueError, match=r"Worker.volume_mounts already mounts /dev/shm"):
        task(task_config=PyTorch(worker=worker))(train)
    task(task_config=PyTorch(worker=worker, increase_shared_mem=False))(train)


def test_a_lone_sidecar_template_gets_the_mount_on_the_primary_it_is_given(register: Register) -> None:
    template = PodTemplate(primary_container_name="main", pod_spec=V1PodSpec(containers=[V1Container(name="log")]))
    registered = register(task(task_config=PyTorch(worker=Worker(replicas=1)), pod_template=template)(train))
    containers = {c["name"]: c for c in registered.k8s_pod.pod_spec["containers"]}
    assert "volumeMounts" not in containers["log"]
    assert containers["main"]["volumeMounts"] == [SHM_MOUNT]
