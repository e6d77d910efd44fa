"""The pod spec every replica and group starts from: Flyte's ``ToK8sPodSpec``, on plain dicts.

Order of operations follows Flyte's ``ApplyFlytePodConfiguration``: base pod (container, the task's
``k8s_pod``, or the node's ``pod_template`` override), argument rendering, Flyte env vars, resources of
the primary container (task < override < platform defaults), scheduling (tolerations, service account,
node selectors, interruptible affinity), extended resources (GPU accelerator, shared memory), the
node's image override and tolerations for extended resources.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from ..wire.template import substitute
from .decode import struct_dict
from .errors import BuildError
from .merge import merge_base_pod_template
from .plugins_config import BackendConfig, K8sConfig
from .resources import K8sResources, apply_platform_defaults, idl_to_k8s, merge_resources

__all__ = [
    "BasePod",
    "build_pod",
    "struct_to_dict",
    "check_pod_spec",
    "primary_container",
    "add_required_node_requirement",
    "add_extended_resource_tolerations",
    "service_account",
]


@dataclass
class BasePod:
    """A pod spec, the pod-template metadata it came with, and the name of its primary container."""

    spec: dict[str, Any]
    labels: dict[str, str]
    annotations: dict[str, str]
    primary: str


_LIST_FIELDS = ("tolerations", "volumes", "imagePullSecrets")
_CONTAINER_LISTS = ("env", "ports", "volumeMounts", "args", "command", "envFrom")


def _kind_error(path: str, value: object, want: str) -> BuildError:
    return BuildError(f"invalid TaskSpecification: {path} must be {want}, got {value!r}")


def check_pod_spec(spec: object, what: str) -> dict[str, Any]:
    """``spec`` if the parts of it that are merged and edited here have the shapes Kubernetes gives them
    (a garbage pod spec is a BuildError naming the field, not a crash halfway through building)."""
    if not isinstance(spec, dict):
        raise _kind_error(what, spec, "an object")
    for key in _LIST_FIELDS:
        if key in spec and not isinstance(spec[key], list):
            raise _kind_error(f"{what}.{key}", spec[key], "a list")
    for key in ("nodeSelector", "affinity"):
        if key in spec and not isinstance(spec[key], dict):
            raise _kind_error(f"{what}.{key}", spec[key], "an object")
    for list_key in ("containers", "initContainers"):
        containers = spec.get(list_key, [])
        if not isinstance(containers, list):
            raise _kind_error(f"{what}.{list_key}", containers, "a list")
        for i, c in enumerate(containers):
            where = f"{what}.{list_key}[{i}]"
            if not isinstance(c, dict):
                raise _kind_error(where, c, "an object")
            if not isinstance(c.get("name"), str) or not c["name"]:
                raise _kind_error(f"{where}.name", c.get("name"), "a non-empty string")
            for key in _CONTAINER_LISTS:
                if key in c and not isinstance(c[key], list):
                    raise _kind_error(f"{where}.{key}", c[key], "a list")
            resources = c.get("resources", {})
            if not isinstance(resources, dict):
                raise _kind_error(f"{where}.resources", resources, "an object")
            for side in ("requests", "limits"):
                if side in resources and not isinstance(resources[side], dict):
                    raise _kind_error(f"{where}.resources.{side}", resources[side], "an object")
    return spec


def struct_to_dict(struct: Any, what: str = "k8sPod.podSpec") -> dict[str, Any]:
    return check_pod_spec(struct_dict(struct, what), what)


def primary_container(spec: Mapping[str, Any], name: str) -> dict[str, Any]:
    for container in spec.get("containers") or []:
        if isinstance(container, dict) and container.get("name") == name:
            return container
    raise BuildError(f"invalid TaskSpecification, primary container [{name}] not defined")


def service_account(template: Any, metadata: Any) -> str:
    """The execution's Kubernetes service account: its identity, else the legacy field, else the task's."""
    sa: str = (
        metadata.identity.k8s_service_account
        or metadata.k8s_service_account
        or template.security_context.run_as.k8s_service_account
    )
    return sa


def _raw_pod(template: Any, metadata: Any, container_name: str, gpu_name: str) -> BasePod:
    override = metadata.overrides.pod_template if metadata.overrides.HasField("pod_template") else None
    if override is not None and override.HasField("pod_spec"):
        source, primary = override, override.primary_container_name
        if not primary:
            raise BuildError("invalid TaskSpecification, the pod_template override has no primary_container_name")
    elif template.HasField("k8s_pod"):
        source = template.k8s_pod
        primary = template.config.get("primary_container_name", "")
        if not primary:
            raise BuildError(
                f"invalid TaskSpecification, config missing [primary_container_name] key in [{dict(template.config)}]"
            )
        if not source.HasField("pod_spec"):
            raise BuildError("Pod tasks should specify their target as a K8sPod with a defined pod spec")
    elif template.HasField("container"):
        c = template.container
        container: dict[str, Any] = {
            "name": container_name,
            "image": c.image,
            "terminationMessagePolicy": "FallbackToLogsOnError",
            "resources": idl_to_k8s("container.resources", c.resources, gpu_name),
        }
        if c.command:
            container["command"] = list(c.command)
        if c.args:
            container["args"] = list(c.args)
        if c.env:
            container["env"] = [{"name": kv.key, "value": kv.value} for kv in c.env]
        return BasePod({"containers": [container]}, {}, {}, container_name)
    else:
        raise BuildError("unable to create container with no definition in TaskTemplate")
    spec = struct_to_dict(source.pod_spec)
    if not isinstance(spec.get("containers"), list):
        raise BuildError(f"invalid TaskSpecification, the pod spec has no containers list: {spec.get('containers')!r}")
    labels = dict(template.k8s_pod.metadata.labels) if template.HasField("k8s_pod") else {}
    annotations = dict(template.k8s_pod.metadata.annotations) if template.HasField("k8s_pod") else {}
    if override is not None:
        labels.update(override.metadata.labels)
        annotations.update(override.metadata.annotations)
    pod = BasePod(spec, labels, annotations, primary)
    primary_container(spec, primary)
    return pod


def _render(values: list[Any], variables: Mapping[str, str]) -> list[Any]:
    pairs = list(variables.items())
    return [substitute(v, pairs) if isinstance(v, str) else v for v in values]


def _flyte_env(template: Any, metadata: Any, k8s: K8sConfig) -> list[dict[str, str]]:
    tid = metadata.task_execution_id
    execution = tid.node_execution_id.execution_id
    task = template.id if template.HasField("id") else tid.task_id
    env = {
        "FLYTE_INTERNAL_EXECUTION_ID": execution.name,
        "FLYTE_INTERNAL_EXECUTION_PROJECT": execution.project,
        "FLYTE_INTERNAL_EXECUTION_DOMAIN": execution.domain,
        "FLYTE_ATTEMPT_NUMBER": str(tid.retry_attempt),
        "FLYTE_INTERNAL_TASK_PROJECT": task.project,
        "FLYTE_INTERNAL_TASK_DOMAIN": task.domain,
        "FLYTE_INTERNAL_TASK_NAME": task.name,
        "FLYTE_INTERNAL_TASK_VERSION": task.version,
    }
    env.update(metadata.environment_variables)
    env.update(k8s.default_env_vars)
    return [{"name": k, "value": v} for k, v in env.items()]


def add_required_node_requirement(spec: dict[str, Any], requirement: Mapping[str, Any]) -> None:
    """Add ``requirement`` to every required node-selector term (one new term when there is none)."""
    affinity = spec.setdefault("affinity", {})
    node = affinity.setdefault("nodeAffinity", {})
    required = node.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.setdefault("nodeSelectorTerms", [])
    if not terms:
        terms.append({"matchExpressions": [dict(requirement)]})
        return
    for term in terms:
        term.setdefault("matchExpressions", []).append(copy.deepcopy(dict(requirement)))


def _requested_names(spec: Mapping[str, Any]) -> set[str]:
    names: set[str] = set()
    for c in spec.get("containers") or []:
        resources = c.get("resources") or {}
        for side in ("requests", "limits"):
            names.update(resources.get(side) or {})
    return names


def add_extended_resource_tolerations(spec: dict[str, Any], k8s: K8sConfig) -> None:
    """``add-tolerations-for-extended-resources``: one ``Exists/NoSchedule`` toleration per listed
    resource that some container asks for, unless an equal one is there already."""
    if not k8s.add_tolerations_for_extended_resources:
        return
    names = _requested_names(spec)
    tolerations = spec.setdefault("tolerations", [])
    for name in k8s.add_tolerations_for_extended_resources:
        wanted = {"key": name, "operator": "Exists", "effect": "NoSchedule"}
        if name in names and wanted not in tolerations:
            tolerations.append(wanted)
    if not tolerations:
        del spec["tolerations"]


def _update_pod(pod: BasePod, template: Any, metadata: Any, k8s: K8sConfig) -> None:
    spec = pod.spec
    if not spec.get("restartPolicy"):
        spec["restartPolicy"] = "Never"
    tolerations: list[dict[str, Any]] = []
    for name in sorted(_requested_names(spec)):
        tolerations.extend(copy.deepcopy(k8s.resource_tolerations.get(name, [])))
    if metadata.interruptible:
        tolerations.extend(copy.deepcopy(k8s.interruptible_tolerations))
    tolerations.extend(copy.deepcopy(k8s.default_tolerations))
    tolerations.extend(spec.get("tolerations") or [])
    if tolerations:
        spec["tolerations"] = tolerations
    sa = service_account(template, metadata)
    if sa and not spec.get("serviceAccountName"):
        spec["serviceAccountName"] = sa
    if k8s.scheduler_name and not spec.get("schedulerName"):
        spec["schedulerName"] = k8s.scheduler_name
    selector = {**k8s.default_node_selector, **(spec.get("nodeSelector") or {})}
    if metadata.interruptible:
        selector.update(k8s.interruptible_node_selector)
    if selector:
        spec["nodeSelector"] = selector
    if not spec.get("affinity") and k8s.default_affinity:
        spec["affinity"] = copy.deepcopy(k8s.default_affinity)
    if k8s.default_pod_security_context and not spec.get("securityContext"):
        spec["securityContext"] = copy.deepcopy(k8s.default_pod_security_context)
    if k8s.enable_host_networking_pod is not None and "hostNetwork" not in spec:
        spec["hostNetwork"] = k8s.enable_host_networking_pod
    if k8s.default_pod_dns_config and not spec.get("dnsConfig"):
        spec["dnsConfig"] = copy.deepcopy(k8s.default_pod_dns_config)
    # Flyte's ApplyInterruptibleNodeAffinity always leaves an (possibly empty) affinity object.
    spec.setdefault("affinity", {})
    requirement = (
        k8s.interruptible_node_selector_requirement
        if metadata.interruptible
        else k8s.non_interruptible_node_selector_requirement
    )
    if requirement:
        add_required_node_requirement(spec, requirement)


def _extended_resources(pod: BasePod, template: Any, metadata: Any, k8s: K8sConfig, gpu_name: str) -> None:
    base, node = template.extended_resources, metadata.overrides.extended_resources
    gpu = node.gpu_accelerator if node.HasField("gpu_accelerator") else base.gpu_accelerator
    shm = node.shared_memory if node.HasField("shared_memory") else base.shared_memory
    spec = pod.spec
    has_gpu = any(gpu_name in ((c.get("resources") or {}).get("limits") or {}) for c in spec["containers"])
    if gpu.device and has_gpu:
        add_required_node_requirement(
            spec, {"key": k8s.gpu_device_node_label, "operator": "In", "values": [gpu.device]}
        )
        spec.setdefault("tolerations", []).append(
            {"key": k8s.gpu_device_node_label, "value": gpu.device, "operator": "Equal", "effect": "NoSchedule"}
        )
        if gpu.WhichOneof("partition_size_value") == "partition_size":
            label = k8s.gpu_partition_size_node_label
            add_required_node_requirement(spec, {"key": label, "operator": "In", "values": [gpu.partition_size]})
            spec["tolerations"].append(
                {"key": label, "value": gpu.partition_size, "operator": "Equal", "effect": "NoSchedule"}
            )
        elif gpu.WhichOneof("partition_size_value") == "unpartitioned" and gpu.unpartitioned:
            add_required_node_requirement(spec, {"key": k8s.gpu_partition_size_node_label, "operator": "DoesNotExist"})
    if shm.mount_name or shm.mount_path or shm.size_limit:
        if not shm.mount_name:
            raise BuildError("extended_resources.shared_memory: mount name is not set")
        if not shm.mount_path:
            raise BuildError("extended_resources.shared_memory: mount path is not set")
        volumes = spec.setdefault("volumes", [])
        if any(v.get("name") == shm.mount_name for v in volumes):
            raise BuildError(f"extended_resources.shared_memory: a volume named {shm.mount_name!r} already exists")
        empty_dir: dict[str, Any] = {"medium": "Memory"}
        if shm.size_limit:
            empty_dir["sizeLimit"] = shm.size_limit
        volumes.append({"name": shm.mount_name, "emptyDir": empty_dir})
        primary = primary_container(spec, pod.primary)
        primary.setdefault("volumeMounts", []).append({"name": shm.mount_name, "mountPath": shm.mount_path})


def _apply_base_pod_template(pod: BasePod, template: Any, config: BackendConfig) -> None:
    name = template.metadata.pod_template_name
    if name and name not in config.pod_templates:
        raise BuildError(
            f"PodTemplate '{name}' does not exist (BackendConfig.pod_templates has {sorted(config.pod_templates)})"
        )
    name = name or config.k8s.default_pod_template_name
    base = config.pod_templates.get(name) if name else None
    if base is None:
        return  # a missing default template is not an error (as in Flyte)
    spec = base.get("spec") or {}
    check_pod_spec(spec, f"PodTemplate {name!r} spec")
    pod.spec = merge_base_pod_template(pod.spec, pod.primary, dict(spec))
    meta = base.get("metadata") or {}
    pod.labels = {**(meta.get("labels") or {}), **pod.labels}
    pod.annotations = {**(meta.get("annotations") or {}), **pod.annotations}


def _mirrored(extra: Mapping[str, Mapping[str, str]]) -> K8sResources:
    # Kubernetes wants extended resources (not overcommittable) with equal request and limit; a side that
    # is given alone is copied to the other, as flytekit does for requests/limits given alone.
    requests, limits = dict(extra.get("requests") or {}), dict(extra.get("limits") or {})
    return {"requests": {**limits, **requests}, "limits": {**requests, **limits}}


def build_pod(
    template: Any,
    metadata: Any,
    config: BackendConfig,
    *,
    container_name: str,
    role_resources: Optional[K8sResources] = None,
    extra_resources: Optional[K8sResources] = None,
    gpu_name: Optional[str] = None,
    template_vars: Optional[Mapping[str, str]] = None,
) -> BasePod:
    """The Flyte pod for the task. ``role_resources`` (kubeflow v1 replica resources) replace the node's
    resource override; ``extra_resources`` (the extension's names the IDL lacks) are added on top."""
    k8s = config.k8s
    gpu = gpu_name or k8s.gpu_resource_name
    pod = _raw_pod(template, metadata, container_name, gpu)
    variables = {"namespace": metadata.namespace, **(template_vars or {})}
    flyte_env = _flyte_env(template, metadata, k8s)
    for c in pod.spec["containers"]:
        for key in ("command", "args"):
            if isinstance(c.get(key), list):
                c[key] = _render(c[key], variables)
        c["env"] = [*(c.get("env") or []), *copy.deepcopy(flyte_env)]
    primary = primary_container(pod.spec, pod.primary)
    base = primary.get("resources") or {}
    if role_resources is not None:
        over: K8sResources = role_resources
    else:
        over = idl_to_k8s("overrides.resources", metadata.overrides.resources, gpu)
    merged = merge_resources(merge_resources(base, over), _mirrored(extra_resources or {}))
    resolved = apply_platform_defaults(f"container {pod.primary!r} resources", merged, k8s, gpu)
    primary["resources"] = {side: values for side, values in resolved.items() if values}
    if k8s.image_pull_policy and not primary.get("imagePullPolicy"):
        primary["imagePullPolicy"] = k8s.image_pull_policy
    _update_pod(pod, template, metadata, k8s)
    if k8s.default_security_context and not primary.get("securityContext"):
        primary["securityContext"] = copy.deepcopy(k8s.default_security_context)
    _apply_base_pod_template(pod, template, config)
    primary = primary_container(pod.spec, pod.primary)  # the merge made new container dicts
    _extended_resources(pod, template, metadata, k8s, gpu)
    if metadata.overrides.container_image:
        primary["image"] = metadata.overrides.container_image
    add_extended_resource_tolerations(pod.spec, k8s)
    return pod
