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

from .wire.k8ssyntax import check_pod_spec

__all__ = ["check_task_pod_template", "env_to_k8s", "to_k8s_dict", "to_k8s_list"]


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


def check_task_pod_template(task_name: str, pod_template: object) -> None:
    """The task-level ``@task(pod_template=...)`` of one of this project's task types, checked when the task is
    decorated by the syntax rules of a role's pod settings (flytekit passes it through unchecked, and a bad one
    would surface only when the cluster refused the job), except that a volume may have no source (an emptyDir
    in Kubernetes), which the official plugins accept.

    >>> from flytekit import PodTemplate
    >>> check_task_pod_template("train", PodTemplate(pod_spec={"nodeSelector": {"pool": "a b"}}))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: task 'train': pod_template.pod_spec.nodeSelector['pool'] value 'a b' is not a Kubernetes label ...
    """
    if pod_template is None:
        return
    field = f"task {task_name!r}: pod_template"
    if not hasattr(pod_template, "pod_spec"):  # flytekit's PodTemplate (not imported: the backend imports us)
        raise TypeError(f"{field} must be a flytekit PodTemplate, got {pod_template!r}")
    spec = to_k8s_dict(f"{field}.pod_spec", pod_template.pod_spec or {})
    check_pod_spec(f"{field}.pod_spec", spec, sourceless_volumes=True)  # as the official plugins pass it
