"""The ``k8sPod`` of one Ray group (head or worker), as the plain camelCase dict flytekit would send.

One rule combines a group's pod template, compute template and requests/limits
(:func:`flytekitplugins.kubejobs.compute.resolve_requirements`): the pod template's Ray container is the
base, the compute template is laid over it, explicit requests/limits win, resource by resource. Node
selectors merge (compute template keys win); tolerations are appended. The user's ``PodTemplate`` is copied, never
changed.

The Ray container is the template's container named ``ray-head``/``ray-worker`` or, failing that, the one
named by ``PodTemplate.primary_container_name``. It is renamed to ``ray-head``/``ray-worker`` (Flyte's
backend merges group containers by that name and drops others) and put first (KubeRay starts Ray in
container 0).

>>> pod = group_k8s_pod("WorkerNodeConfig", RAY_WORKER_CONTAINER, None, None, Resources(cpu=2), None)
>>> pod["podSpec"]["containers"]
[{'name': 'ray-worker', 'resources': {'requests': {'cpu': '2'}, 'limits': {'cpu': '2'}}}]
"""

from __future__ import annotations

import copy
from typing import Any, Optional

from flytekit import PodTemplate, Resources
from flytekitplugins.kubejobs.compute import ComputeTemplate, Requirements, resolve_requirements
from flytekitplugins.kubejobs.k8sobjects import to_k8s_dict
from flytekitplugins.kubejobs.wire.fields import check_str_map
from flytekitplugins.kubejobs.wire.k8ssyntax import check_pod_spec
from flytekitplugins.kubejobs.wire.quantity import check_quantity

__all__ = ["RAY_HEAD_CONTAINER", "RAY_WORKER_CONTAINER", "group_k8s_pod"]

RAY_HEAD_CONTAINER = "ray-head"
RAY_WORKER_CONTAINER = "ray-worker"


def _container_requirements(owner: str, container: dict[str, Any]) -> Requirements:
    """The requests/limits already on a pod template container, as quantity strings."""
    resources = container.get("resources") or {}
    if not isinstance(resources, dict):
        raise TypeError(f"{owner}.pod_template: container {container['name']!r} resources must be a dict")
    sides: list[dict[str, str]] = []
    for side in ("requests", "limits"):
        values = resources.get(side) or {}
        if not isinstance(values, dict):
            raise TypeError(f"{owner}.pod_template: container {container['name']!r} resources.{side} must be a dict")
        sides.append(
            {name: check_quantity(f"{owner}.pod_template resources.{side}[{name!r}]", v) for name, v in values.items()}
        )
    return Requirements(sides[0], sides[1])


def _pod_template_parts(
    owner: str, pod_template: PodTemplate
) -> tuple[dict[str, str], dict[str, str], dict[str, Any], str]:
    """(labels, annotations, pod spec copy, primary container name) of a user's pod template."""
    if not isinstance(pod_template, PodTemplate):
        raise TypeError(f"{owner}.pod_template must be a flytekit PodTemplate, got {pod_template!r}")
    labels = check_str_map(f"{owner}.pod_template.labels", pod_template.labels or {})
    annotations = check_str_map(f"{owner}.pod_template.annotations", pod_template.annotations or {})
    spec = to_k8s_dict(f"{owner}.pod_template.pod_spec", pod_template.pod_spec or {})
    check_pod_spec(f"{owner}.pod_template.pod_spec", spec)
    containers = spec.get("containers") or []
    if not isinstance(containers, list) or not all(isinstance(c, dict) and c.get("name") for c in containers):
        raise TypeError(f"{owner}.pod_template.pod_spec.containers must be a list of named containers")
    spec["containers"] = containers
    return labels, annotations, spec, pod_template.primary_container_name


def group_k8s_pod(
    owner: str,
    ray_container: str,
    pod_template: Optional[PodTemplate],
    compute_template: Optional[ComputeTemplate],
    requests: Optional[Resources],
    limits: Optional[Resources],
) -> Optional[dict[str, Any]]:
    """The group's ``k8sPod`` dict (``metadata``, ``podSpec``, ``primaryContainerName``); None when the
    group sets none of the four inputs. ``requests``/``limits`` must be normalized already.

    As in flytekitplugins-ray, explicit requests without limits mean limits = requests (and vice versa).
    A request above its limit after merging raises ``ValueError`` naming ``owner``.
    """
    if pod_template is None and compute_template is None and requests is None and limits is None:
        return None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    spec: dict[str, Any] = {"containers": []}
    primary = ray_container
    if pod_template is not None:
        labels, annotations, spec, primary = _pod_template_parts(owner, pod_template)
    containers: list[dict[str, Any]] = spec["containers"]
    names = [c["name"] for c in containers]
    index = names.index(ray_container) if ray_container in names else names.index(primary) if primary in names else None
    ray: dict[str, Any] = containers.pop(index) if index is not None else {"name": ray_container}
    ray["name"] = ray_container

    base = _container_requirements(owner, ray)
    explicit_requests, explicit_limits = requests or limits, limits or requests
    resolved = resolve_requirements(owner, compute_template, explicit_requests, explicit_limits, base)
    if resolved.requests or resolved.limits:
        resources = dict(ray.get("resources") or {})
        for side in ("requests", "limits"):
            values = getattr(resolved, side)
            if values:
                resources[side] = values
        ray["resources"] = resources
    if index is not None or "resources" in ray or containers:
        containers.insert(0, ray)

    if compute_template is not None:
        if compute_template.node_selector:
            spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **compute_template.node_selector}
        if compute_template.tolerations:
            spec["tolerations"] = [*(spec.get("tolerations") or []), *copy.deepcopy(compute_template.tolerations)]

    metadata: dict[str, Any] = {}
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "podSpec": spec, "primaryContainerName": ray_container}
