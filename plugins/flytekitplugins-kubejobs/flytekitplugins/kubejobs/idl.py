"""Serialization of the shared types to flyteidl messages.

Replica specs are written to the per-kind fields (replicas, image, resources, restart_policy), which
every Flyte backend reads: the ones from before flyte#5355 read nothing else, later ones read them
whenever ``common`` is absent.
"""

from __future__ import annotations

from typing import Any, Optional, cast

from flyteidl.core import tasks_pb2
from flyteidl.plugins.kubeflow import common_pb2 as kubeflow_common_pb2

from .policies import RunPolicy
from .roles import ReplicaRole
from .wire.extension import DEFAULT_GPU_RESOURCE_NAME

__all__ = ["resources_to_idl", "fill_replica_spec", "run_policy_to_idl"]

_IDL_NAMES = {
    "cpu": tasks_pb2.Resources.CPU,
    "memory": tasks_pb2.Resources.MEMORY,
    "ephemeral-storage": tasks_pb2.Resources.EPHEMERAL_STORAGE,
}


def resources_to_idl(
    requests: dict[str, str], limits: dict[str, str], gpu_resource_name: str = DEFAULT_GPU_RESOURCE_NAME
) -> Optional[tasks_pb2.Resources]:
    """IDL ``Resources`` for the names it can carry (entries in flytekit's order); None when empty.

    ``gpu_resource_name`` is counted as the IDL's GPU; other extended resources are left out (they go
    under the extension key).
    """
    names = dict(_IDL_NAMES)
    names[gpu_resource_name] = tasks_pb2.Resources.GPU
    order = ["cpu", "memory", gpu_resource_name, "ephemeral-storage"]

    def entries(side: dict[str, str]) -> list[tasks_pb2.Resources.ResourceEntry]:
        return [tasks_pb2.Resources.ResourceEntry(name=names[k], value=side[k]) for k in order if k in side]

    msg = tasks_pb2.Resources(requests=entries(requests), limits=entries(limits))
    return msg if (msg.requests or msg.limits) else None


def fill_replica_spec(message: Any, role: ReplicaRole, replicas: Optional[int] = None) -> None:
    """Set replicas / image / resources / restart_policy on ``message`` (a per-kind replica spec or a
    ``CommonReplicaSpec``: the four fields have the same names in both)."""
    count = role.replicas if replicas is None else replicas
    if count:
        message.replicas = count
    image = role.image_name()
    if image:
        message.image = image
    template = role.template_object
    gpu_name = template.gpu_resource_name if template else DEFAULT_GPU_RESOURCE_NAME
    requirements = role.requirements()
    resources = resources_to_idl(requirements.requests, requirements.limits, gpu_name)
    if resources is not None:
        message.resources.CopyFrom(resources)
    if role.restart_policy is not None:
        message.restart_policy = role.restart_policy.value


def run_policy_to_idl(policy: RunPolicy) -> kubeflow_common_pb2.RunPolicy:
    msg = kubeflow_common_pb2.RunPolicy()
    if policy.clean_pod_policy is not None:
        msg.clean_pod_policy = cast(kubeflow_common_pb2.CleanPodPolicy, policy.clean_pod_policy.value)  # IDL number
    if policy.ttl_seconds_after_finished is not None:
        msg.ttl_seconds_after_finished = policy.ttl_seconds_after_finished
    if policy.active_deadline_seconds is not None:
        msg.active_deadline_seconds = policy.active_deadline_seconds
    if policy.backoff_limit is not None:
        msg.backoff_limit = policy.backoff_limit
    return msg
