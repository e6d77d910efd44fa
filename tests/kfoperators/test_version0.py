"""The SDK can emit either encoding: version 1 from the serializers, version 0 through ``kubejobs.kubeflow_v0``.

The expected version 0 customs are the older ``flyteidl.plugins`` messages written out by hand (what the
official plugins sent before task_type_version 1: ``workers``, ``psReplicas``, ``numWorkers``, ...), and each
version 0 custom is read back by this project's backend (its version 0 reader, as Flyte's Go plugins have
one): the job it builds has the replica counts, slots and elastic policy of the version 1 job.
"""

from __future__ import annotations

import copy
from typing import Any, Union

import pytest
from flyteidl.admin.agent_pb2 import TaskExecutionMetadata
from flyteidl.core.tasks_pb2 import Container, TaskTemplate
from flytekit import Resources
from flytekitplugins.kfoperators import (
    PS,
    Chief,
    Elastic,
    Evaluator,
    Launcher,
    MPIJob,
    PyTorch,
    RestartPolicy,
    TfJob,
    Worker,
)
from flytekitplugins.kfoperators.serialize import elastic_custom, mpi_custom, pytorch_custom, tensorflow_custom
from flytekitplugins.kubejobs.backend import build_object
from flytekitplugins.kubejobs.kubeflow_v0 import VERSION_0_TASK_TYPES, version_0_custom
from flytekitplugins.kubejobs.wire.kinds import KINDS
from google.protobuf.struct_pb2 import Struct

Config = Union[PyTorch, Elastic, TfJob, MPIJob]

CASES: list[tuple[str, Config, dict[str, Any]]] = [
    ("pytorch", PyTorch(worker=Worker(replicas=3)), {"workers": 3}),
    (
        "pytorch",
        Elastic(nnodes="1:3", nproc_per_node=2, max_restarts=4),
        {
            "workers": 3,
            "elasticConfig": {
                "rdzvBackend": "c10d",
                "minReplicas": 1,
                "maxReplicas": 3,
                "nprocPerNode": 2,
                "maxRestarts": 4,
            },
        },
    ),
    (
        "tensorflow",
        TfJob(chief=Chief(replicas=1), ps=PS(replicas=2), worker=Worker(replicas=4), evaluator=Evaluator(replicas=1)),
        {"workers": 4, "psReplicas": 2, "chiefReplicas": 1, "evaluatorReplicas": 1},
    ),
    ("tensorflow", TfJob(worker=Worker(replicas=2)), {"workers": 2}),
    (
        "mpi",
        MPIJob(worker=Worker(replicas=2), launcher=Launcher(), slots=3),
        {"numWorkers": 2, "numLauncherReplicas": 1, "slots": 3},
    ),
]


def _v1_custom(config: Config) -> dict[str, Any]:
    if isinstance(config, Elastic):
        custom = elastic_custom(config)
        assert custom is not None
        return custom
    if isinstance(config, PyTorch):
        return pytorch_custom(config)
    if isinstance(config, TfJob):
        return tensorflow_custom(config)
    return mpi_custom(config)


def _build(task_type: str, version: int, custom: dict[str, Any]) -> dict[str, Any]:
    struct = Struct()
    struct.update(custom)
    template = TaskTemplate(
        type=task_type,
        task_type_version=version,
        custom=struct,
        container=Container(image="registry.example/train:1", args=["pyflyte-execute"]),
    )
    meta = TaskExecutionMetadata(namespace="proj-dev")
    meta.task_execution_id.node_execution_id.execution_id.name = "exec1"
    meta.task_execution_id.node_execution_id.node_id = "n0"
    return build_object(template, meta, validate=False)


def _shape(obj: dict[str, Any]) -> dict[str, Any]:
    """What the encodings must agree on: the replica counts, the MPI slots, the elastic policy."""
    spec = obj["spec"]
    key = KINDS[next(t for t, k in KINDS.items() if k.kind == obj["kind"])].replica_specs_key
    return {
        "kind": obj["kind"],
        "replicas": {role: s["replicas"] for role, s in spec[key].items()},
        "slots": spec.get("slotsPerWorker"),
        "elastic": spec.get("elasticPolicy"),
    }


@pytest.mark.parametrize(("task_type", "config", "expected"), CASES)
def test_the_version_0_custom_is_the_older_message(task_type: str, config: Config, expected: dict[str, Any]) -> None:
    v1 = _v1_custom(config)
    before = copy.deepcopy(v1)
    v0 = version_0_custom(task_type, v1)
    assert v0.custom == expected
    assert v1 == before  # the version 1 custom is not changed


@pytest.mark.parametrize(("task_type", "config", "expected"), CASES)
def test_the_backend_reads_the_version_0_custom_as_the_same_job(
    task_type: str, config: Config, expected: dict[str, Any]
) -> None:
    v1 = _v1_custom(config)
    from_v0 = _build(task_type, 0, version_0_custom(task_type, v1).custom)
    assert _shape(from_v0) == _shape(_build(task_type, 1, v1))


def test_what_version_0_cannot_carry_is_reported_not_lost_silently() -> None:
    config = PyTorch(
        worker=Worker(replicas=2, image="train:2", requests=Resources(cpu="2"), restart_policy=RestartPolicy.ALWAYS)
    )
    v0 = version_0_custom("pytorch", pytorch_custom(config))
    assert v0.custom == {"workers": 2}
    assert v0.dropped == [
        "masterReplicas",
        "workerReplicas.image",
        "workerReplicas.resources",
        "workerReplicas.restartPolicy",
    ]


def test_every_kind_with_a_version_0_has_an_encoder_and_ray_has_none() -> None:
    assert set(VERSION_0_TASK_TYPES) == {"pytorch", "tensorflow", "mpi"}
    for task_type in VERSION_0_TASK_TYPES:
        assert version_0_custom(task_type, {}).dropped == []
    with pytest.raises(ValueError, match="this is a 'ray' task"):
        version_0_custom("ray", {"rayCluster": {}})
