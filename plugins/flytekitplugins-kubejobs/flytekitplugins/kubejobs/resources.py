"""Resource quantities: validation and conversion of flytekit ``Resources``.

Every value is checked by the API server's quantity grammar (``wire.quantity``) at construction, so
``Resources(cpu="lots")`` fails where it is written instead of at pod creation. ints and floats are
accepted and turned into quantity strings (the kubernetes client models refuse numbers).

>>> normalize_resources("Worker.requests", Resources(cpu=2, mem="4Gi")).cpu
'2'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace
from typing import Optional

from flytekit import Resources

from .wire.extension import DEFAULT_GPU_RESOURCE_NAME
from .wire.quantity import check_quantity

__all__ = [
    "normalize_resources",
    "check_task_resources",
    "resources_to_k8s",
    "merge_quantities",
]

# flytekit Resources attribute -> Kubernetes resource name (gpu is named by the caller).
_K8S_NAMES = {"cpu": "cpu", "mem": "memory", "ephemeral_storage": "ephemeral-storage"}


def normalize_resources(field: str, resources: object) -> Optional[Resources]:
    """A copy of ``resources`` with every set value checked and written as a quantity string.

    Ranges (tuples/lists, allowed by ``@task(resources=...)``) are refused here: a replica group has
    one value per resource.
    """
    if resources is None:
        return None
    if not isinstance(resources, Resources):
        raise TypeError(f"{field} must be a flytekit Resources, got {resources!r} ({type(resources).__name__})")
    changes: dict[str, str] = {}
    for f in fields(Resources):
        value = getattr(resources, f.name)
        if value is None:
            continue
        if isinstance(value, (tuple, list)):
            raise TypeError(f"{field}.{f.name} must be a single quantity, not a range: {value!r}")
        changes[f.name] = check_quantity(f"{field}.{f.name}", value, integer=f.name == "gpu")
    return replace(resources, **changes)


def check_task_resources(task_name: str, requests: object, limits: object) -> None:
    """The task-level ``@task(requests=..., limits=...)`` (or ``resources=``) of one of this project's
    task types, checked when the task is decorated: flytekit passes them through unchecked, and a bad one
    would surface only when the job's pods are created.

    >>> check_task_resources("train", Resources(mem="2Gb"), None)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: task 'train': requests.mem is not a Kubernetes quantity: '2Gb' (...
    """
    normalize_resources(f"task {task_name!r}: requests", requests)
    normalize_resources(f"task {task_name!r}: limits", limits)


def resources_to_k8s(
    resources: Optional[Resources], gpu_resource_name: str = DEFAULT_GPU_RESOURCE_NAME
) -> dict[str, str]:
    """``{kubernetes resource name: quantity}`` for the set values of a normalized ``Resources``."""
    if resources is None:
        return {}
    out: dict[str, str] = {}
    for attr, name in _K8S_NAMES.items():
        value = getattr(resources, attr, None)
        if value is not None:
            out[name] = str(value)
    if getattr(resources, "gpu", None) is not None:
        out[gpu_resource_name] = str(resources.gpu)
    return out


def merge_quantities(*layers: Optional[Mapping[str, str]]) -> dict[str, str]:
    """Merge ``{name: quantity}`` maps; later layers win per resource name."""
    out: dict[str, str] = {}
    for layer in layers:
        if layer:
            out.update(layer)
    return out
