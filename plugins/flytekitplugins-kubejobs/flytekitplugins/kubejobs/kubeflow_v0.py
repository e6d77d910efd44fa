"""The ``task_type_version`` 0 encoding of the Kubeflow customs (serialization layer).

The SDK writes version 1 (the ``flyteidl.plugins.kubeflow`` messages, ``flytekitplugins.kfoperators.serialize``);
``version_0_custom`` re-encodes such a custom as the older ``flyteidl.plugins`` message that clients from before
version 1 send (the official plugins' older encoding, which every backend still reads): replica counts, the
MPI slots and, for PyTorch, the elastic config. Everything else is reported, not silently lost: version 0 carries no
per-role image, resources or restart policy, no run policy and no extension key.

>>> v0 = version_0_custom("pytorch", {"workerReplicas": {"replicas": 2, "image": "train:1"}})
>>> v0.custom, v0.dropped
({'workers': 2}, ['workerReplicas.image'])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from flyteidl.plugins import mpi_pb2, pytorch_pb2, tensorflow_pb2
from flyteidl.plugins.kubeflow import mpi_pb2 as kf_mpi
from flyteidl.plugins.kubeflow import pytorch_pb2 as kf_pytorch
from flyteidl.plugins.kubeflow import tensorflow_pb2 as kf_tensorflow
from google.protobuf import json_format
from google.protobuf.message import Message

from .wire.kinds import KINDS

__all__ = ["VERSION_0_TASK_TYPES", "Version0", "version_0_custom"]

#: The task types with a version 0 encoding (the kinds table lists 0 among their versions).
VERSION_0_TASK_TYPES = tuple(k.task_type for k in KINDS.values() if 0 in k.task_type_versions and k.roles)


class Version0(NamedTuple):
    """A version 0 custom, and the parts of the version 1 custom it cannot carry (``"workerReplicas.image"``)."""

    custom: dict[str, Any]
    dropped: list[str]


def _count(spec: Any) -> int:
    # A version 1 replica spec may carry its count in ``common`` (flyte#5355) or in its own field.
    return int(spec.common.replicas or spec.replicas)


def _pytorch(custom: Mapping[str, Any]) -> tuple[Message, set[str]]:
    v1 = json_format.ParseDict(custom, kf_pytorch.DistributedPyTorchTrainingTask(), ignore_unknown_fields=True)
    old = pytorch_pb2.DistributedPyTorchTrainingTask(workers=_count(v1.worker_replicas))
    if v1.HasField("elastic_config"):
        for field in pytorch_pb2.ElasticConfig.DESCRIPTOR.fields:  # same names in both messages
            setattr(old.elastic_config, field.name, getattr(v1.elastic_config, field.name))
    return old, {"workerReplicas", "elasticConfig"}


def _tensorflow(custom: Mapping[str, Any]) -> tuple[Message, set[str]]:
    v1 = json_format.ParseDict(custom, kf_tensorflow.DistributedTensorflowTrainingTask(), ignore_unknown_fields=True)
    old = tensorflow_pb2.DistributedTensorflowTrainingTask(
        workers=_count(v1.worker_replicas),
        ps_replicas=_count(v1.ps_replicas),
        chief_replicas=_count(v1.chief_replicas),
        evaluator_replicas=_count(v1.evaluator_replicas),
    )
    return old, {"workerReplicas", "psReplicas", "chiefReplicas", "evaluatorReplicas"}


def _mpi(custom: Mapping[str, Any]) -> tuple[Message, set[str]]:
    v1 = json_format.ParseDict(custom, kf_mpi.DistributedMPITrainingTask(), ignore_unknown_fields=True)
    old = mpi_pb2.DistributedMPITrainingTask(
        num_workers=_count(v1.worker_replicas), num_launcher_replicas=_count(v1.launcher_replicas), slots=v1.slots
    )
    return old, {"workerReplicas", "launcherReplicas", "slots"}


_ENCODERS: dict[str, Callable[[Mapping[str, Any]], tuple[Message, set[str]]]] = {
    "pytorch": _pytorch,
    "tensorflow": _tensorflow,
    "mpi": _mpi,
}


def version_0_custom(task_type: str, custom: Mapping[str, Any]) -> Version0:
    """Re-encode the version 1 ``custom`` of a ``task_type`` task as version 0 (``custom`` is not changed).

    A task type without a version 0 encoding (``ray``) is a ``ValueError`` naming it.
    """
    encoder = _ENCODERS.get(task_type)
    if encoder is None:
        raise ValueError(
            f"task_type_version 0 exists for {', '.join(VERSION_0_TASK_TYPES)} tasks; this is a {task_type!r} task"
        )
    old, kept = encoder(custom)
    dropped = sorted(set(custom) - kept)
    # Per-role images, resources and restart policies (at the role, or in `common` where a custom has it)
    # are lost too.
    for role in sorted(k for k in kept & set(custom) if k.endswith("Replicas")):
        spec = custom[role] if isinstance(custom[role], Mapping) else {}
        common: Mapping[str, Any] = spec["common"] if isinstance(spec.get("common"), Mapping) else {}
        dropped += [f"{role}.{field}" for field in sorted((set(spec) | set(common)) - {"replicas", "common"})]
    return Version0(json_format.MessageToDict(old), dropped)
