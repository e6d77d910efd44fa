"""KubeRay rules that the RayJob / RayCluster schemas do not encode (KubeRay v1.7.0 ``utils/validation.go``
and the CRDs' CEL rules that do not compare with an old object)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ..wire.kinds import KINDS
from .problems import describe_value
from .rules_common import (
    Report,
    as_dict,
    as_list,
    check_metadata,
    check_one_of,
    check_pod_template,
    is_int,
    json_str,
)

__all__ = ["RAY_RULES", "SUBMISSION_MODES", "MANAGED_BY", "check_rayjob", "check_raycluster"]

SUBMISSION_MODES = ("K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode")
MANAGED_BY = ("ray.io/kuberay-operator", "kueue.x-k8s.io/multikueue")
_CLUSTER_KEY = "ray.io/cluster"
_RAY = KINDS["ray"]
# Schema defaults of workerGroupSpecs[].minReplicas / maxReplicas (the API server applies them).
_MIN_DEFAULT, _MAX_DEFAULT = 0, 2**31 - 1
_RAYCLUSTER_NAME_LIMIT = 63

Path = tuple[Any, ...]


def _ray_container_first(report: Report, path: Path, containers: list[Mapping[str, Any]], name: str) -> None:
    # KubeRay injects `ray start` into containers[0]; a Ray container anywhere else never starts Ray.
    names = [c.get("name") for c in containers]
    if name in names and names[0] != name:
        index = names.index(name)
        report.add(
            (*path, "spec", "containers", index),
            f"the {json_str(name)} container must be the first container: KubeRay runs `ray start` in containers[0]",
        )


def _check_start_params(report: Report, path: Path, group: Mapping[str, Any]) -> None:
    params = as_dict(group.get("rayStartParams"))
    if "labels" in params:
        report.add(
            (*path, "rayStartParams", "labels"), "not allowed: set Ray node labels with the group's labels field"
        )
    if group.get("resources") and "resources" in params:
        report.add((*path, "rayStartParams", "resources"), "not allowed together with the group's resources field")


def check_cluster_spec(report: Report, path: Path, cluster: object) -> None:
    """A RayClusterSpec (of a RayCluster, or a RayJob's ``rayClusterSpec``)."""
    if not isinstance(cluster, Mapping):
        return
    head = cluster.get("headGroupSpec")
    if isinstance(head, Mapping):
        head_path = (*path, "headGroupSpec")
        containers = check_pod_template(report, (*head_path, "template"), head.get("template"))
        _ray_container_first(report, (*head_path, "template"), containers, "ray-head")
        _check_start_params(report, head_path, head)
    else:
        report.add((*path, "headGroupSpec"), "required field is missing")
    check_one_of(report, (*path, "managedBy"), cluster.get("managedBy"), MANAGED_BY)
    idle = as_dict(cluster.get("autoscalerOptions")).get("idleTimeoutSeconds")
    if is_int(idle) and idle < 0:
        report.add((*path, "autoscalerOptions", "idleTimeoutSeconds"), f"must be >= 0, got {idle}")
    seen: dict[str, int] = {}
    for index, group in enumerate(as_list(cluster.get("workerGroupSpecs"))):
        if isinstance(group, Mapping):
            _check_worker_group(report, (*path, "workerGroupSpecs", index), group, index, seen)


def _check_worker_group(report: Report, path: Path, group: Mapping[str, Any], index: int, seen: dict[str, int]) -> None:
    name = group.get("groupName")
    if isinstance(name, str):
        if name in seen:
            report.add((*path, "groupName"), f"duplicate worker group name {json_str(name)} (also at [{seen[name]}])")
        else:
            seen[name] = index
        if not name or len(name) > 63 or not all(ch.isalnum() or ch in "-_." for ch in name):
            report.add(
                (*path, "groupName"), f"{json_str(name)} must be a valid label value (KubeRay labels pods with it)"
            )
    containers = check_pod_template(report, (*path, "template"), group.get("template"))
    _ray_container_first(report, (*path, "template"), containers, "ray-worker")
    _check_start_params(report, path, group)
    low = group.get("minReplicas", _MIN_DEFAULT)
    high = group.get("maxReplicas", _MAX_DEFAULT)
    replicas = group.get("replicas")
    for field, value in (("minReplicas", low), ("maxReplicas", high), ("replicas", replicas)):
        if is_int(value) and value < 0:
            report.add((*path, field), f"must be >= 0, got {value}")
    if is_int(low) and is_int(high) and low > high:
        report.add((*path, "minReplicas"), f"minReplicas {low} is more than maxReplicas {high}")
    elif is_int(replicas) and is_int(low) and is_int(high) and not low <= replicas <= high:
        report.add((*path, "replicas"), f"{replicas} is outside [minReplicas, maxReplicas] = [{low}, {high}]")


def _check_deletion_strategy(report: Report, spec: Mapping[str, Any]) -> None:
    strategy = spec.get("deletionStrategy")
    if not isinstance(strategy, Mapping):
        return
    path = ("spec", "deletionStrategy")
    legacy = "onSuccess" in strategy or "onFailure" in strategy
    if legacy and "deletionRules" in strategy:
        report.add(path, "legacy policies (onSuccess/onFailure) and deletionRules cannot be used together")
    elif not ("deletionRules" in strategy or ("onSuccess" in strategy and "onFailure" in strategy)):
        report.add(path, "requires both onSuccess and onFailure, or deletionRules")
    if "deletionRules" in strategy and spec.get("shutdownAfterJobFinishes") is True:
        report.add(("spec", "shutdownAfterJobFinishes"), "cannot be true together with deletionStrategy.deletionRules")
    for index, rule in enumerate(as_list(strategy.get("deletionRules"))):
        condition = as_dict(as_dict(rule).get("condition"))
        given = [k for k in ("jobStatus", "jobDeploymentStatus") if k in condition]
        if len(given) != 1:
            report.add(
                (*path, "deletionRules", index, "condition"),
                "needs exactly one of jobStatus and jobDeploymentStatus",
            )


def _check_submission(report: Report, spec: Mapping[str, Any], mode: object, has_selector: bool) -> None:
    backoff = spec.get("backoffLimit")
    if is_int(backoff) and backoff < 0:
        report.add(("spec", "backoffLimit"), f"must be >= 0, got {backoff}")
    elif is_int(backoff) and backoff > 0 and (has_selector or mode == "InteractiveMode"):
        why = "clusterSelector (an existing cluster)" if has_selector else "InteractiveMode"
        report.add(("spec", "backoffLimit"), f"must be 0 with {why}: each retry needs a new RayCluster")
    if mode == "SidecarMode":
        for field in ("submitterPodTemplate", "submitterConfig"):
            if spec.get(field) is not None:
                report.add(("spec", field), "not allowed in SidecarMode (the submitter runs as a sidecar of the head)")
        head_template = as_dict(as_dict(as_dict(spec.get("rayClusterSpec")).get("headGroupSpec")).get("template"))
        restart = as_dict(head_template.get("spec")).get("restartPolicy")
        if restart not in (None, "Never"):
            report.add(
                ("spec", "rayClusterSpec", "headGroupSpec", "template", "spec", "restartPolicy"),
                f'must be "Never" in SidecarMode, got {describe_value(restart)}',
            )
    for field in ("activeDeadlineSeconds", "preRunningDeadlineSeconds"):
        value = spec.get(field)
        if is_int(value) and value <= 0:
            report.add(("spec", field), f"must be > 0 when set, got {value}")


def _check_encoded_fields(report: Report, spec: Mapping[str, Any]) -> None:
    runtime_env = spec.get("runtimeEnvYAML")
    if isinstance(runtime_env, str) and runtime_env.strip():
        import yaml

        try:
            parsed = yaml.safe_load(runtime_env)
        except yaml.YAMLError as e:
            report.add(("spec", "runtimeEnvYAML"), f"is not valid YAML: {str(e).splitlines()[0]}")
        else:
            if not isinstance(parsed, dict):
                report.add(("spec", "runtimeEnvYAML"), f"must be a YAML mapping, got {describe_value(parsed)}")
    resources = spec.get("entrypointResources")
    if isinstance(resources, str) and resources.strip():
        try:
            parsed = json.loads(resources)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            report.add(("spec", "entrypointResources"), 'must be a JSON object string, e.g. "{\\"custom\\": 1}"')


def check_rayjob(obj: Mapping[str, Any], report: Report) -> None:
    check_metadata(report, obj, dns1035=True, max_length=_RAY.max_name_length)
    spec = as_dict(obj.get("spec"))
    mode = spec.get("submissionMode", "K8sJobMode")
    check_one_of(report, ("spec", "submissionMode"), mode, SUBMISSION_MODES)
    check_one_of(report, ("spec", "managedBy"), spec.get("managedBy"), MANAGED_BY)
    shutdown = spec.get("shutdownAfterJobFinishes") is True
    if spec.get("suspend") is True and not shutdown:
        report.add(("spec", "suspend"), "requires shutdownAfterJobFinishes: true")
    ttl = spec.get("ttlSecondsAfterFinished")
    if is_int(ttl) and ttl < 0:
        report.add(("spec", "ttlSecondsAfterFinished"), f"must be >= 0, got {ttl}")
    elif is_int(ttl) and ttl > 0 and not shutdown:
        report.add(
            ("spec", "ttlSecondsAfterFinished"),
            f"{ttl} requires shutdownAfterJobFinishes: true (KubeRay rejects it; the cluster would never be deleted)",
        )
    cluster, selector = spec.get("rayClusterSpec"), spec.get("clusterSelector")
    has_selector = isinstance(selector, Mapping) and bool(selector)
    if cluster is not None and has_selector:
        report.add(("spec", "clusterSelector"), "cannot be set together with rayClusterSpec")
    elif cluster is None and not has_selector:
        report.add(("spec", "rayClusterSpec"), "required (or clusterSelector to use an existing RayCluster)")
    if has_selector and not as_dict(selector).get(_CLUSTER_KEY):
        report.add(("spec", "clusterSelector", _CLUSTER_KEY), "required: the name of the existing RayCluster")
    _check_submission(report, spec, mode, has_selector)
    _check_encoded_fields(report, spec)
    _check_deletion_strategy(report, spec)
    check_cluster_spec(report, ("spec", "rayClusterSpec"), cluster)


def check_raycluster(obj: Mapping[str, Any], report: Report) -> None:
    check_metadata(report, obj, dns1035=True, max_length=_RAYCLUSTER_NAME_LIMIT)
    check_cluster_spec(report, ("spec",), as_dict(obj.get("spec")))


RAY_RULES: dict[tuple[str, str, str], Callable[[Mapping[str, Any], Report], None]] = {
    _RAY.schema_key: check_rayjob,
    (_RAY.group, _RAY.version, "RayCluster"): check_raycluster,
}
