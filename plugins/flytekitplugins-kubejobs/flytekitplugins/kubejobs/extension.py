"""Building the ``kubejobs`` extension key from the shared config types (its shape: ``wire.extension``).

Only what the flyteidl messages cannot carry goes there; ``build_extension`` returns None when nothing
does, so a config that needs no extension serializes exactly as the official plugins do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

from .policies import RunPolicy
from .roles import ReplicaRole
from .userwarnings import ComputeTemplateNameWarning, ExtensionKeyWarning, warn_user
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
    "template_names",
]


def role_extension(role: ReplicaRole) -> RoleExtension:
    """What of ``role`` the IDL cannot carry; empty when the IDL carries all of it."""
    ext: RoleExtension = {}
    if role.template_name is not None:
        ext["computeTemplate"] = role.template_name
    template = role.template_object
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


def template_names(extension: Extension) -> list[tuple[str, str]]:
    """``(role or group, template name)`` for every compute template the extension names, in wire order."""
    found = [
        (role, spec["computeTemplate"])
        for role, spec in extension.get("replicaSpecs", {}).items()
        if "computeTemplate" in spec
    ]
    groups = extension.get("rayGroups", {})
    if "computeTemplate" in groups.get("head", {}):
        found.append(("head group", groups["head"]["computeTemplate"]))
    found += [
        (f"worker group {name!r}", spec["computeTemplate"])
        for name, spec in groups.get("workers", {}).items()
        if "computeTemplate" in spec
    ]
    return found


_warned: set[str] = set()
_warned_names: set[str] = set()


def _warn_template_names_once(
    task_kind: str, extension: Extension, defined_at: Optional[Callable[..., Any]] = None
) -> None:
    named = template_names(extension)
    if not named or task_kind in _warned_names:
        return
    _warned_names.add(task_kind)
    listed = ", ".join(f"{owner} -> {name!r}" for owner, name in named)
    warn_user(
        f"{task_kind}: compute templates named by string ({listed}) are stored in the cluster and resolved only by "
        "the flytekitplugins-kubejobs connector. A stock Flyte backend ignores the names and runs these roles "
        "WITHOUT the templates' resources, tolerations and node selector: run this task through the connector "
        "(or pass ComputeTemplate objects).",
        ComputeTemplateNameWarning,
        defined_at=defined_at,
    )


def warn_extension_once(task_kind: str, extension: Extension, defined_at: Optional[Callable[..., Any]] = None) -> None:
    """Warn once per process and job kind that some settings need this project's backend, attributed to
    the user's code (``defined_at``, the task function, when serialization runs from flytekit alone). Compute
    templates named by string get a warning of their own (``ComputeTemplateNameWarning``), once per job kind."""
    _warn_template_names_once(task_kind, extension, defined_at)
    if task_kind in _warned:
        return
    used = sorted(
        {key for spec in extension.get("replicaSpecs", {}).values() for key in spec if key != "computeTemplate"}
        | {f"runPolicy.{key}" for key in extension.get("runPolicy", {})}
        | ({"queue"} if "queue" in extension else set())
        | {f"rayJob.{key}" for key in extension.get("rayJob", {})}
    )
    if not used:
        return
    _warned.add(task_kind)
    warn_user(
        f"{task_kind}: {', '.join(used)} travel under the '{EXTENSION_KEY}' key of the task's custom. "
        "They are honoured by the flytekitplugins-kubejobs backend (connector); stock Flyte backends "
        "ignore them and run the job without these settings.",
        ExtensionKeyWarning,
        defined_at=defined_at,
    )
