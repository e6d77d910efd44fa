"""Reading the ``kubejobs`` extension key of a custom (shape in ``flytekitplugins.kubejobs.extension``).

Everything is checked here, so a malformed extension is a ``BuildError`` naming ``kubejobs.<path>``
rather than an object the API server rejects later.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Collection, Mapping
from typing import Any, Optional

from ..schema.rules_kubeflow import LAUNCHER_CREATION_POLICIES, MPI_IMPLEMENTATIONS
from ..schema.rules_ray import (
    AUTOSCALER_VERSIONS,
    CLUSTER_SELECTOR_KEY,
    DELETION_POLICIES,
    SUBMISSION_MODES,
)
from ..wire.extension import (
    EXTENSION_KEY,
    EXTENSION_VERSION,
    MPI_JOB_KEYS,
    QUEUE_KEYS,
    RAY_AUTOSCALER_KEYS,
    RAY_GROUP_KEYS,
    RAY_JOB_KEYS,
    ROLE_KEYS,
    RUN_POLICY_KEYS,
    SECTIONS,
)
from ..wire.fields import INT32_MAX
from ..wire.k8ssyntax import check_dns_label
from ..wire.kinds import JobKind
from ..wire.quantity import check_quantity, is_integer_resource
from .errors import BuildError

__all__ = ["parse_extension", "apply_role_extension", "apply_run_policy_extension"]


def _dict(path: str, value: object) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise BuildError(f"{path} must be an object, got {value!r}")
    return dict(value)


def _section(path: str, value: object, known: Collection[str]) -> dict[str, Any]:
    """A deep copy of the object ``value``, which may hold only the keys ``known``."""
    section = copy.deepcopy(_dict(path, value))
    unknown = set(section) - set(known)
    if unknown:
        raise BuildError(f"{path} has unknown keys {sorted(unknown)}; known: {sorted(known)}")
    return section


def _list_of_dicts(path: str, value: object, *, named: bool = False) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise BuildError(f"{path} must be a list, got {value!r}")
    out = []
    for i, item in enumerate(value):
        item = _dict(f"{path}[{i}]", item)
        if named and (not isinstance(item.get("name"), str) or not item["name"]):
            raise BuildError(f"{path}[{i}] needs a non-empty name, got {item!r}")
        out.append(item)
    return out


def _str_map(path: str, value: object) -> dict[str, str]:
    out = _dict(path, value)
    for key, item in out.items():
        if not isinstance(item, str):
            raise BuildError(f"{path}[{key!r}] must be a string, got {item!r}")
    return out


def _role(path: str, value: object) -> dict[str, Any]:
    spec = _section(path, value, ROLE_KEYS)
    if "nodeSelector" in spec:
        _str_map(f"{path}.nodeSelector", spec["nodeSelector"])
    for key in ("tolerations", "volumeMounts"):
        if key in spec:
            _list_of_dicts(f"{path}.{key}", spec[key])
    for key in ("env", "volumes"):
        if key in spec:
            _list_of_dicts(f"{path}.{key}", spec[key], named=True)
    if "affinity" in spec:
        _dict(f"{path}.affinity", spec["affinity"])
    if "gpuResourceName" in spec and (not isinstance(spec["gpuResourceName"], str) or not spec["gpuResourceName"]):
        raise BuildError(f"{path}.gpuResourceName must be a non-empty string, got {spec['gpuResourceName']!r}")
    if "resources" in spec:
        _resource_maps(f"{path}.resources", spec["resources"])
    if "computeTemplate" in spec:
        _template_name(f"{path}.computeTemplate", spec["computeTemplate"])
    return spec


def _resource_maps(path: str, value: object) -> None:
    resources = _dict(path, value)
    for side, amounts in resources.items():
        if side not in ("requests", "limits"):
            raise BuildError(f"{path} has unknown key {side!r}; known: ['limits', 'requests']")
        for name, quantity in _str_map(f"{path}.{side}", amounts).items():
            try:
                check_quantity(f"{path}.{side}[{name!r}]", quantity, integer=is_integer_resource(name))
            except (TypeError, ValueError) as e:
                raise BuildError(str(e)) from e


def _template_name(path: str, value: object) -> None:
    try:
        check_dns_label(path, value)
    except ValueError as e:
        raise BuildError(str(e)) from None


def _ray_group(path: str, value: object, *, head: bool = False) -> dict[str, Any]:
    keys = RAY_GROUP_KEYS - {"idleTimeoutSeconds"} if head else RAY_GROUP_KEYS  # the head is never scaled down
    group = _section(path, value, keys)
    if "explicitResources" in group and "computeTemplate" not in group:
        raise BuildError(f"{path}.explicitResources needs a computeTemplate (they only qualify one)")
    if not group:
        raise BuildError(f"{path} is empty")
    if "computeTemplate" in group:
        _template_name(f"{path}.computeTemplate", group["computeTemplate"])
    if "explicitResources" in group:
        _resource_maps(f"{path}.explicitResources", group["explicitResources"])
    if "idleTimeoutSeconds" in group:
        _int(f"{path}.idleTimeoutSeconds", group["idleTimeoutSeconds"], minimum=0)
    return group


def _ray_groups(path: str, value: object) -> dict[str, Any]:
    groups = _dict(path, value)
    unknown = set(groups) - {"head", "workers"}
    if unknown:
        raise BuildError(f"{path} has unknown keys {sorted(unknown)}; known: ['head', 'workers']")
    out: dict[str, Any] = {"workers": {}}
    if "head" in groups:
        out["head"] = _ray_group(f"{path}.head", groups["head"], head=True)
    for name, spec in _dict(f"{path}.workers", groups.get("workers") or {}).items():
        out["workers"][name] = _ray_group(f"{path}.workers.{name}", spec)
    return out


def parse_extension(custom: Mapping[str, Any], kind: JobKind) -> dict[str, Any]:
    """The checked extension of ``custom`` (``{}`` when absent). Every key is honoured or refused: a section
    the kind does not honour (``JobKind.extension_sections``) or an unknown key is a ``BuildError``."""
    raw = custom.get(EXTENSION_KEY)
    if raw is None:
        return {}
    ext = _dict(EXTENSION_KEY, raw)
    version = ext.get("version", EXTENSION_VERSION)
    if version != EXTENSION_VERSION:
        raise BuildError(f"{EXTENSION_KEY}.version {version!r} is not supported (this backend reads version 1)")
    for key in sorted(set(ext) - {"version"}):
        if key not in SECTIONS:
            raise BuildError(f"{EXTENSION_KEY} has unknown key {key!r}; known: {sorted(SECTIONS | {'version'})}")
        if key not in kind.extension_sections:
            honoured = sorted(kind.extension_sections) or "none"
            hint = " (the mpi-operator's kubeflow.org/v2beta1 MPIJob takes it: plugins.mpi.operator)"
            raise BuildError(
                f"{EXTENSION_KEY}.{key} is not supported for {kind.kind} {kind.api_version} (it honours: {honoured}); "
                f"the setting would be dropped, so the task is refused{hint if key == 'mpiJob' else ''}"
            )
    roles = kind.role_names
    out: dict[str, Any] = {"replicaSpecs": {}, "runPolicy": {}}
    for name, spec in _dict(f"{EXTENSION_KEY}.replicaSpecs", ext.get("replicaSpecs") or {}).items():
        if name not in roles:
            raise BuildError(f"{EXTENSION_KEY}.replicaSpecs has unknown role {name!r}; this job has {list(roles)}")
        out["replicaSpecs"][name] = _role(f"{EXTENSION_KEY}.replicaSpecs.{name}", spec)
    run = _dict(f"{EXTENSION_KEY}.runPolicy", ext.get("runPolicy") or {})
    path = f"{EXTENSION_KEY}.runPolicy"
    for key, item in run.items():
        if key == "suspend":
            if not isinstance(item, bool):
                raise BuildError(f"{path}.suspend must be true or false, got {item!r}")
        elif key == "backoffLimit":
            if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item <= INT32_MAX:
                raise BuildError(f"{path}.backoffLimit must be an int >= 0, got {item!r}")
        elif key == "schedulingPolicy":
            item = copy.deepcopy(_dict(f"{path}.schedulingPolicy", item))
        else:
            raise BuildError(f"{path} has unknown key {key!r}; known: {sorted(RUN_POLICY_KEYS)}")
        out["runPolicy"][key] = item
    if "queue" in ext:
        out["queue"] = _queue(f"{EXTENSION_KEY}.queue", ext["queue"])
    if "rayGroups" in ext:
        out["rayGroups"] = _ray_groups(f"{EXTENSION_KEY}.rayGroups", ext["rayGroups"])
    if "rayJob" in ext:
        out["rayJob"] = _ray_job(f"{EXTENSION_KEY}.rayJob", ext["rayJob"])
    if "mpiJob" in ext:
        out["mpiJob"] = _mpi_job(f"{EXTENSION_KEY}.mpiJob", ext["mpiJob"])
    return out


def _mpi_job(path: str, value: object) -> dict[str, Any]:
    section = _section(path, value, MPI_JOB_KEYS)
    if "launcherCreationPolicy" in section:
        _one_of(f"{path}.launcherCreationPolicy", section["launcherCreationPolicy"], LAUNCHER_CREATION_POLICIES)
    if "mpiImplementation" in section:
        _one_of(f"{path}.mpiImplementation", section["mpiImplementation"], MPI_IMPLEMENTATIONS)
    mount = section.get("sshAuthMountPath")
    if mount is not None and (not isinstance(mount, str) or not mount.startswith("/") or len(mount) > 4096):
        raise BuildError(f"{path}.sshAuthMountPath must be an absolute path, got {mount!r:.200}")
    if "runLauncherAsWorker" in section and not isinstance(section["runLauncherAsWorker"], bool):
        raise BuildError(f"{path}.runLauncherAsWorker must be true or false, got {section['runLauncherAsWorker']!r}")
    return section


_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_DELETION_KEYS = ("onSuccess", "onFailure", "deletionRules")


def _int(path: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= INT32_MAX:
        raise BuildError(f"{path} must be an int >= {minimum}, got {value!r}")
    return value


def _number(path: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise BuildError(f"{path} must be a number >= 0, got {value!r}")
    return value


def _one_of(path: str, value: object, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise BuildError(f"{path} must be one of {list(allowed)}, got {value!r}")
    return str(value)


def _deletion_strategy(path: str, value: object) -> dict[str, Any]:
    strategy = _section(path, value, _DELETION_KEYS)
    policies = [
        (f"{path}.{side}.policy", _dict(f"{path}.{side}", strategy[side]).get("policy"))
        for side in ("onSuccess", "onFailure")
        if side in strategy
    ]
    for i, rule in enumerate(_list_of_dicts(f"{path}.deletionRules", strategy.get("deletionRules", []))):
        unknown = set(rule) - {"policy", "condition"}
        if unknown:
            raise BuildError(f"{path}.deletionRules[{i}] has unknown keys {sorted(unknown)}; known: condition, policy")
        condition = _dict(f"{path}.deletionRules[{i}].condition", rule.get("condition"))
        unknown = set(condition) - {"jobStatus", "jobDeploymentStatus", "ttlSeconds"}
        if unknown:
            raise BuildError(f"{path}.deletionRules[{i}].condition has unknown keys {sorted(unknown)}")
        if "ttlSeconds" in condition:
            _int(f"{path}.deletionRules[{i}].condition.ttlSeconds", condition["ttlSeconds"], 0)
        policies.append((f"{path}.deletionRules[{i}].policy", rule.get("policy")))
    for where, policy in policies:
        _one_of(where, policy, DELETION_POLICIES)
        if policy == "DeleteSelf":
            # The RayJob is where the connector reads the task's end from: deleting it turns the outcome into
            # ResourceDeletedExternally (a retryable failure) and re-runs a finished task.
            raise BuildError(
                f"{where} DeleteSelf is refused: the connector reads the task's outcome from the RayJob, so a "
                "deleted RayJob would be reported as deleted outside Flyte; use DeleteCluster"
            )
    return strategy


def _submitter_pod_template(path: str, value: object) -> dict[str, Any]:
    # Only the submitter container's resources: the rest of the submitter pod is the task's pod.
    template = _dict(path, value)
    spec = _dict(f"{path}.spec", template.get("spec"))
    containers = _list_of_dicts(f"{path}.spec.containers", spec.get("containers"))
    if (
        set(template) != {"spec"}
        or set(spec) != {"containers"}
        or len(containers) != 1
        or set(containers[0]) != {"resources"}
    ):
        raise BuildError(
            f"{path} may hold only spec.containers[0].resources (the submitter container's resources), "
            f"got {value!r:.300}"
        )
    resources = _dict(f"{path}.spec.containers[0].resources", containers[0]["resources"])
    for side, amounts in resources.items():
        if side not in ("requests", "limits"):
            raise BuildError(f"{path}.spec.containers[0].resources has unknown key {side!r}; known: limits, requests")
        for name, quantity in _str_map(f"{path}.spec.containers[0].resources.{side}", amounts).items():
            try:
                check_quantity(
                    f"{path}.spec.containers[0].resources.{side}[{name!r}]", quantity, integer=is_integer_resource(name)
                )
            except (TypeError, ValueError) as e:
                raise BuildError(str(e)) from e
    return {"spec": {"containers": [{"resources": copy.deepcopy(resources)}]}}


def _ray_job(path: str, value: object) -> dict[str, Any]:
    section = _dict(path, value)
    out: dict[str, Any] = {}
    for key, item in section.items():
        where = f"{path}.{key}"
        if key == "submissionMode":
            out[key] = _one_of(where, item, SUBMISSION_MODES)
        elif key == "deletionStrategy":
            out[key] = _deletion_strategy(where, item)
        elif key == "backoffLimit":
            out[key] = _int(where, item, 0)
        elif key in ("activeDeadlineSeconds", "preRunningDeadlineSeconds"):
            out[key] = _int(where, item, 1)
        elif key in ("entrypointNumCpus", "entrypointNumGpus"):
            out[key] = _number(where, item)
        elif key == "entrypointResources":
            try:
                parsed = json.loads(item) if isinstance(item, str) else None
            except ValueError:
                parsed = None
            if not isinstance(parsed, dict) or not parsed:
                raise BuildError(f"{where} must be a JSON object string of resource amounts, got {item!r:.200}")
            for name, amount in parsed.items():
                _number(f"{where}[{name!r}]", amount)
            out[key] = item
        elif key == "submitterPodTemplate":
            out[key] = _submitter_pod_template(where, item)
        elif key == "submitterConfig":
            config = _dict(where, item)
            if set(config) - {"backoffLimit"}:
                raise BuildError(
                    f"{where} has unknown keys {sorted(set(config) - {'backoffLimit'})}; known: backoffLimit"
                )
            out[key] = {k: _int(f"{where}.{k}", v, 0) for k, v in config.items()}
        elif key == "suspend":
            if not isinstance(item, bool):
                raise BuildError(f"{where} must be true or false, got {item!r}")
            out[key] = item
        elif key == "clusterSelector":
            selector = _str_map(where, item)
            try:
                check_dns_label(f"{where}[{CLUSTER_SELECTOR_KEY!r}]", selector.get(CLUSTER_SELECTOR_KEY))
            except ValueError as e:
                raise BuildError(str(e)) from None
            out[key] = selector
        elif key == "rayClusterSpec":
            cluster = _dict(where, item)
            if set(cluster) != {"autoscalerOptions"}:
                raise BuildError(f"{where} may hold only autoscalerOptions, got keys {sorted(cluster)}")
            options = _dict(f"{where}.autoscalerOptions", cluster["autoscalerOptions"])
            unknown = set(options) - RAY_AUTOSCALER_KEYS
            if unknown:
                raise BuildError(
                    f"{where}.autoscalerOptions has unknown keys {sorted(unknown)}; "
                    f"known: {sorted(RAY_AUTOSCALER_KEYS)}"
                )
            if "version" in options:
                _one_of(f"{where}.autoscalerOptions.version", options["version"], AUTOSCALER_VERSIONS)
            if "imagePullPolicy" in options:
                _one_of(f"{where}.autoscalerOptions.imagePullPolicy", options["imagePullPolicy"], _PULL_POLICIES)
            out[key] = {"autoscalerOptions": dict(options)}
        else:
            raise BuildError(f"{path} has unknown key {key!r}; known: {sorted(RAY_JOB_KEYS)}")
    return out


def _queue(path: str, value: object) -> dict[str, str]:
    queue = _section(path, value, QUEUE_KEYS)
    try:
        check_dns_label(f"{path}.name", queue.get("name"))
        if "priorityClass" in queue:
            check_dns_label(f"{path}.priorityClass", queue["priorityClass"])
    except ValueError as e:
        raise BuildError(str(e)) from None
    return dict(queue)


def apply_role_extension(spec: dict[str, Any], primary: dict[str, Any], ext: Optional[Mapping[str, Any]]) -> None:
    """Lay a role's extension over its pod spec: node selector keys win, lists are appended,
    an affinity replaces the kinds of affinity it names."""
    if not ext:
        return
    if "nodeSelector" in ext:
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **ext["nodeSelector"]}
    if "tolerations" in ext:
        spec["tolerations"] = [*(spec.get("tolerations") or []), *ext["tolerations"]]
    if "affinity" in ext:
        spec["affinity"] = {**(spec.get("affinity") or {}), **ext["affinity"]}
    if "volumes" in ext:
        spec["volumes"] = [*(spec.get("volumes") or []), *ext["volumes"]]
    if "env" in ext:
        primary["env"] = [*(primary.get("env") or []), *ext["env"]]
    if "volumeMounts" in ext:
        primary["volumeMounts"] = [*(primary.get("volumeMounts") or []), *ext["volumeMounts"]]


def apply_run_policy_extension(run_policy: dict[str, Any], ext: Mapping[str, Any]) -> None:
    run_policy.update(copy.deepcopy(dict(ext.get("runPolicy") or {})))
