"""What our tasks register as: wire format, the replica fields every backend reads, the extension key,
and the official plugins' known serialization bugs, fixed."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import flytekitplugins.kfmpi as official_mpi
import flytekitplugins.kftensorflow as official_tf
import pytest
from flytekit import Resources, task
from flytekit.configuration import SerializationSettings
from flytekitplugins.kfoperators import (
    PS,
    ComputeTemplate,
    Elastic,
    HorovodJob,
    Launcher,
    Master,
    MPIJob,
    PyTorch,
    RestartPolicy,
    RunPolicy,
    SchedulingPolicy,
    TfJob,
    Worker,
)
from google.protobuf.json_format import MessageToDict

from .backend_view import backend_view
from .task_functions import train

Register = Callable[[Any], Any]
REPLICA_FIELDS = ("replicas", "image", "resources", "restartPolicy")


def _custom(register: Register, config: Any) -> dict[str, Any]:
    custom: dict[str, Any] = MessageToDict(register(task(task_config=config)(train)).custom)
    return custom


@pytest.mark.parametrize(
    ("config", "task_type"),
    [
        (PyTorch(worker=Worker(replicas=1)), "pytorch"),
        (Elastic(nnodes=2), "pytorch"),
        (Elastic(), "python-task"),
        (TfJob(worker=Worker(replicas=1)), "tensorflow"),
        (MPIJob(worker=Worker(replicas=1)), "mpi"),
        (HorovodJob(worker=Worker(replicas=1)), "mpi"),
    ],
)
def test_task_type_and_version(register: Register, config: Any, task_type: str) -> None:
    template = register(task(task_config=config)(train))
    assert (template.type, template.task_type_version) == (task_type, 1)


def test_replica_specs_use_the_fields_every_backend_reads_and_not_common(register: Register) -> None:
    gpu_pool = ComputeTemplate(name="a100", cpu=8, memory="64Gi", gpu=1)
    config = PyTorch(
        master=Master(image="reg/m", requests=Resources(cpu="1"), restart_policy=RestartPolicy.ALWAYS),
        worker=Worker(replicas=3, compute_template=gpu_pool, limits=Resources(mem="80Gi"), restart_policy="on_failure"),
    )
    custom = _custom(register, config)
    for key in ("masterReplicas", "workerReplicas"):
        # a backend from after flyte#5355 ignores the per-kind fields when `common` is present
        assert "common" not in custom[key]
    worker = backend_view("pytorch", custom)["Worker"]
    assert worker["replicas"] == 3 and worker["restartPolicy"] == "RESTART_POLICY_ON_FAILURE"
    assert {k: str(v) for k, v in worker["limits"].items()} == {
        "cpu": "8",
        "memory": "85899345920",
        "nvidia.com/gpu": "1",
    }


def test_custom_keeps_the_official_shape(register: Register) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = official_tf.TfJob(
            chief=official_tf.Chief(replicas=0), ps=official_tf.PS(replicas=1), worker=official_tf.Worker(replicas=2)
        )
        their_custom = MessageToDict(register(task(task_config=theirs)(train)).custom)
    mine = _custom(register, TfJob(ps=PS(replicas=1), worker=Worker(replicas=2)))
    # roles with no replicas and nothing else set are left out; a backend reads a missing role as 0 replicas
    assert set(mine) <= set(their_custom)
    assert all(not their_custom[key].get("replicas") for key in set(their_custom) - set(mine))
    for key, spec in mine.items():
        # we leave out the empty `resources: {}` (older backends let it clobber pod-template resources)
        assert set(spec) == set(their_custom[key]) - {"resources"}


def test_tf_run_policy_without_clean_pod_policy_serializes(register: Register) -> None:
    custom = _custom(register, TfJob(worker=Worker(replicas=1), run_policy=RunPolicy(backoff_limit=1)))
    assert backend_view("tensorflow", custom)["runPolicy"] == {
        "cleanPodPolicy": "CLEANPOD_POLICY_NONE",
        "backoffLimit": 1,
    }
    with warnings.catch_warnings():  # the official plugin's bug, for the record
        warnings.simplefilter("ignore")
        theirs = official_tf.TfJob(
            chief=official_tf.Chief(replicas=0),
            ps=official_tf.PS(replicas=0),
            worker=official_tf.Worker(replicas=1),
            run_policy=official_tf.RunPolicy(backoff_limit=1),
        )
        with pytest.raises(AttributeError):
            register(task(task_config=theirs)(train))


def test_horovod_with_deprecated_counts_builds_its_command(register: Register) -> None:
    with pytest.deprecated_call():
        config = HorovodJob(num_workers=2, num_launcher_replicas=1, slots=2)
    args = list(register(task(task_config=config)(train)).container.args)
    assert args[:3] == ["horovodrun", "-np", "4"]
    assert args[args.index("--min-np") + 1] == args[args.index("--max-np") + 1] == "4"
    with warnings.catch_warnings():  # the official plugin's bug, for the record
        warnings.simplefilter("ignore")
        theirs = official_mpi.HorovodJob(num_workers=2, num_launcher_replicas=1, slots=2)
        with pytest.raises(TypeError):
            register(task(task_config=theirs)(train))


def test_mpi_command_str_is_split_like_a_shell(register: Register) -> None:
    config = MPIJob(
        worker=Worker(replicas=2, command="python train.py --tag 'a b'"), launcher=Launcher(command="sleep 1")
    )
    custom = _custom(register, config)
    assert custom["workerReplicas"]["command"] == ["python", "train.py", "--tag", "a b"]
    assert custom["launcherReplicas"]["command"] == ["sleep", "1"]


def test_mpirun_uses_workers_times_slots(register: Register) -> None:
    args = list(register(task(task_config=MPIJob(worker=Worker(replicas=3), slots=4))(train)).container.args)
    assert args[: args.index("-np") + 2][-2:] == ["-np", "12"]
    assert "pyflyte-execute" in args


@pytest.mark.parametrize("nnodes", [1, "1", "1:1"])
def test_a_single_node_elastic_is_a_python_task(register: Register, nnodes: Any) -> None:
    template = register(task(task_config=Elastic(nnodes=nnodes, nproc_per_node=2))(train))
    assert template.type == "python-task" and not MessageToDict(template.custom)


def test_extension_carries_what_the_idl_cannot(register: Register, fresh_extension_warnings: None) -> None:
    spot = [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]
    config = TfJob(
        ps=PS(replicas=1, node_selector={"pool": "on-demand"}),
        worker=Worker(replicas=2, tolerations=spot, env={"A": "1"}, volumes=[{"name": "d", "emptyDir": {}}]),
        run_policy=RunPolicy(
            backoff_limit=0, suspend=True, scheduling_policy=SchedulingPolicy(min_available=3, queue="q")
        ),
    )
    with pytest.warns(UserWarning, match="stock Flyte backends ignore"):
        custom = _custom(register, config)
    assert custom["kubejobs"] == {
        "version": 1,
        "replicaSpecs": {
            "PS": {"nodeSelector": {"pool": "on-demand"}},
            "Worker": {
                "tolerations": spot,
                "env": [{"name": "A", "value": "1"}],
                "volumes": [{"name": "d", "emptyDir": {}}],
            },
        },
        "runPolicy": {"suspend": True, "backoffLimit": 0, "schedulingPolicy": {"minAvailable": 3, "queue": "q"}},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _custom(register, config)["kubejobs"] == custom["kubejobs"]  # once per job kind: no second warning


def test_extension_roles_use_operator_names(register: Register, fresh_extension_warnings: None) -> None:
    config = MPIJob(
        launcher=Launcher(node_selector={"a": "b"}), worker=Worker(replicas=1, affinity={"nodeAffinity": {}})
    )
    with pytest.warns(UserWarning, match="kubejobs"):
        custom = _custom(register, config)
    assert set(custom["kubejobs"]["replicaSpecs"]) == {"Launcher", "Worker"}
    with pytest.warns(UserWarning, match="runPolicy.suspend"):
        elastic = _custom(register, Elastic(nnodes=2, run_policy=RunPolicy(suspend=True)))
    assert elastic["kubejobs"]["runPolicy"] == {"suspend": True}


def test_no_extension_and_no_warning_for_plain_configs(register: Register, fresh_extension_warnings: None) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        custom = _custom(register, PyTorch(worker=Worker(replicas=2), run_policy=RunPolicy(backoff_limit=2)))
    assert "kubejobs" not in custom


def test_each_get_custom_caller_gets_its_own_copy(settings: SerializationSettings) -> None:
    trainer = task(task_config=PyTorch(worker=Worker(replicas=2, requests=Resources(cpu="1"))))(train)
    first = trainer.get_custom(settings)
    assert first is not None
    first["workerReplicas"]["replicas"] = 99  # a caller editing its result must not change later ones
    first["workerReplicas"]["resources"]["requests"].clear()
    second = trainer.get_custom(settings)
    assert second is not None and second is not first
    assert second["workerReplicas"]["replicas"] == 2
    assert second["workerReplicas"]["resources"]["requests"] == [{"name": "CPU", "value": "1"}]
    assert trainer.get_custom(settings) == second
    single_node = task(task_config=Elastic(nproc_per_node=2))(train)
    assert single_node.get_custom(settings) is None and single_node.get_custom(settings) is None


def test_resolved_resources_handed_out_are_copies() -> None:
    worker = Worker(replicas=1, requests=Resources(cpu="1"))
    worker.requirements().requests["cpu"] = "64"
    assert worker.requirements().requests == {"cpu": "1"}
