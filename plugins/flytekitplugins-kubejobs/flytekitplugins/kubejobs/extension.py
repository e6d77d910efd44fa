"""Building the ``kubejobs`` extension key from the shared config types (its shape: ``wire.extension``).

Only what the flyteidl messages cannot carry goes there; ``build_extension`` returns None when nothing
does, so a config that needs no extension serializes exactly as the official plugins do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

from .policies import RunPolicy
from .roles import ReplicaRole
from .userwarnings import ExtensionKeyWarning, warn_user
from .wire.extension import (
    DEFAULT_GPU_RESOURCE_NAME,
    EXTENSION_KEY,
    EXTENSION_VERSION,
    IDL_RESOURCE_NAMES,
    Extension,
    ResourceMaps,
    RoleExtension,
    RunPolicyExtension,
)

__all__ = [
    "role_extension",
    "run_policy_extension",
    "build_extension",
    "warn_extension_once",
]


def role_extension(role: ReplicaRole) -> RoleExtension:
    """What of ``role`` the IDL cannot carry; empty when the IDL carries all of it."""
    ext: RoleExtension = {}
    template = role.compute_template
    node_selector = {**(template.node_selector if template else {}), **(role.node_selector or {})}
    if node_selector:
        ext["nodeSelector"] = node_selector
    tolerations = [*(template.tolerations if template else ()), *(role.tolerations or ())]
    if tolerations:
        ext["tolerations"] = list(tolerations)
    if role.affinity is not None:
        ext["affinity"] = role.affinity
    if role.env:
        ext["env"] = list(role.env)  # type: ignore[arg-type]  # normalized to EnvVar dicts by ReplicaRole
    if role.volumes:
        ext["volumes"] = list(role.volumes)
    if role.volume_mounts:
        ext["volumeMounts"] = list(role.volume_mounts)
    gpu_name = template.gpu_resource_name if template else DEFAULT_GPU_RESOURCE_NAME
    if gpu_name != DEFAULT_GPU_RESOURCE_NAME:
        ext["gpuResourceName"] = gpu_name
    requirements = role.requirements()
    extra: ResourceMaps = {}
    for side in ("requests", "limits"):
        others = {k: v for k, v in getattr(requirements, side).items() if k not in IDL_RESOURCE_NAMES and k != gpu_name}
        if others:
            extra[side] = others
    if extra:
        ext["resources"] = extra
    return ext


def run_policy_extension(policy: Optional[RunPolicy]) -> RunPolicyExtension:
    ext: RunPolicyExtension = {}
    if policy is None:
        return ext
    if policy.suspend is not None:
        ext["suspend"] = policy.suspend
    if policy.backoff_limit == 0:  # proto3 drops a zero; 0 means "never retry" to the operator
        ext["backoffLimit"] = 0
    if policy.scheduling_policy is not None:
        ext["schedulingPolicy"] = policy.scheduling_policy.to_k8s()
    return ext


def build_extension(roles: dict[str, ReplicaRole], run_policy: Optional[RunPolicy]) -> Optional[Extension]:
    """The extension for a job with the given ``{operator role name: role}``; None when nothing needs it."""
    replica_specs = {name: ext for name, role in roles.items() if (ext := role_extension(role))}
    run_ext = run_policy_extension(run_policy)
    queue = run_policy.queue if run_policy is not None else None
    if not replica_specs and not run_ext and queue is None:
        return None
    out: Extension = {"version": EXTENSION_VERSION}
    if replica_specs:
        out["replicaSpecs"] = replica_specs
    if run_ext:
        out["runPolicy"] = run_ext
    if queue is not None:
        out["queue"] = {"name": queue.name}
        if queue.priority_class:
            out["queue"]["priorityClass"] = queue.priority_class
    return out


_warned: set[str] = set()


def warn_extension_once(task_kind: str, extension: Extension, defined_at: Optional[Callable[..., Any]] = None) -> None:
    """Warn once per process and job kind that some settings need this project's backend, attributed to
    the user's code (``defined_at``, the task function, when serialization runs from flytekit alone)."""
    if task_kind in _warned:
        return
    _warned.add(task_kind)
    used = sorted(
        {key for spec in extension.get("replicaSpecs", {}).values() for key in spec}
        | {f"runPolicy.{key}" for key in extension.get("runPolicy", {})}
        | ({"queue"} if "queue" in extension else set())
        | {f"rayJob.{key}" for key in extension.get("rayJob", {})}
    )
    warn_user(
        f"{task_kind}: {', '.join(used)} travel under the '{EXTENSION_KEY}' key of the task's custom. "
        "They are honoured by the flytekitplugins-kubejobs backend (connector); stock Flyte backends "
        "ignore them and run the job without these settings.",
        ExtensionKeyWarning,
        defined_at=defined_at,
    )
