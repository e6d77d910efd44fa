"""Configs of flytekitplugins.kfoperators -> TrainJob: the mapping table, CRD validity at each supported
Trainer release, and the refusals of settings with no TrainJob meaning."""

from __future__ import annotations

import dataclasses
import warnings
from collections import OrderedDict
from typing import Any

import pytest
from flyteidl.admin.agent_pb2 import TaskExecutionMetadata
from flytekit import Resources, task
from flytekit.configuration import Image, ImageConfig, SerializationSettings
from flytekit.tools.translator import get_serializable
from flytekitplugins.kfoperators import (
    CleanPodPolicy,
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
from flytekitplugins.kubejobs.backend import BackendConfig, BuildError
from flytekitplugins.kubejobs.backend.trainjob import build_trainjob
from flytekitplugins.kubejobs.backend.trainjob_config import RuntimeRef, TrainJobConfig

SETTINGS = SerializationSettings(
    project="proj",
    domain="dev",
    version="v1",
    image_config=ImageConfig(default_image=Image(name="default", fqn="registry.example/img", tag="1")),
)
MPI_RUNTIME = RuntimeRef("mpi-distributed")


def _template(cfg: Any, **task_kw: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)

        @task(task_config=cfg, **task_kw)
        def train() -> None: ...

        return get_serializable(OrderedDict(), SETTINGS, train).template.to_flyte_idl()


def _meta() -> TaskExecutionMetadata:
    m = TaskExecutionMetadata(namespace="proj-dev")
    m.task_execution_id.node_execution_id.execution_id.name = "abc123"
    m.task_execution_id.node_execution_id.node_id = "n0"
    return m


def _build(trainer: Any, cfg: Any, **task_kw: Any) -> dict[str, Any]:
    version, crd_dir, validator = trainer
    tj = TrainJobConfig(version=version, mpi=MPI_RUNTIME)
    obj = build_trainjob(_template(cfg, **task_kw), _meta(), BackendConfig(crd_dir=crd_dir), tj)
    errors = [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(obj)]
    assert not errors, errors[:5]
    return obj


def _env(trainer_spec: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in trainer_spec.get("env", [])}


def _node_patch(obj: dict[str, Any], rjob: str = "node") -> dict[str, Any]:
    (patch,) = obj["spec"]["runtimePatches"]
    jobs = {j["name"]: j for j in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]}
    return dict(jobs[rjob]["template"]["spec"]["template"])


def test_pytorch_master_and_workers_are_nodes(trainer: Any) -> None:
    obj = _build(
        trainer,
        PyTorch(worker=Worker(replicas=3, requests=Resources(cpu="2", gpu="1"), node_selector={"pool": "gpu"})),
        limits=Resources(cpu="2", mem="4Gi"),
    )
    assert (obj["apiVersion"], obj["kind"]) == ("trainer.kubeflow.org/v1alpha1", "TrainJob")
    assert obj["spec"]["runtimeRef"] == {
        "name": "torch-distributed",
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
    }
    t = obj["spec"]["trainer"]
    assert (t["numNodes"], t["numProcPerNode"], t["image"]) == (4, 1, "registry.example/img:1")
    assert t["args"][0] == "pyflyte-execute"
    assert t["resourcesPerNode"]["requests"]["nvidia.com/gpu"] == "1"
    env = _env(t)
    # the v1 operator's rendezvous contract, with node 0 (JobSet hostname <name>-node-0-0.<name>) as master
    assert env["MASTER_ADDR"] == "abc123-n0-0-node-0-0.abc123-n0-0"
    assert (env["MASTER_PORT"], env["WORLD_SIZE"]) == ("29500", "4")
    assert env["RANK"] == {
        "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
    }
    assert env["FLYTE_INTERNAL_EXECUTION_ID"] == "abc123"
    assert _node_patch(obj)["spec"]["nodeSelector"] == {"pool": "gpu"}
    assert obj["spec"]["runtimePatches"][0]["manager"] == "kubejobs.flyte.org/backend"


@pytest.mark.parametrize(
    "cfg", [PyTorch(worker=Worker(replicas=1)), MPIJob(launcher=Launcher(replicas=1), worker=Worker(replicas=2))]
)
def test_the_trainer_is_spelled_as_go_writes_it_back_so_kueue_can_resume_it(trainer: Any, cfg: Any) -> None:
    """Kueue resumes an admitted TrainJob with a full update through Go's types; spec.trainer is immutable
    (``self == oldSelf`` on raw values), so quantities must be canonical and empty env values left out."""
    requests = Resources(cpu="1000m", mem="1024Mi")
    with_worker = dataclasses.replace(cfg, worker=dataclasses.replace(cfg.worker, requests=requests, limits=requests))
    obj = _build(trainer, with_worker, environment={"EMPTY": "", "SET": "x"})
    t = obj["spec"]["trainer"]
    assert t["resourcesPerNode"] == {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    env = {e["name"]: e for e in t["env"]}
    assert env["EMPTY"] == {"name": "EMPTY"} and env["SET"] == {"name": "SET", "value": "x"}


def test_elastic_nodes_and_rendezvous(trainer: Any) -> None:
    obj = _build(trainer, Elastic(nnodes="2:4", nproc_per_node=8))
    t = obj["spec"]["trainer"]
    assert (t["numNodes"], t["numProcPerNode"]) == (4, 8)  # max nodes start; the task's launcher waits for min
    env = _env(t)
    assert env["PET_RDZV_ENDPOINT"] == "abc123-n0-0-node-0-0.abc123-n0-0:29500"
    assert "WORLD_SIZE" not in env and "RANK" not in env


def test_elastic_runtime_is_configurable() -> None:
    tj = TrainJobConfig(elastic=RuntimeRef("torch-elastic", "TrainingRuntime"))
    obj = build_trainjob(_template(Elastic(nnodes=2)), _meta(), None, tj)
    assert (
        obj["spec"]["runtimeRef"]["name"] == "torch-elastic" and obj["spec"]["runtimeRef"]["kind"] == "TrainingRuntime"
    )


@pytest.mark.parametrize(
    "cfg", [MPIJob(worker=Worker(replicas=3), slots=4), HorovodJob(worker=Worker(replicas=3), slots=4)]
)
def test_mpi_and_horovod_workers_and_slots(trainer: Any, cfg: Any) -> None:
    obj = _build(trainer, cfg)
    t = obj["spec"]["trainer"]
    assert obj["spec"]["runtimeRef"]["name"] == "mpi-distributed"
    assert (t["numNodes"], t["numProcPerNode"]) == (3, 4)
    assert t["args"][0] in ("mpirun", "horovodrun")


def test_run_policy_deadline_and_suspend(trainer: Any) -> None:
    obj = _build(
        trainer, PyTorch(worker=Worker(replicas=1), run_policy=RunPolicy(active_deadline_seconds=600, suspend=True))
    )
    assert obj["spec"]["activeDeadlineSeconds"] == 600 and obj["spec"]["suspend"] is True


def test_metadata_labels_reach_the_object_and_the_pods(trainer: Any) -> None:
    obj = _build(trainer, PyTorch(worker=Worker(replicas=1)))
    assert obj["metadata"]["namespace"] == "proj-dev"
    assert obj["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "false"
    assert _node_patch(obj)["metadata"]["annotations"]["cluster-autoscaler.kubernetes.io/safe-to-evict"] == "false"


@pytest.mark.parametrize(
    "cfg, words",
    [
        (
            PyTorch(worker=Worker(replicas=1), run_policy=RunPolicy(clean_pod_policy=CleanPodPolicy.ALL)),
            "cleanPodPolicy",
        ),
        (PyTorch(worker=Worker(replicas=1), run_policy=RunPolicy(backoff_limit=3)), "backoffLimit"),
        (
            PyTorch(worker=Worker(replicas=1), run_policy=RunPolicy(ttl_seconds_after_finished=60)),
            "ttlSecondsAfterFinished",
        ),
        (
            PyTorch(
                worker=Worker(replicas=1), run_policy=RunPolicy(scheduling_policy=SchedulingPolicy(min_available=2))
            ),
            "schedulingPolicy",
        ),
        (PyTorch(worker=Worker(replicas=1, restart_policy=RestartPolicy.ALWAYS)), "restart_policy"),
        (PyTorch(master=Master(image="other:1"), worker=Worker(replicas=1)), "Master.image"),
        (PyTorch(master=Master(node_selector={"a": "b"}), worker=Worker(replicas=1)), "replicaSpecs.Master"),
        (MPIJob(worker=Worker(replicas=2, image="other:1")), "Worker.image"),
        (MPIJob(worker=Worker(replicas=2, env={"A": "1"})), "Worker.env"),
        (MPIJob(worker=Worker(replicas=2), launcher=Launcher(requests=Resources(cpu="9"))), "Launcher resources"),
        (TfJob(worker=Worker(replicas=2)), "TensorFlow runtime"),
    ],
)
def test_settings_without_trainjob_meaning_are_refused(cfg: Any, words: str) -> None:
    with pytest.raises(BuildError, match=words):
        build_trainjob(_template(cfg), _meta(), None, TrainJobConfig(mpi=MPI_RUNTIME))


def test_reserved_env_is_refused() -> None:
    with pytest.raises(BuildError, match="PET_NNODES"):
        build_trainjob(_template(PyTorch(worker=Worker(replicas=1, env={"PET_NNODES": "9"}))), _meta())
    with pytest.raises(BuildError, match="WORLD_SIZE"):
        build_trainjob(_template(PyTorch(worker=Worker(replicas=1, env={"WORLD_SIZE": "9"}))), _meta())


def test_mpi_without_a_configured_runtime_is_refused() -> None:
    with pytest.raises(BuildError, match=r"runtimes\.mpi is not set"):
        build_trainjob(_template(MPIJob(worker=Worker(replicas=2))), _meta())


@pytest.mark.parametrize("version", ["v2.0.1", "v2.1.0"])
def test_pre_runtime_patches_releases_are_refused(version: str) -> None:
    with pytest.raises(ValueError, match="podTemplateOverrides"):
        TrainJobConfig(version=version)
    with pytest.raises(ValueError, match="checked against"):
        TrainJobConfig(version="v2.4.0")


def test_config_from_section() -> None:
    cfg = BackendConfig.from_yaml(
        "plugins:\n  trainjob:\n    task-types: [pytorch]\n    runtimes:\n      mpi: {name: m, kind: TrainingRuntime}\n"
    )
    assert cfg.trainjob.task_types == frozenset({"pytorch"}) and cfg.trainjob.mpi == RuntimeRef("m", "TrainingRuntime")
    with pytest.raises(ValueError, match="tensorflow"):
        TrainJobConfig.from_section({"task-types": ["tensorflow"]})


def test_cel_rules_checked_offline() -> None:
    """The TrainJob CRD's offline CEL rules: name RFC 1035 and <= 63; JobSet's pod-name length (webhook)."""
    from flytekitplugins.kubejobs.backend.trainjob import check_trainjob

    base = build_trainjob(_template(PyTorch(worker=Worker(replicas=1))), _meta(), validate=False)
    assert check_trainjob(base, TrainJobConfig()) == []
    bad = {**base, "metadata": {**base["metadata"], "name": "Bad_Name"}}
    assert any("RFC 1035" in p for p in check_trainjob(bad, TrainJobConfig()))
    long = {**base, "metadata": {**base["metadata"], "name": "a" * 50}}
    assert any("pod names" in p for p in check_trainjob(long, TrainJobConfig()))
