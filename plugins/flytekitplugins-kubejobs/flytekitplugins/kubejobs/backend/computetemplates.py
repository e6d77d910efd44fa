"""Compute templates named by a task (``computeTemplate`` in the extension key), applied with the precedence of
``ComputeTemplate`` objects: the pod template's container resources < the template < the role's or group's own
requests/limits, resource by resource; node selectors merge (template keys win over the pod's); tolerations
are appended. Pure: the stored templates come from ``BackendConfig.compute_templates`` (a
``wire.compute.TemplateSet``), which the connector fills from its watch cache and ``kubejobs render`` from a
file or the cluster.

>>> from ..wire.compute import TemplateSet, TemplateSpec
>>> templates = TemplateSet({"small": TemplateSpec("small", cpu="2")}, source="namespace 'flyte'")
>>> resolve_template(templates, "Worker", "small").cpu
'2'
>>> resolve_template(templates, "Worker", "huge")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
flytekitplugins.kubejobs.backend.errors.BuildError: Worker: compute template 'huge' does not exist in ...
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Optional

from ..wire.compute import TemplateSet, TemplateSpec, check_template_name
from ..wire.extension import DEFAULT_GPU_RESOURCE_NAME, EXTENSION_KEY, IDL_RESOURCE_NAMES
from ..wire.quantity import parse_quantity
from .errors import BuildError
from .resources import K8sResources

__all__ = [
    "apply_template_pod_settings",
    "check_within_limits",
    "group_gpu_name",
    "lay_template",
    "named_templates",
    "resolve_template",
    "split_idl",
]


def named_templates(template: Any) -> frozenset[str]:
    """The compute template names a task (a ``flyteidl.core.TaskTemplate``) names on its Training Operator roles
    and Ray groups, for a caller that must fetch the stored templates before building (only then). Tolerant of
    malformed input: building refuses it with a message."""
    if not template.HasField("custom"):
        return frozenset()
    from google.protobuf import json_format

    ext = json_format.MessageToDict(template.custom).get(EXTENSION_KEY)
    if not isinstance(ext, Mapping):
        return frozenset()
    specs: list[Any] = []
    roles = ext.get("replicaSpecs")
    if isinstance(roles, Mapping):
        specs += list(roles.values())
    groups = ext.get("rayGroups")
    if isinstance(groups, Mapping):
        specs.append(groups.get("head"))
        workers = groups.get("workers")
        if isinstance(workers, Mapping):
            specs += list(workers.values())
    return frozenset(
        s["computeTemplate"] for s in specs if isinstance(s, Mapping) and isinstance(s.get("computeTemplate"), str)
    )


def resolve_template(templates: TemplateSet, field: str, name: object) -> TemplateSpec:
    """The stored template ``name`` (named at ``field``); a ``BuildError`` naming it and the templates that exist,
    or saying why the stored one is invalid."""
    try:
        check_template_name(f"{field}.computeTemplate", name)
        return templates.resolve(field, str(name))
    except (LookupError, ValueError) as e:
        raise BuildError(str(e.args[0] if isinstance(e, LookupError) else e)) from None


def lay_template(
    field: str, template: TemplateSpec, explicit: Mapping[str, Mapping[str, str]], gpu_name: str
) -> K8sResources:
    """``explicit`` (the role's or group's own requests/limits) laid over the template's amounts (as request and
    limit, the GPU count under ``gpu_name``); a request above its limit is a ``BuildError`` (nothing clamped)."""
    amounts = template.amounts(gpu_name)
    merged: K8sResources = {side: {**amounts, **(explicit.get(side) or {})} for side in ("requests", "limits")}
    check_within_limits(field, template.name, merged)
    return merged


def check_within_limits(field: str, template_name: str, resources: Mapping[str, Mapping[str, str]]) -> None:
    """A request above its limit once a template was applied is a ``BuildError`` naming both (never clamped)."""
    limits = resources.get("limits") or {}
    for name, request in (resources.get("requests") or {}).items():
        limit = limits.get(name)
        if limit is not None and parse_quantity(request) > parse_quantity(limit):
            raise BuildError(
                f"{field}: the {name} request {request!r} is above its limit {limit!r} "
                f"after compute template {template_name!r} was applied"
            )


def split_idl(resources: K8sResources, gpu_name: str) -> tuple[K8sResources, K8sResources]:
    """(the names the IDL's Resources carries: cpu, memory, ephemeral storage and the GPU; the others)."""
    carried = IDL_RESOURCE_NAMES | {gpu_name}
    idl = {side: {k: v for k, v in values.items() if k in carried} for side, values in resources.items()}
    other = {side: {k: v for k, v in values.items() if k not in carried} for side, values in resources.items()}
    return idl, other


def apply_template_pod_settings(spec: dict[str, Any], template: TemplateSpec) -> None:
    """The template's node selector (its keys win) and tolerations (appended) on a pod spec."""
    if template.node_selector:
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **template.node_selector}
    if template.tolerations:
        spec["tolerations"] = [*(spec.get("tolerations") or []), *copy.deepcopy(list(template.tolerations))]


def group_gpu_name(template: TemplateSpec, role_gpu_name: Optional[str], platform_gpu_name: str) -> str:
    """The accelerator a Training Operator role's GPU count means with a named template: the role's own
    (``gpuResourceName``), else the template's when it names one, else the platform's, exactly as for a
    ``ComputeTemplate`` object (whose non-default accelerator travels as ``gpuResourceName``)."""
    if role_gpu_name:
        return role_gpu_name
    if template.gpu_resource_name != DEFAULT_GPU_RESOURCE_NAME:
        return template.gpu_resource_name
    return platform_gpu_name
