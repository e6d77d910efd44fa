"""Shared core of the kubejobs plugins: policies, replica roles, resources and compute templates.

The backend (``flytekitplugins.kubejobs.backend``), the connector and the ``kubejobs`` CLI live in
sub-packages and are imported only when used.

>>> from flytekitplugins.kubejobs import ComputeTemplate, RunPolicy, CleanPodPolicy
>>> RunPolicy(clean_pod_policy=CleanPodPolicy.ALL).clean_pod_policy.k8s_name
'All'
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .compute import ComputeTemplate
    from .policies import CleanPodPolicy, KueueQueue, RestartPolicy, RunPolicy, SchedulingPolicy
    from .roles import ReplicaRole
    from .wire.extension import EXTENSION_KEY

__all__ = [
    "CleanPodPolicy",
    "ComputeTemplate",
    "EXTENSION_KEY",
    "KueueQueue",
    "ReplicaRole",
    "RestartPolicy",
    "RunPolicy",
    "SchedulingPolicy",
]

# The exports load on first use: sub-packages that need no flytekit (`schema`, the `kubejobs validate`
# CLI) then skip flytekit's ~0.6 s import, which `compute` and `roles` pull in.
_HOMES = {
    "CleanPodPolicy": "policies",
    "ComputeTemplate": "compute",
    "EXTENSION_KEY": "wire.extension",
    "KueueQueue": "policies",
    "ReplicaRole": "roles",
    "RestartPolicy": "policies",
    "RunPolicy": "policies",
    "SchedulingPolicy": "policies",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
