"""Resource quantities: validation and conversion of flytekit ``Resources``.

Every value is checked with the Kubernetes client's own ``parse_quantity`` at construction, so
``Resources(cpu="lots")`` fails where it is written instead of at pod creation. ints and floats are
accepted and turned into quantity strings (the kubernetes client models refuse numbers).

>>> normalize_resources("Worker.requests", Resources(cpu=2, mem="4Gi")).cpu
'2'
"""

from __future__ import annotations

import decimal
import functools
import importlib.util
import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import fields, replace
from typing import Optional

from flytekit import Resources

__all__ = [
    "DEFAULT_GPU_RESOURCE_NAME",
    "parse_quantity",
    "check_quantity",
    "normalize_resources",
    "resources_to_k8s",
    "merge_quantities",
]

DEFAULT_GPU_RESOURCE_NAME = "nvidia.com/gpu"

# flytekit Resources attribute -> Kubernetes resource name (gpu is named by the caller).
_K8S_NAMES = {"cpu": "cpu", "mem": "memory", "ephemeral_storage": "ephemeral-storage"}


@functools.cache
def _parse_quantity_fn() -> Callable[[object], decimal.Decimal]:
    # `import kubernetes` imports the whole generated client (about 0.4 s); quantity.py depends only
    # on the standard library, so load that one file when the package has not been imported yet.
    module = sys.modules.get("kubernetes.utils.quantity")
    if module is None:
        spec = importlib.util.find_spec("kubernetes")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("the kubernetes package is required to check resource quantities: pip install kubernetes")
        path = f"{next(iter(spec.submodule_search_locations))}/utils/quantity.py"
        qspec = importlib.util.spec_from_file_location("_kubejobs_k8s_quantity", path)
        assert qspec is not None and qspec.loader is not None
        module = importlib.util.module_from_spec(qspec)
        qspec.loader.exec_module(module)
    fn: Callable[[object], decimal.Decimal] = module.parse_quantity
    return fn


def parse_quantity(value: object) -> decimal.Decimal:
    """``kubernetes.utils.parse_quantity``, loaded without importing the whole client."""
    return _parse_quantity_fn()(value)


def check_quantity(field: str, value: object) -> str:
    """Return ``value`` as a Kubernetes quantity string, or raise naming ``field``."""
    if isinstance(value, bool):
        raise TypeError(f"{field} must be a Kubernetes quantity (str, int or float), got {value!r}")
    if isinstance(value, int):
        text = str(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{field} must be a finite quantity, got {value!r}")
        text = format(decimal.Decimal(repr(value)).normalize(), "f")
    elif isinstance(value, str):
        text = value.strip()
    else:
        raise TypeError(
            f"{field} must be a Kubernetes quantity (str, int or float), got {value!r} ({type(value).__name__})"
        )
    try:
        amount = parse_quantity(text)
    except (ValueError, TypeError, decimal.InvalidOperation) as e:
        raise ValueError(f"{field} is not a Kubernetes quantity: {value!r}") from e
    if amount < 0:
        raise ValueError(f"{field} must not be negative, got {value!r}")
    return text


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
        changes[f.name] = check_quantity(f"{field}.{f.name}", value)
    return replace(resources, **changes)


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
