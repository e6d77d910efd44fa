"""Container resource resolution, as Flyte's pod building does it (``ApplyResourceOverrides``).

Resources are ``{"requests": {name: quantity}, "limits": {...}}`` dicts with Kubernetes names.
"""

from __future__ import annotations

import decimal
from collections.abc import Mapping
from typing import Any, Optional

from ..wire.quantity import is_integer_resource, parse_quantity
from .errors import BuildError
from .plugins_config import K8sConfig

__all__ = ["K8sResources", "idl_to_k8s", "merge_resources", "apply_platform_defaults", "is_zero"]

K8sResources = dict[str, dict[str, str]]

# flyteidl.core.Resources.ResourceName numbers -> Kubernetes names; GPU (2) is named by the caller.
_IDL_NAMES = {1: "cpu", 3: "memory", 5: "ephemeral-storage"}  # STORAGE (4) is not a container resource
_GPU = 2


def _quantity(field: str, value: object) -> decimal.Decimal:
    try:
        return parse_quantity(value)
    except (ValueError, TypeError) as e:
        raise BuildError(f"{field} is not a valid Kubernetes quantity: {value!r}") from e


def is_zero(field: str, value: Optional[str]) -> bool:
    return value is None or _quantity(field, value) == 0


def idl_to_k8s(field: str, resources: Any, gpu_name: str) -> K8sResources:
    """A ``flyteidl.core.Resources`` as Kubernetes requirements. Zero quantities are dropped, as in
    Flyte's ``ToK8sResourceRequirements``; an unparsable one is a ``BuildError`` naming ``field``."""
    out: K8sResources = {"requests": {}, "limits": {}}
    for side in ("requests", "limits"):
        for entry in getattr(resources, side):
            name = gpu_name if entry.name == _GPU else _IDL_NAMES.get(entry.name)
            if name is None:
                continue  # UNKNOWN: Flyte skips it too
            amount = _quantity(f"{field}.{side}.{name}", entry.value)
            if amount == 0:
                continue
            if is_integer_resource(name) and amount != amount.to_integral_value():
                raise BuildError(f"{field}.{side}.{name} must be a whole number, got {entry.value!r}")
            out[side][name] = entry.value
    return out


def merge_resources(base: Mapping[str, Mapping[str, str]], over: Mapping[str, Mapping[str, str]]) -> K8sResources:
    """``over`` laid on ``base`` key by key, per side."""
    return {side: {**(base.get(side) or {}), **(over.get(side) or {})} for side in ("requests", "limits")}


def apply_platform_defaults(
    field: str, resources: Mapping[str, Mapping[str, str]], k8s: K8sConfig, gpu_name: Optional[str] = None
) -> K8sResources:
    """Flyte's ``ApplyResourceOverrides`` with ``assignIfUnset``: cpu and memory always get a request and
    a limit (request <- limit <- platform default), GPU and ephemeral storage only when present; a
    request above its limit is lowered to the limit."""
    gpu = gpu_name or k8s.gpu_resource_name
    requests = dict(resources.get("requests") or {})
    limits = dict(resources.get("limits") or {})
    if "gpu" in requests:
        requests[gpu] = requests.pop("gpu")
    if "gpu" in limits:
        limits[gpu] = limits.pop("gpu")
    defaults = {"cpu": k8s.default_cpus, "memory": k8s.default_memory}
    names = ["cpu", "memory"] + [n for n in ("ephemeral-storage", gpu) if n in requests or n in limits]
    for name in names:
        request, limit = requests.get(name), limits.get(name)
        if is_zero(f"{field}.requests.{name}", request):
            request = limit if not is_zero(f"{field}.limits.{name}", limit) else defaults.get(name)
        if is_zero(f"{field}.limits.{name}", limit):
            limit = request
        if request is None or limit is None:
            continue
        if _quantity(field, request) > _quantity(field, limit):
            request = limit
        requests[name], limits[name] = request, limit
    return {"requests": requests, "limits": limits}
