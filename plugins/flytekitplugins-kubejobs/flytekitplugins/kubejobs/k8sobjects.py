"""Kubernetes pod settings given by users (tolerations, affinity, volumes, env...), kept wire-shaped.

Users may pass plain dicts with the Kubernetes field names (``{"key": "gpu", "operator": "Exists"}``)
or kubernetes client models (``V1Toleration(...)``); both become plain camelCase dicts here, so the
rest of the code handles one shape. The kubernetes client is imported only when a model is given.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["to_k8s_dict", "to_k8s_list", "env_to_k8s"]


def to_k8s_dict(field: str, value: object) -> dict[str, Any]:
    """A deep copy of ``value`` as a JSON-able camelCase dict."""
    if isinstance(value, Mapping):
        out = copy.deepcopy(dict(value))
    elif hasattr(value, "openapi_types"):  # a kubernetes client model
        from kubernetes.client import ApiClient

        out = ApiClient().sanitize_for_serialization(value)  # type: ignore[no-untyped-call]
    else:
        raise TypeError(
            f"{field} must be a dict with Kubernetes field names or a kubernetes client model, got {value!r}"
        )
    try:
        json.dumps(out, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{field} must be JSON-serializable, got {value!r}: {e}") from e
    return out


def to_k8s_list(field: str, value: object) -> list[dict[str, Any]]:
    """A list of wire-shaped dicts; a single dict or a str is refused (it is almost always a mistake)."""
    if value is None:
        return []
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise TypeError(f"{field} must be a list, got {value!r} ({type(value).__name__})")
    return [to_k8s_dict(f"{field}[{i}]", item) for i, item in enumerate(value)]


def env_to_k8s(field: str, value: object) -> list[dict[str, Any]]:
    """Environment variables as Kubernetes ``EnvVar`` dicts.

    Accepts ``{"NAME": "value"}`` or a list of EnvVar dicts/models (for ``valueFrom``).
    """
    if value is None:
        return []
    if isinstance(value, Mapping):
        out = []
        for name, item in value.items():
            if not isinstance(name, str) or not name:
                raise TypeError(f"{field} names must be non-empty str, got {name!r}")
            if not isinstance(item, str):
                raise TypeError(f"{field}[{name!r}] must be a str, got {item!r} ({type(item).__name__})")
            out.append({"name": name, "value": item})
        return out
    env = to_k8s_list(field, value)
    for i, item in enumerate(env):
        if not isinstance(item.get("name"), str) or not item["name"]:
            raise ValueError(f"{field}[{i}] needs a non-empty 'name', got {item!r}")
    return env
