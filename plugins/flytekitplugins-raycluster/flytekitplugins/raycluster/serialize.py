"""RayJobConfig -> ``flyteidl.plugins.RayJob`` -> the task's custom (``MessageToDict``). Pure.

What a stock Flyte backend reads, as flytekitplugins-ray writes it: per-group resources in the group's
``k8sPod.podSpec`` (container ``ray-head``/``ray-worker``), explicit min/max replicas, the runtime env both
as ``runtimeEnvYaml`` and base64 JSON ``runtimeEnv`` (KubeRay < 1.1), shutdown and TTL.

>>> from flytekitplugins.raycluster import RayJobConfig, WorkerNodeConfig
>>> ray_job_custom(RayJobConfig([WorkerNodeConfig("workers", replicas=1)]))
{'rayCluster': {'workerGroupSpec': [{'groupName': 'workers', 'replicas': 1, 'minReplicas': 1, 'maxReplicas': 1}]}}
"""

from __future__ import annotations

import base64
import copy
import json
from typing import Any, Optional, Union, cast

from flyteidl.core import literals_pb2, tasks_pb2
from flyteidl.plugins import ray_pb2
from flytekitplugins.kubejobs.resources import resources_to_k8s
from flytekitplugins.kubejobs.wire.extension import (
    EXTENSION_KEY,
    EXTENSION_VERSION,
    Extension,
    RayGroupExtension,
    RayGroupsExtension,
    ResourceMaps,
)
from google.protobuf import json_format

from .task_configs import AutoscalerOptionsConfig, HeadNodeConfig, RayJobConfig, WorkerNodeConfig

__all__ = ["k8s_pod_to_idl", "ray_job_proto", "ray_job_custom", "ray_groups_extension", "ray_job_extension"]


def k8s_pod_to_idl(pod: dict[str, Any]) -> tasks_pb2.K8sPod:
    """A ``k8sPod`` dict (``metadata``, ``podSpec``, ``primaryContainerName``) as the flyteidl message."""
    msg: tasks_pb2.K8sPod = json_format.ParseDict(pod, tasks_pb2.K8sPod())
    msg.metadata.SetInParent()  # flytekit always sends metadata, even empty
    return msg


def _autoscaler_options(options: AutoscalerOptionsConfig) -> ray_pb2.AutoscalerOptions:
    # kubejobs.idl loads every kubeflow proto (about 5 ms): only when autoscaler options are used.
    from flytekitplugins.kubejobs.idl import resources_to_idl

    msg = ray_pb2.AutoscalerOptions()
    if options.upscaling_mode is not None:
        msg.upscaling_mode = cast(ray_pb2.AutoscalerOptions.UpscalingMode, int(options.upscaling_mode))
    if options.idle_timeout_seconds is not None:
        msg.idle_timeout_seconds = options.idle_timeout_seconds
    for key, value in (options.env or {}).items():
        msg.env.append(literals_pb2.KeyValuePair(key=key, value=value))
    if options.image:
        msg.image = options.image
    resources = resources_to_idl(resources_to_k8s(options.requests), resources_to_k8s(options.limits))
    if resources is not None:
        msg.resources.CopyFrom(resources)
    msg.resources.SetInParent()  # flytekit always sends resources, even empty
    return msg


def _runtime_env_fields(runtime_env: Optional[dict[str, Any]]) -> dict[str, str]:
    if not runtime_env:
        return {}
    import yaml

    return {
        # Deprecated field, read by backends for KubeRay < 1.1; same JSON as flytekitplugins-ray.
        "runtime_env": base64.b64encode(json.dumps(runtime_env).encode()).decode(),
        "runtime_env_yaml": yaml.safe_dump(runtime_env),
    }


def ray_job_proto(cfg: RayJobConfig) -> ray_pb2.RayJob:
    job = ray_pb2.RayJob()
    for field, value in _runtime_env_fields(cfg.runtime_env).items():
        setattr(job, field, value)
    cluster = job.ray_cluster
    cluster.SetInParent()  # Flyte's backend dereferences ray_cluster unconditionally
    head = cfg.head_node_config
    if head is not None:
        cluster.head_group_spec.SetInParent()
        cluster.head_group_spec.ray_start_params.update(head.ray_start_params or {})
        if head.k8s_pod is not None:
            cluster.head_group_spec.k8s_pod.CopyFrom(k8s_pod_to_idl(head.k8s_pod))
    for group in cfg.worker_node_config:
        spec = cluster.worker_group_spec.add(
            group_name=group.group_name,
            replicas=group.replicas,
            min_replicas=group.effective_min_replicas,
            max_replicas=group.effective_max_replicas,
        )
        spec.ray_start_params.update(group.ray_start_params or {})
        if group.k8s_pod is not None:
            spec.k8s_pod.CopyFrom(k8s_pod_to_idl(group.k8s_pod))
    cluster.enable_autoscaling = cfg.enable_autoscaling
    if cfg.autoscaler_options is not None:
        cluster.autoscaler_options.CopyFrom(_autoscaler_options(cfg.autoscaler_options))
    job.shutdown_after_job_finishes = cfg.shutdown_after_job_finishes
    ttl = cfg.effective_ttl_seconds_after_finished
    if ttl is not None:
        job.ttl_seconds_after_finished = ttl
    return job


def _group_extension(group: Union[HeadNodeConfig, WorkerNodeConfig]) -> Optional[RayGroupExtension]:
    """A worker group's idle timeout, and what the backend needs to apply a group's named compute template: the
    name, and the group's own
    requests/limits (its k8sPod merges them with the pod template's, so the backend could not tell which
    win over the template). The GPU count is written as ``gpu``: it means the template's accelerator."""
    out: RayGroupExtension = {}
    if isinstance(group, WorkerNodeConfig) and group.idle_timeout_seconds is not None:
        out["idleTimeoutSeconds"] = group.idle_timeout_seconds
    if not isinstance(group.compute_template, str):
        return out or None
    out["computeTemplate"] = group.compute_template
    requests, limits = group.requests or group.limits, group.limits or group.requests  # as group_k8s_pod does
    explicit: ResourceMaps = {}
    for side, resources in (("requests", requests), ("limits", limits)):
        amounts = resources_to_k8s(resources, "gpu")
        if amounts:
            explicit[side] = amounts  # type: ignore[literal-required]  # side is "requests" or "limits"
    if explicit:
        out["explicitResources"] = explicit
    return out


def ray_groups_extension(cfg: RayJobConfig) -> Optional[RayGroupsExtension]:
    """The ``rayGroups`` section of the extension key: the groups that name a compute template or have their own
    idle timeout; None if none."""
    out: RayGroupsExtension = {}
    head = _group_extension(cfg.head_node_config) if cfg.head_node_config is not None else None
    if head:
        out["head"] = head
    workers = {g.group_name: ext for g in cfg.worker_node_config if (ext := _group_extension(g))}
    if workers:
        out["workers"] = workers
    return out or None


def ray_job_extension(cfg: RayJobConfig) -> Optional[Extension]:
    """The ``kubejobs`` extension key's value: the ``rayJob`` section (the settings flyteidl's RayJob lacks) and
    the ``rayGroups`` section (the groups naming a compute template stored in the cluster), or None when there
    are neither (the custom is then exactly flytekitplugins-ray's)."""
    sections: Extension = {}
    if cfg.ray_job_extension:
        sections["rayJob"] = copy.deepcopy(cfg.ray_job_extension)
    groups = ray_groups_extension(cfg)
    if groups is not None:
        sections["rayGroups"] = groups
    return {"version": EXTENSION_VERSION, **sections} if sections else None


def ray_job_custom(cfg: RayJobConfig) -> dict[str, Any]:
    """The task's ``custom``: ``MessageToDict`` of :func:`ray_job_proto`, plus the extension key when
    :func:`ray_job_extension` has one.

    >>> from flytekitplugins.raycluster import RayJobConfig, WorkerNodeConfig
    >>> custom = ray_job_custom(RayJobConfig([WorkerNodeConfig("w", 1)], submission_mode="HTTPMode", backoff_limit=1))
    >>> custom["kubejobs"]
    {'version': 1, 'rayJob': {'submissionMode': 'HTTPMode', 'backoffLimit': 1}}
    """
    custom: dict[str, Any] = json_format.MessageToDict(ray_job_proto(cfg))
    extension = ray_job_extension(cfg)
    if extension is not None:
        custom[EXTENSION_KEY] = extension
    return custom
