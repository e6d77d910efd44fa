"""Differential tests: the same config written for the official plugins (flytekitplugins-kfpytorch,
-kftensorflow, -kfmpi 1.16, installed) and for ours registers to a task that a Flyte backend reads the
same way: task type and version, every role's effective replicas/image/resources/restart policy
(through ``common`` and through the deprecated fields), run policy, elastic config, slots, MPI
commands and the MPI/Horovod container args."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

import flytekitplugins.kfmpi as official_mpi
import flytekitplugins.kfoperators as ours
import flytekitplugins.kfpytorch as official_pytorch
import flytekitplugins.kftensorflow as official_tf
import pytest
from flytekit import PodTemplate, Resources, task
from google.protobuf.json_format import MessageToDict

from .backend_view import backend_view
from .task_functions import train

Builder = Callable[[Any], Any]
Register = Callable[[Any], Any]
GPU = Resources(gpu="1")

# (id, official module, builder(ns) -> config); every builder uses only fields of the official API.
PYTORCH: list[tuple[str, Builder]] = [
    ("minimal", lambda m: m.PyTorch(worker=m.Worker(replicas=2))),
    ("deprecated-num-workers", lambda m: m.PyTorch(num_workers=3)),
    ("num-workers-zero-and-replicas", lambda m: m.PyTorch(num_workers=0, worker=m.Worker(replicas=2))),
    ("num-workers-and-zero-replicas", lambda m: m.PyTorch(num_workers=3, worker=m.Worker(replicas=0))),
    (
        "worker-all-fields",
        lambda m: m.PyTorch(
            worker=m.Worker(
                image="reg/worker:1",
                requests=Resources(cpu="2", mem="4Gi"),
                limits=Resources(cpu="4", mem="8Gi", gpu="1"),
                replicas=4,
                restart_policy=m.RestartPolicy.FAILURE,
            )
        ),
    ),
    (
        "master-and-worker",
        lambda m: m.PyTorch(
            master=m.Master(image="reg/master:1", requests=Resources(cpu="1"), restart_policy=m.RestartPolicy.ALWAYS),
            worker=m.Worker(replicas=2, restart_policy=m.RestartPolicy.NEVER, requests=GPU, limits=GPU),
        ),
    ),
    (
        "master-limits-positional",
        lambda m: m.PyTorch(m.Master("reg/m:2", None, Resources(cpu="500m", mem="1Gi", gpu=2)), m.Worker(replicas=1)),
    ),
    (
        "run-policy-all",
        lambda m: m.PyTorch(
            worker=m.Worker(replicas=2),
            run_policy=m.RunPolicy(
                clean_pod_policy=m.CleanPodPolicy.ALL,
                ttl_seconds_after_finished=100,
                active_deadline_seconds=200,
                backoff_limit=3,
            ),
        ),
    ),
    (
        "run-policy-none",
        lambda m: m.PyTorch(
            worker=m.Worker(replicas=1), run_policy=m.RunPolicy(clean_pod_policy=m.CleanPodPolicy.NONE)
        ),
    ),
    (
        "run-policy-running-backoff",
        lambda m: m.PyTorch(
            worker=m.Worker(replicas=1),
            run_policy=m.RunPolicy(clean_pod_policy=m.CleanPodPolicy.RUNNING, backoff_limit=5),
        ),
    ),
    (
        "run-policy-ttl-only",
        lambda m: m.PyTorch(worker=m.Worker(replicas=1), run_policy=m.RunPolicy(ttl_seconds_after_finished=60)),
    ),
    ("zero-workers", lambda m: m.PyTorch(worker=m.Worker(replicas=0))),
    ("no-shared-mem", lambda m: m.PyTorch(worker=m.Worker(replicas=2), increase_shared_mem=False)),
    # a zero entry still counts: the backend then overrides the role's resources (§1.2 step 2)
    ("zero-gpu-request", lambda m: m.PyTorch(worker=m.Worker(replicas=2, requests=Resources(cpu="1", gpu="0")))),
    (
        "limits-numbers",
        lambda m: m.PyTorch(worker=m.Worker(replicas=1, limits=Resources(cpu=1.5, mem=1024, ephemeral_storage="10Gi"))),
    ),
]

ELASTIC: list[tuple[str, Builder]] = [
    ("default", lambda m: m.Elastic()),
    ("one-node-four-procs", lambda m: m.Elastic(nnodes=1, nproc_per_node=4)),
    ("two-nodes", lambda m: m.Elastic(nnodes=2, nproc_per_node=8)),
    (
        "range-restarts-rdzv",
        lambda m: m.Elastic(nnodes="2:4", max_restarts=3, rdzv_configs={"timeout": 1200, "join_timeout": 900}),
    ),
    (
        "run-policy-fork",
        lambda m: m.Elastic(
            nnodes=2,
            start_method="fork",
            monitor_interval=10,
            run_policy=m.RunPolicy(clean_pod_policy=m.CleanPodPolicy.ALL, backoff_limit=2),
        ),
    ),
    ("range-from-one", lambda m: m.Elastic(nnodes="1:2", nproc_per_node=2)),
    ("str-count", lambda m: m.Elastic(nnodes="3")),
    (
        "run-policy-deadline",
        lambda m: m.Elastic(
            nnodes=4, run_policy=m.RunPolicy(active_deadline_seconds=3600, ttl_seconds_after_finished=5)
        ),
    ),
]


def _tf_zero(m: ModuleType, **kw: Any) -> Any:
    return m.TfJob(chief=m.Chief(replicas=0), ps=m.PS(replicas=0), **kw)


TENSORFLOW: list[tuple[str, Builder]] = [
    ("minimal", lambda m: _tf_zero(m, worker=m.Worker(replicas=2))),
    (
        "all-deprecated",
        lambda m: m.TfJob(num_workers=2, num_ps_replicas=1, num_chief_replicas=1, num_evaluator_replicas=1),
    ),
    (
        "all-groups-all-fields",
        lambda m: m.TfJob(
            chief=m.Chief(
                image="reg/chief", requests=Resources(cpu="1"), replicas=1, restart_policy=m.RestartPolicy.ALWAYS
            ),
            ps=m.PS(image="reg/ps", limits=Resources(mem="2Gi"), replicas=2, restart_policy=m.RestartPolicy.FAILURE),
            worker=m.Worker(image="reg/w", requests=GPU, limits=GPU, replicas=3, restart_policy=m.RestartPolicy.NEVER),
            evaluator=m.Evaluator(image="reg/e", requests=Resources(cpu="250m"), replicas=1),
        ),
    ),
    (
        "run-policy-all-zero-groups",
        lambda m: _tf_zero(
            m,
            worker=m.Worker(replicas=1),
            run_policy=m.RunPolicy(
                clean_pod_policy=m.CleanPodPolicy.RUNNING,
                ttl_seconds_after_finished=10,
                active_deadline_seconds=20,
                backoff_limit=4,
            ),
        ),
    ),
    (
        "clean-none-backoff",
        lambda m: _tf_zero(
            m,
            worker=m.Worker(replicas=1),
            run_policy=m.RunPolicy(clean_pod_policy=m.CleanPodPolicy.NONE, backoff_limit=2),
        ),
    ),
    (
        "counts",
        lambda m: m.TfJob(
            chief=m.Chief(replicas=1),
            ps=m.PS(replicas=2),
            worker=m.Worker(replicas=3),
            evaluator=m.Evaluator(replicas=1),
        ),
    ),
    (
        "deprecated-ps-with-roles",
        lambda m: m.TfJob(chief=m.Chief(replicas=1), worker=m.Worker(replicas=2), num_ps_replicas=2),
    ),
    ("zero-memory-limit", lambda m: _tf_zero(m, worker=m.Worker(replicas=1, limits=Resources(mem="0")))),
    (
        "ps-limits",
        lambda m: m.TfJob(
            chief=m.Chief(replicas=0),
            ps=m.PS(replicas=1, limits=Resources(cpu="2", mem="1G")),
            worker=m.Worker(replicas=1),
        ),
    ),
    (
        "restart-and-evaluator-image",
        lambda m: _tf_zero(
            m,
            worker=m.Worker(replicas=2, restart_policy=m.RestartPolicy.ALWAYS),
            evaluator=m.Evaluator(image="reg/eval", replicas=1),
        ),
    ),
    (
        "run-policy-running-ttl",
        lambda m: _tf_zero(
            m,
            worker=m.Worker(replicas=1),
            run_policy=m.RunPolicy(clean_pod_policy=m.CleanPodPolicy.ALL, ttl_seconds_after_finished=30),
        ),
    ),
]

MPI: list[tuple[str, Builder]] = [
    ("minimal", lambda m: m.MPIJob(launcher=m.Launcher(replicas=1), worker=m.Worker(replicas=2))),
    ("deprecated-slots", lambda m: m.MPIJob(num_workers=3, num_launcher_replicas=1, slots=2)),
    (
        "full",
        lambda m: m.MPIJob(
            launcher=m.Launcher(
                command=["python", "launch.py"],
                image="reg/launcher",
                requests=Resources(cpu="1"),
                replicas=1,
                restart_policy=m.RestartPolicy.FAILURE,
            ),
            worker=m.Worker(
                command=["python", "work.py", "--x", "1"],
                image="reg/worker",
                requests=Resources(cpu="2", mem="4Gi", gpu="1"),
                limits=Resources(cpu="2", mem="4Gi", gpu="1"),
                replicas=2,
                restart_policy=m.RestartPolicy.ALWAYS,
            ),
            run_policy=m.RunPolicy(clean_pod_policy=m.CleanPodPolicy.ALL, backoff_limit=0),
            slots=2,
        ),
    ),
    (
        "worker-command",
        lambda m: m.MPIJob(launcher=m.Launcher(replicas=1), worker=m.Worker(command=["sshd", "-D"], replicas=1)),
    ),
    (
        "run-policy-deadline",
        lambda m: m.MPIJob(
            launcher=m.Launcher(replicas=1),
            worker=m.Worker(replicas=2),
            run_policy=m.RunPolicy(clean_pod_policy=m.CleanPodPolicy.RUNNING, active_deadline_seconds=600),
        ),
    ),
    (
        "launcher-image-resources",
        lambda m: m.MPIJob(
            launcher=m.Launcher(image="reg/l", limits=Resources(mem="512Mi"), replicas=1), worker=m.Worker(replicas=1)
        ),
    ),
    (
        "many-slots",
        lambda m: m.MPIJob(
            launcher=m.Launcher(replicas=1), worker=m.Worker(replicas=4, limits=Resources(gpu="4")), slots=4
        ),
    ),
]

HOROVOD: list[tuple[str, Builder]] = [
    ("minimal", lambda m: m.HorovodJob(launcher=m.Launcher(replicas=1), worker=m.Worker(replicas=2))),
    (
        "full",
        lambda m: m.HorovodJob(
            launcher=m.Launcher(replicas=1),
            worker=m.Worker(replicas=2),
            verbose=True,
            log_level="DEBUG",
            discovery_script_path="/opt/discover.sh",
            elastic_timeout=600,
            run_policy=m.RunPolicy(clean_pod_policy=m.CleanPodPolicy.ALL, ttl_seconds_after_finished=60),
        ),
    ),
    ("slots", lambda m: m.HorovodJob(launcher=m.Launcher(replicas=1), worker=m.Worker(replicas=3), slots=2)),
    (
        "commands-images",
        lambda m: m.HorovodJob(
            launcher=m.Launcher(replicas=1, image="reg/l"),
            worker=m.Worker(replicas=2, image="reg/w", command=["sleep", "inf"]),
        ),
    ),
    (
        "warning-level-restarts",
        lambda m: m.HorovodJob(
            launcher=m.Launcher(replicas=1, restart_policy=m.RestartPolicy.FAILURE),
            worker=m.Worker(replicas=2, restart_policy=m.RestartPolicy.ALWAYS),
            log_level="WARNING",
            verbose=False,
        ),
    ),
]

CASES = [
    *(pytest.param(official_pytorch, b, id=f"pytorch-{i}") for i, b in PYTORCH),
    *(pytest.param(official_pytorch, b, id=f"elastic-{i}") for i, b in ELASTIC),
    *(pytest.param(official_tf, b, id=f"tf-{i}") for i, b in TENSORFLOW),
    *(pytest.param(official_mpi, b, id=f"mpi-{i}") for i, b in MPI),
    *(pytest.param(official_mpi, b, id=f"horovod-{i}") for i, b in HOROVOD),
]


def _register(register: Register, module: ModuleType, builder: Builder) -> Any:
    # Both sides warn by design here (deprecated fields; the official plugin's shared-memory notice):
    # this test compares outputs, the warnings have their own tests.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return register(task(task_config=builder(module))(train))


def test_there_are_at_least_40_configs() -> None:
    assert len(CASES) >= 40


@pytest.mark.parametrize(("official", "builder"), CASES)
def test_backend_reads_the_same_task(register: Register, official: ModuleType, builder: Builder) -> None:
    theirs, mine = _register(register, official, builder), _register(register, ours, builder)
    assert (mine.type, mine.task_type_version) == (theirs.type, theirs.task_type_version)
    if theirs.type == "python-task":
        assert not mine.HasField("custom") or not MessageToDict(mine.custom)
        return
    their_custom, my_custom = MessageToDict(theirs.custom), MessageToDict(mine.custom)
    expected = backend_view(theirs.type, their_custom, common=False)  # flytekit writes only the deprecated fields
    assert backend_view(mine.type, my_custom, common=True) == expected  # a backend reading `common`
    assert backend_view(mine.type, my_custom, common=False) == expected  # a backend from before `common`
    if theirs.type == "mpi":
        assert list(mine.container.args) == list(theirs.container.args)


def _pod_side(template: Any) -> dict[str, Any]:
    """What a backend builds every replica's pod from, besides the custom: the pod template (or plain
    container), its primary container's name and the extended resources (flytekit's shared memory)."""
    return {
        "target": template.WhichOneof("target"),
        "k8sPod": MessageToDict(template.k8s_pod) if template.HasField("k8s_pod") else None,
        "config": dict(template.config),
        "extendedResources": MessageToDict(template.extended_resources),
    }


def _user_pod_template() -> Any:
    from kubernetes.client import V1Container, V1PodSpec, V1Volume, V1VolumeMount

    return PodTemplate(
        primary_container_name="main",
        pod_spec=V1PodSpec(
            containers=[V1Container(name="main", volume_mounts=[V1VolumeMount(name="data", mount_path="/data")])],
            volumes=[V1Volume(name="data")],
        ),
        labels={"team": "ml"},
    )


# (id, builder(ns) -> config, task kwargs): the /dev/shm default and every opt-out the official accepts.
# A pod_template is given as a factory: each side gets its own (the official plugin changes the one it gets).
SHARED_MEMORY: list[tuple[str, Builder, dict[str, Any]]] = [
    ("pytorch-default", lambda m: m.PyTorch(worker=m.Worker(replicas=2)), {}),
    ("pytorch-deprecated-true", lambda m: m.PyTorch(num_workers=2, increase_shared_mem=True), {}),
    ("pytorch-opt-out", lambda m: m.PyTorch(worker=m.Worker(replicas=2), increase_shared_mem=False), {}),
    ("pytorch-task-shared-memory", lambda m: m.PyTorch(worker=m.Worker(replicas=2)), {"shared_memory": True}),
    ("pytorch-task-shared-memory-size", lambda m: m.PyTorch(worker=m.Worker(replicas=1)), {"shared_memory": "2Gi"}),
    ("pytorch-task-shared-memory-false", lambda m: m.PyTorch(worker=m.Worker(replicas=1)), {"shared_memory": False}),
    ("pytorch-resources", lambda m: m.PyTorch(worker=m.Worker(replicas=1)), {"requests": Resources(mem="8Gi")}),
    ("elastic-one-node", lambda m: m.Elastic(nproc_per_node=2), {}),
    ("elastic-two-nodes", lambda m: m.Elastic(nnodes=2), {}),
    ("elastic-opt-out", lambda m: m.Elastic(nnodes="1:3", increase_shared_mem=False), {}),
    ("elastic-task-shared-memory", lambda m: m.Elastic(nnodes=2), {"shared_memory": "1Gi"}),
    ("pytorch-empty-pod-template", lambda m: m.PyTorch(worker=m.Worker(replicas=1)), {"pod_template": PodTemplate}),
    ("elastic-user-pod-template", lambda m: m.Elastic(nnodes=2), {"pod_template": _user_pod_template}),
    (
        "elastic-user-pod-template-opt-out",
        lambda m: m.Elastic(increase_shared_mem=False),
        {"pod_template": _user_pod_template},
    ),
]


@pytest.mark.parametrize(
    ("official", "builder", "kwargs"),
    [
        *(pytest.param(official_pytorch, b, kw, id=f"shm-{i}") for i, b, kw in SHARED_MEMORY),
        *(pytest.param(case.values[0], case.values[1], {}, id=case.id) for case in CASES),
    ],
)
def test_the_pod_side_is_the_officials(
    register: Register, official: ModuleType, builder: Builder, kwargs: dict[str, Any]
) -> None:
    """Same pod template (the /dev/shm volume included), primary container and extended resources."""

    def registered(module: ModuleType) -> Any:
        make_template = kwargs.get("pod_template")
        given = {**kwargs, "pod_template": make_template()} if make_template else kwargs
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # as in _register
            return register(task(task_config=builder(module), **given)(train))

    assert _pod_side(registered(ours)) == _pod_side(registered(official))
