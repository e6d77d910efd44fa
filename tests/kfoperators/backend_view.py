"""What a stock Flyte backend reads from a kubeflow task custom (flyte-backend-behaviour.md §1.1-1.5).

Used to compare our customs with the official plugins' by meaning, not bytes. ``common=True`` reads like
a backend from after flyte#5355 (``common`` when present, else the deprecated fields); ``common=False``
like an older backend (deprecated fields only). Quantities are compared by value with the kubernetes
client's own parser; zero quantities are dropped, as the backend drops them, but whether a role carries any
resource entry at all is kept (it decides whether the backend overrides the role's resources).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Optional

from kubernetes.utils import parse_quantity

__all__ = ["backend_view", "role_view"]

_RESOURCE_NAMES = {"CPU": "cpu", "MEMORY": "memory", "GPU": "nvidia.com/gpu", "EPHEMERAL_STORAGE": "ephemeral-storage"}


def _quantities(entries: Optional[list[dict[str, Any]]]) -> dict[str, Decimal]:
    out = {}
    for entry in entries or []:
        value = parse_quantity(entry["value"])
        if value != 0:
            out[_RESOURCE_NAMES[entry.get("name", "UNKNOWN")]] = value
    return out


def role_view(spec: Optional[dict[str, Any]], *, master: bool = False, common: bool = True) -> dict[str, Any]:
    spec = spec or {}
    src = spec["common"] if common and spec.get("common") is not None else spec
    resources = src.get("resources") or {}
    return {
        "replicas": 1 if master else int(src.get("replicas", 0)),
        "image": src.get("image", ""),
        # §1.2 step 2: with any request/limit entry (even a zero one) the replica's resources replace the
        # node-level override and get the platform defaults for cpu/memory; without, the task's own apply.
        "overridesResources": bool(resources.get("requests") or resources.get("limits")),
        "requests": _quantities(resources.get("requests")),
        "limits": _quantities(resources.get("limits")),
        "restartPolicy": src.get("restartPolicy", "RESTART_POLICY_NEVER"),
        "command": list(spec.get("command", [])),
    }


def _run_policy(custom: dict[str, Any]) -> Optional[dict[str, Any]]:
    policy = custom.get("runPolicy")
    if policy is None:
        return None
    out: dict[str, Any] = {"cleanPodPolicy": policy.get("cleanPodPolicy", "CLEANPOD_POLICY_NONE")}
    for key in ("backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
        if int(policy.get(key, 0)):
            out[key] = int(policy[key])
    return out


def backend_view(task_type: str, custom: dict[str, Any], *, common: bool = True) -> dict[str, Any]:
    view: dict[str, Any] = {"runPolicy": _run_policy(custom)}
    if task_type == "pytorch":
        elastic = custom.get("elasticConfig")
        worker = role_view(custom.get("workerReplicas"), common=common)
        if elastic is not None:
            view["elastic"] = {
                k: elastic.get(k, "" if k == "rdzvBackend" else 0)
                for k in ("rdzvBackend", "minReplicas", "maxReplicas", "nprocPerNode", "maxRestarts")
            }
            view["elastic"] = {k: v if isinstance(v, str) else int(v) for k, v in view["elastic"].items()}
        else:
            view["Master"] = role_view(custom.get("masterReplicas"), master=True, common=common)
        if worker["replicas"] > 0:
            view["Worker"] = worker
    elif task_type == "tensorflow":
        for role, key in (
            ("Chief", "chiefReplicas"),
            ("Worker", "workerReplicas"),
            ("PS", "psReplicas"),
            ("Evaluator", "evaluatorReplicas"),
        ):
            spec = role_view(custom.get(key), common=common)
            if spec["replicas"] > 0:
                view[role] = spec
    elif task_type == "mpi":
        view["Launcher"] = role_view(custom.get("launcherReplicas"), master=True, common=common)
        view["Worker"] = role_view(custom.get("workerReplicas"), common=common)
        view["slots"] = int(custom.get("slots", 0))
    else:
        raise ValueError(task_type)
    return view
