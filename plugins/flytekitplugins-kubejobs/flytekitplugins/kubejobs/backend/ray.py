"""RayJob specs from ``flyteidl.plugins.RayJob`` customs (Flyte's Ray plugin, with its bugs fixed)."""

from __future__ import annotations

import base64
import binascii
import copy
import json
import shlex
from typing import Any, Optional

from flyteidl.plugins import ray_pb2

from ..wire.extension import DEFAULT_GPU_RESOURCE_NAME
from .builders import BuildContext, BuiltSpec, builds
from .computetemplates import apply_template_pod_settings, check_within_limits, lay_template, resolve_template
from .decode import custom_dict, decode_custom
from .errors import BuildError
from .extension import parse_extension
from .merge import merge_overlay_pod_spec
from .plugins_config import BackendConfig, RayConfig
from .pods import (
    BasePod,
    add_extended_resource_tolerations,
    build_pod,
    primary_container,
    service_account,
    struct_to_dict,
)
from .resources import idl_to_k8s

__all__ = ["build_ray_spec"]

_PORTS = (
    {"name": "redis", "containerPort": 6379},
    {"name": "head", "containerPort": 10001},
    {"name": "dashboard", "containerPort": 8265},
)
_UPSCALING = {1: "Default", 2: "Aggressive", 3: "Conservative"}
_RAY_LOG_DIR = "/tmp/ray"


def _field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def _resource_env(name: str, resource: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"resourceFieldRef": {"containerName": "ray-worker", "resource": resource}}}


def _head_params(task: dict[str, str], ray: RayConfig) -> dict[str, str]:
    params = dict(task) if task else dict(ray.head_start_parameters)
    params.setdefault("include-dashboard", "true" if ray.include_dashboard else "false")
    params.setdefault("node-ip-address", ray.head_ip_address)
    params.setdefault("dashboard-host", ray.dashboard_host)
    if not ray.enable_usage_stats:
        params.setdefault("disable-usage-stats", "true")
    return params


def _worker_params(task: dict[str, str], ray: RayConfig) -> dict[str, str]:
    params = dict(task) if task else dict(ray.worker_start_parameters)
    params.setdefault("node-ip-address", ray.worker_ip_address)
    if not ray.enable_usage_stats:
        params.setdefault("disable-usage-stats", "true")
    return params


def _apply_named_template(ctx: BuildContext, owner: str, spec: dict[str, Any], container: str, group: Any) -> None:
    """A group's named compute template (``kubejobs.rayGroups``) laid over its pod as an object's would have been
    in its k8sPod: over the container's resources (the pod template's, merged with the group's own), under the
    group's own requests/limits (``explicitResources``, whose ``gpu`` is the template's accelerator)."""
    template = resolve_template(ctx.config.compute_templates, owner, group["computeTemplate"])
    gpu = template.gpu_resource_name
    explicit: dict[str, dict[str, str]] = {
        side: {gpu if name == "gpu" else name: v for name, v in values.items()}
        for side, values in (group.get("explicitResources") or {}).items()
    }
    ray = next(c for c in spec["containers"] if c.get("name") == container)
    current = copy.deepcopy(ray.get("resources") or {})
    if not isinstance(current, dict) or not all(isinstance(current.get(k) or {}, dict) for k in ("requests", "limits")):
        raise BuildError(f"{owner}: the {container} container's resources must be an object of requests and limits")
    asked_gpu = any("gpu" in values for values in (group.get("explicitResources") or {}).values())
    if asked_gpu and gpu != DEFAULT_GPU_RESOURCE_NAME:
        # The k8sPod wrote the group's own GPU count under the default accelerator, as a stock backend reads it;
        # under this template it means the template's accelerator.
        for side in ("requests", "limits"):
            (current.get(side) or {}).pop(DEFAULT_GPU_RESOURCE_NAME, None)
    base = {side: dict(current.get(side) or {}) for side in ("requests", "limits")}
    laid = lay_template(owner, template, explicit, gpu)
    resources = dict(current)
    for side in ("requests", "limits"):
        merged = {**base[side], **laid[side]}
        if merged:
            resources[side] = merged
    check_within_limits(owner, template.name, resources)
    ray["resources"] = resources
    apply_template_pod_settings(spec, template)


def _group_template(
    ctx: BuildContext,
    base: BasePod,
    container: str,
    env: list[dict[str, Any]],
    k8s_pod: Any,
    head: bool,
    named: Optional[tuple[str, Any]] = None,
) -> dict[str, Any]:
    spec = copy.deepcopy(base.spec)
    primary = primary_container(spec, base.primary)
    primary["name"] = container
    primary.pop("args", None)  # the task's args become the job's entrypoint
    primary["env"] = [*(primary.get("env") or []), *env]
    primary["ports"] = [*(primary.get("ports") or []), *copy.deepcopy(list(_PORTS))]
    if not head:
        primary["lifecycle"] = {"preStop": {"exec": {"command": ["/bin/sh", "-c", "ray stop"]}}}
    sidecar = ctx.config.ray.logs_sidecar
    if head and sidecar:
        if not any(m.get("mountPath") == _RAY_LOG_DIR for m in primary.get("volumeMounts") or []):
            spec.setdefault("volumes", []).append({"name": "system-ray-state", "emptyDir": {}})
            primary.setdefault("volumeMounts", []).append({"name": "system-ray-state", "mountPath": _RAY_LOG_DIR})
        mount = next(m for m in primary["volumeMounts"] if m.get("mountPath") == _RAY_LOG_DIR)
        side = copy.deepcopy(sidecar)
        side["volumeMounts"] = [
            *(m for m in side.get("volumeMounts") or [] if m.get("mountPath") != _RAY_LOG_DIR),
            {"name": mount["name"], "mountPath": _RAY_LOG_DIR, "readOnly": True},
        ]
        spec["containers"].append(side)
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    if k8s_pod is not None:
        if k8s_pod.HasField("pod_spec"):
            merge_overlay_pod_spec(spec, struct_to_dict(k8s_pod.pod_spec, f"{container} k8sPod.podSpec"))
        labels, annotations = dict(k8s_pod.metadata.labels), dict(k8s_pod.metadata.annotations)
    if named is not None:
        _apply_named_template(ctx, named[0], spec, container, named[1])
    add_extended_resource_tolerations(spec, ctx.config.k8s)
    k8s, md = ctx.config.k8s, ctx.metadata
    return {
        "metadata": {
            "labels": {**k8s.default_labels, **base.labels, **md.labels, **labels},
            "annotations": {**k8s.default_annotations, **base.annotations, **md.annotations, **annotations},
        },
        "spec": spec,
    }


def _worker_env() -> list[dict[str, Any]]:
    return [
        {"name": "RAY_DISABLE_DOCKER_CPU_WARNING", "value": "1"},
        {"name": "TYPE", "value": "worker"},
        _resource_env("CPU_REQUEST", "requests.cpu"),
        _resource_env("CPU_LIMITS", "limits.cpu"),
        # deviation: Flyte points these two at cpu
        _resource_env("MEMORY_REQUESTS", "requests.memory"),
        _resource_env("MEMORY_LIMITS", "limits.memory"),
        _field_env("MY_POD_NAME", "metadata.name"),
        _field_env("MY_POD_IP", "status.podIP"),
        {"name": "RAY_COLOR_PREFIX", "value": "0"},
        {"name": "RAY_DATA_DISABLE_PROGRESS_BARS", "value": "1"},
    ]


def _autoscaler(options: Any, config: BackendConfig) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if options.idle_timeout_seconds > 0:
        out["idleTimeoutSeconds"] = options.idle_timeout_seconds
    elif options.idle_timeout_seconds < 0:
        raise BuildError(
            f"autoscalerOptions.idleTimeoutSeconds must not be negative, got {options.idle_timeout_seconds}"
        )
    if int(options.upscaling_mode) in _UPSCALING:
        out["upscalingMode"] = _UPSCALING[int(options.upscaling_mode)]
    if options.image:
        out["image"] = options.image
    # deviation: Flyte drops unparsable quantities silently; idl_to_k8s raises BuildError
    resources = idl_to_k8s("autoscalerOptions.resources", options.resources, config.k8s.gpu_resource_name)
    out["resources"] = {side: values for side, values in resources.items() if values}
    if options.env:
        out["env"] = [{"name": kv.key, "value": kv.value} for kv in options.env]
    return out


def _runtime_env_yaml(job: Any) -> str:
    if job.runtime_env_yaml:
        text: str = job.runtime_env_yaml
        return text
    if not job.runtime_env:
        return ""
    import yaml

    try:
        decoded = json.loads(base64.b64decode(job.runtime_env, validate=True))
    except (binascii.Error, ValueError) as e:
        raise BuildError(f"runtimeEnv is not base64-encoded JSON: {e}") from e
    if not isinstance(decoded, dict):
        raise BuildError(f"runtimeEnv must decode to a JSON object, got {decoded!r}")
    dumped: str = yaml.safe_dump(decoded, sort_keys=True)
    return dumped


def _shutdown_and_ttl(job: Any, ray: RayConfig) -> tuple[bool, int]:
    if job.ttl_seconds_after_finished < 0:
        raise BuildError(f"ttlSecondsAfterFinished must not be negative, got {job.ttl_seconds_after_finished}")
    if job.shutdown_after_job_finishes:
        return True, job.ttl_seconds_after_finished
    if job.ttl_seconds_after_finished > 0:
        # deviation: Flyte ignores a TTL given without shutdown; a TTL only means something with shutdown
        return True, job.ttl_seconds_after_finished
    return ray.shutdown_after_job_finishes, ray.ttl_seconds_after_finished


@builds("ray")
def build_ray_spec(ctx: BuildContext) -> BuiltSpec:
    """The RayJob ``spec`` and the labels and annotations the job object itself gets."""
    custom = custom_dict(ctx.template)
    parsed = parse_extension(custom, ctx.kind)  # sections a RayJob does not honour are refused here
    named = parsed.get("rayGroups", {"workers": {}})
    ext: dict[str, Any] = parsed.get("rayJob", {})  # queue: applied by build_object
    job = decode_custom(custom, ray_pb2.RayJob(), "ray custom")
    if not job.HasField("ray_cluster"):
        raise BuildError("invalid TaskSpecification: the ray custom has no rayCluster")  # Flyte panics here
    cluster, ray = job.ray_cluster, ctx.config.ray
    if "clusterSelector" in ext:
        _refuse_cluster_with_selector(job, ext)
        if "head" in named or named["workers"]:  # the selected cluster's groups are not this task's to shape
            raise BuildError("kubejobs.rayGroups (per-group settings) cannot be used with clusterSelector")
    base = build_pod(ctx.template, ctx.metadata, ctx.config, container_name=ctx.name, template_vars=ctx.template_vars)
    sa = service_account(ctx.template, ctx.metadata)
    if not sa or ray.service_account:
        sa = ray.service_account
    if sa:
        base.spec["serviceAccountName"] = sa
    else:
        base.spec.pop("serviceAccountName", None)
    head_msg = cluster.head_group_spec
    head_pod = head_msg.k8s_pod if cluster.HasField("head_group_spec") and head_msg.HasField("k8s_pod") else None
    head_env = [
        _field_env("MY_POD_IP", "status.podIP"),
        {"name": "RAY_COLOR_PREFIX", "value": "0"},
        {"name": "RAY_DATA_DISABLE_PROGRESS_BARS", "value": "1"},
    ]
    cluster_spec: dict[str, Any] = {
        "headGroupSpec": {
            "serviceType": ray.service_type,
            "enableIngress": ray.enable_ingress,
            "rayStartParams": _head_params(dict(head_msg.ray_start_params), ray),
            "template": _group_template(
                ctx,
                base,
                "ray-head",
                head_env,
                head_pod,
                head=True,
                named=("head group", named["head"]) if "computeTemplate" in named.get("head", {}) else None,
            ),
        },
        "enableInTreeAutoscaling": cluster.enable_autoscaling,
    }
    groups, seen = [], set()
    for i, group in enumerate(cluster.worker_group_spec):
        where = f"workerGroupSpec[{i}]"
        if not group.group_name:
            raise BuildError(f"{where}.groupName must not be empty")  # deviation: KubeRay needs unique names
        if group.group_name in seen:
            raise BuildError(f"{where}.groupName {group.group_name!r} is used by another worker group")
        seen.add(group.group_name)
        for attr in ("replicas", "min_replicas", "max_replicas"):
            if getattr(group, attr) < 0:
                raise BuildError(f"{where}.{attr} must not be negative, got {getattr(group, attr)}")
        pod = group.k8s_pod if group.HasField("k8s_pod") else None
        own = named["workers"].get(group.group_name, {})
        groups.append(
            {
                "groupName": group.group_name,
                "replicas": group.replicas,
                "minReplicas": min(group.min_replicas, group.replicas),
                "maxReplicas": max(group.max_replicas, group.replicas),
                "rayStartParams": _worker_params(dict(group.ray_start_params), ray),
                "template": _group_template(
                    ctx,
                    base,
                    "ray-worker",
                    _worker_env(),
                    pod,
                    head=False,
                    named=(f"worker group {group.group_name!r}", own) if "computeTemplate" in own else None,
                ),
            }
        )
        if "idleTimeoutSeconds" in own:
            if not cluster.enable_autoscaling:  # no autoscaler would read it
                raise BuildError(
                    f"kubejobs.rayGroups.workers.{group.group_name}.idleTimeoutSeconds needs enableAutoscaling "
                    "(autoscaler v2): without an autoscaler the setting would be dropped"
                )
            groups[-1]["idleTimeoutSeconds"] = own["idleTimeoutSeconds"]
    missing = sorted(set(named["workers"]) - seen)
    if missing:
        raise BuildError(f"kubejobs.rayGroups.workers names groups the ray custom does not have: {missing}")
    if groups:
        cluster_spec["workerGroupSpecs"] = groups
    if cluster.HasField("autoscaler_options"):
        cluster_spec["autoscalerOptions"] = _autoscaler(cluster.autoscaler_options, ctx.config)
    extra_options = ext.get("rayClusterSpec", {}).get("autoscalerOptions")
    if extra_options:
        if not cluster.enable_autoscaling:
            raise BuildError(
                f"kubejobs.rayJob.rayClusterSpec.autoscalerOptions {sorted(extra_options)} need enableAutoscaling: "
                "KubeRay runs no autoscaler without it, so the settings would be dropped"
            )
        cluster_spec.setdefault("autoscalerOptions", {}).update(extra_options)
    shutdown, ttl = _deletion(job, ray, ext)
    args = primary_container(base.spec, base.primary).get("args") or []
    spec: dict[str, Any] = {
        # KubeRay has the head run the entrypoint through a shell: every argument is quoted, so an input value
        # ({{.Inputs.x}}) full of shell syntax stays one argument instead of becoming a command.
        "entrypoint": shlex.join(str(a) for a in args),
        "shutdownAfterJobFinishes": shutdown,
    }
    if "clusterSelector" in ext:
        spec["clusterSelector"] = dict(ext["clusterSelector"])
    else:
        spec["rayClusterSpec"] = cluster_spec
    if shutdown and ttl > 0:  # deviation: KubeRay rejects a TTL > 0 without shutdown, so none is written
        spec["ttlSecondsAfterFinished"] = ttl
    runtime_env = _runtime_env_yaml(job)
    if runtime_env:
        spec["runtimeEnvYAML"] = runtime_env
    mode = ext.get("submissionMode", "K8sJobMode")
    if mode == "K8sJobMode":  # the only mode with a submitter Job (HTTPMode and InteractiveMode have no pod,
        # SidecarMode's submitter is a container KubeRay adds to the head)
        spec["submitterPodTemplate"] = _submitter_template(ctx, base, ext.get("submitterPodTemplate"))
    else:
        for key in ("submitterPodTemplate", "submitterConfig"):
            if key in ext:
                raise BuildError(
                    f"kubejobs.rayJob.{key} is set, but submissionMode {mode} runs no submitter Job: "
                    "it would be dropped"
                )
    for key in _COPIED:
        if key in ext:
            spec[key] = copy.deepcopy(ext[key])
    if ext:
        _check_kuberay_rules(spec)
    return BuiltSpec(spec, dict(base.labels), dict(base.annotations))


#: ``kubejobs.rayJob`` keys copied into the RayJob spec as they are (checked by ``parse_extension``).
_COPIED = (
    "submissionMode",
    "deletionStrategy",
    "backoffLimit",
    "activeDeadlineSeconds",
    "preRunningDeadlineSeconds",
    "entrypointNumCpus",
    "entrypointNumGpus",
    "entrypointResources",
    "submitterConfig",
    "suspend",
)


def _refuse_cluster_with_selector(job: Any, ext: dict[str, Any]) -> None:
    """With ``clusterSelector`` the job runs on an existing RayCluster: a cluster the custom describes, or a
    shutdown of it, would be dropped."""
    cluster = job.ray_cluster
    described = [
        name
        for name, present in (
            ("headGroupSpec", cluster.HasField("head_group_spec")),
            ("workerGroupSpec", len(cluster.worker_group_spec) > 0),
            ("enableAutoscaling", cluster.enable_autoscaling),
            ("autoscalerOptions", cluster.HasField("autoscaler_options")),
            ("kubejobs.rayJob.rayClusterSpec", "rayClusterSpec" in ext),
            ("shutdownAfterJobFinishes", job.shutdown_after_job_finishes),
            ("ttlSecondsAfterFinished", job.ttl_seconds_after_finished != 0),
        )
        if present
    ]
    if described:
        raise BuildError(
            f"kubejobs.rayJob.clusterSelector runs the job on the existing RayCluster "
            f"{ext['clusterSelector'].get('ray.io/cluster')!r}, but the custom also sets {described}: "
            "they would be dropped (KubeRay neither builds nor deletes a selected cluster)"
        )


def _deletion(job: Any, ray: RayConfig, ext: dict[str, Any]) -> tuple[bool, int]:
    """``shutdownAfterJobFinishes`` and the TTL. The platform's defaults give way to what the task chose: an
    existing cluster is never shut down, and a deletion strategy decides deletion itself."""
    if "clusterSelector" in ext:
        return False, 0
    strategy = ext.get("deletionStrategy")
    if strategy is None:
        return _shutdown_and_ttl(job, ray)
    if job.ttl_seconds_after_finished < 0:
        raise BuildError(f"ttlSecondsAfterFinished must not be negative, got {job.ttl_seconds_after_finished}")
    explicit = job.shutdown_after_job_finishes or job.ttl_seconds_after_finished > 0
    if "deletionRules" in strategy and explicit:
        raise BuildError(
            "kubejobs.rayJob.deletionStrategy.deletionRules cannot be used with shutdownAfterJobFinishes or "
            "ttlSecondsAfterFinished: KubeRay refuses the combination (the rules carry their own TTLs)"
        )
    return (True, job.ttl_seconds_after_finished) if explicit else (False, 0)


def _submitter_template(ctx: BuildContext, base: BasePod, overlay: Any) -> dict[str, Any]:
    """The submitter Job's pod: the task's pod; with ``submitterPodTemplate`` its own resources instead."""
    k8s, md = ctx.config.k8s, ctx.metadata
    spec = copy.deepcopy(base.spec)
    if overlay is not None:
        primary_container(spec, base.primary)["resources"] = copy.deepcopy(
            overlay["spec"]["containers"][0]["resources"]
        )
    return {
        "metadata": {
            "labels": {**k8s.default_labels, **base.labels, **md.labels},
            "annotations": {**k8s.default_annotations, **base.annotations, **md.annotations},
        },
        "spec": spec,
    }


def _check_kuberay_rules(spec: dict[str, Any]) -> None:
    # Run even when the caller skips schema validation: these combinations KubeRay refuses at reconcile time,
    # where the task would sit in ValidationFailed instead of failing at create with a message.
    from ..schema.problems import format_path
    from ..schema.rules_ray import rayjob_spec_problems

    problems = rayjob_spec_problems(spec)
    if problems:
        text = "; ".join(f"{format_path(p.path)}: {p.message}" for p in problems)
        raise BuildError(f"the RayJob settings of kubejobs.rayJob are refused by KubeRay's rules: {text}")
