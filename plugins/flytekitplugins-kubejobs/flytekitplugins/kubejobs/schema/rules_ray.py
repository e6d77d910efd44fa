"""KubeRay rules that the RayJob / RayCluster schemas do not encode (KubeRay v1.6.0
``controllers/ray/utils/validation.go``: ``ValidateRayJobSpec``, the deletion-strategy and autoscaler rules; and the
CRDs' CEL rules that do not compare with an old object).

The SDK checks a ``RayJobConfig`` with :func:`rayjob_spec_problems` too, so each rule lives here only.

>>> [p.message for p in rayjob_spec_problems({"clusterSelector": {"ray.io/cluster": "c"}, "suspend": True,
...                                            "shutdownAfterJobFinishes": True})]
['not allowed with clusterSelector: KubeRay cannot suspend a job on an existing cluster']
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping
from typing import Any

from ..wire.kinds import KINDS
from .problems import Problem, describe_value
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

__all__ = [
    "AUTOSCALER_VERSIONS",
    "CLUSTER_SELECTOR_KEY",
    "DELETION_DEPLOYMENT_STATUSES",
    "DELETION_JOB_STATUSES",
    "DELETION_POLICIES",
    "RAY_RULES",
    "SUBMISSION_MODES",
    "MANAGED_BY",
    "check_rayjob",
    "check_raycluster",
    "rayjob_spec_problems",
    "worker_idle_timeout_problem",
]

SUBMISSION_MODES = ("K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode")
DELETION_POLICIES = ("DeleteCluster", "DeleteWorkers", "DeleteSelf", "DeleteNone")
#: What a deletion rule's condition may name (the CRD's enums).
DELETION_JOB_STATUSES = ("SUCCEEDED", "FAILED")
DELETION_DEPLOYMENT_STATUSES = ("Failed",)
AUTOSCALER_VERSIONS = ("v1", "v2")
#: The clusterSelector key KubeRay reads: the name of the RayCluster to run on.
CLUSTER_SELECTOR_KEY = "ray.io/cluster"
# A rule's TTL must not decrease along this order (workers go first, the RayJob last).
_DELETION_ORDER = ("DeleteWorkers", "DeleteCluster", "DeleteSelf")
MANAGED_BY = ("ray.io/kuberay-operator", "kueue.x-k8s.io/multikueue")
_CLUSTER_KEY = CLUSTER_SELECTOR_KEY
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
    options = as_dict(cluster.get("autoscalerOptions"))
    idle = options.get("idleTimeoutSeconds")
    if is_int(idle) and idle < 0:
        report.add((*path, "autoscalerOptions", "idleTimeoutSeconds"), f"must be >= 0, got {idle}")
    check_one_of(report, (*path, "autoscalerOptions", "version"), options.get("version"), AUTOSCALER_VERSIONS)
    if cluster.get("enableInTreeAutoscaling") is True and options.get("version") == "v2":
        _check_v2_restart_policies(report, path, cluster)
    seen: dict[str, int] = {}
    for index, group in enumerate(as_list(cluster.get("workerGroupSpecs"))):
        if isinstance(group, Mapping):
            _check_worker_group(report, (*path, "workerGroupSpecs", index), group, index, seen)
            problem = worker_idle_timeout_problem(cluster, group)
            if problem:
                report.add((*path, "workerGroupSpecs", index, "idleTimeoutSeconds"), problem)


def worker_idle_timeout_problem(cluster: Mapping[str, Any], group: Mapping[str, Any]) -> str:
    """What KubeRay refuses in a worker group's ``idleTimeoutSeconds`` ("" when nothing): a negative value, or
    a value without autoscaler v2 (``autoscalerOptions.version: v2``, or ``RAY_ENABLE_AUTOSCALER_V2`` in the
    head's Ray container, the KubeRay < 1.4 switch)."""
    idle = group.get("idleTimeoutSeconds")
    if idle is None:
        return ""
    if is_int(idle) and idle < 0:
        return f"must be >= 0, got {idle}"
    if as_dict(cluster.get("autoscalerOptions")).get("version") == "v2":
        return ""
    head = as_dict(as_dict(as_dict(cluster.get("headGroupSpec")).get("template")).get("spec"))
    containers = as_list(head.get("containers"))
    env = as_list(as_dict(containers[0]).get("env")) if containers else []
    if any(
        as_dict(e).get("name") == "RAY_ENABLE_AUTOSCALER_V2" and as_dict(e).get("value") in ("1", "true") for e in env
    ):
        return ""
    return "needs autoscaler v2 (autoscalerOptions.version: v2): only the v2 autoscaler scales groups down per group"


def _check_v2_restart_policies(report: Report, path: Path, cluster: Mapping[str, Any]) -> None:
    # Autoscaler v2 replaces failed Ray nodes itself, so KubeRay wants pods that are never restarted.
    templates: list[tuple[Path, Mapping[str, Any]]] = [(("headGroupSpec",), as_dict(cluster.get("headGroupSpec")))]
    templates += [(("workerGroupSpecs", i), as_dict(g)) for i, g in enumerate(as_list(cluster.get("workerGroupSpecs")))]
    for where, group in templates:
        restart = as_dict(as_dict(group.get("template")).get("spec")).get("restartPolicy")
        if restart not in (None, "", "Never"):
            report.add(
                (*path, *where, "template", "spec", "restartPolicy"),
                f'must be "Never" or unset with autoscaler v2, got {describe_value(restart)}',
            )


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


def _check_deletion_strategy(report: Report, spec: Mapping[str, Any], has_selector: bool) -> None:
    strategy = spec.get("deletionStrategy")
    if not isinstance(strategy, Mapping):
        return
    path = ("spec", "deletionStrategy")
    legacy = "onSuccess" in strategy or "onFailure" in strategy
    if legacy and "deletionRules" in strategy:
        report.add(path, "legacy policies (onSuccess/onFailure) and deletionRules cannot be used together")
        return
    if not ("deletionRules" in strategy or ("onSuccess" in strategy and "onFailure" in strategy)):
        report.add(path, "requires both onSuccess and onFailure, or deletionRules")
        return
    autoscaling = as_dict(spec.get("rayClusterSpec")).get("enableInTreeAutoscaling") is True
    shutdown = spec.get("shutdownAfterJobFinishes") is True

    def check_policy(where: Path, policy: object) -> None:
        if policy is None:
            report.add(where, "required field is missing")
            return
        check_one_of(report, where, policy, DELETION_POLICIES)
        if has_selector and policy in ("DeleteCluster", "DeleteWorkers"):
            report.add(where, f"{policy} is not allowed with clusterSelector: the RayCluster is not the job's")
        if autoscaling and policy == "DeleteWorkers":
            report.add(where, "DeleteWorkers is not allowed with autoscaling (enableInTreeAutoscaling)")

    if legacy:
        for side in ("onSuccess", "onFailure"):
            policy = as_dict(strategy.get(side)).get("policy")
            check_policy((*path, side, "policy"), policy)
            if shutdown and policy == "DeleteNone":
                report.add((*path, side, "policy"), "DeleteNone contradicts shutdownAfterJobFinishes: true")
        return
    if shutdown:
        report.add(("spec", "shutdownAfterJobFinishes"), "cannot be true together with deletionStrategy.deletionRules")
    rules = as_list(strategy.get("deletionRules"))
    if not rules:
        report.add((*path, "deletionRules"), "must hold at least one rule")
    ttls: dict[tuple[str, object], dict[object, int]] = {}
    for index, rule in enumerate(rules):
        where = (*path, "deletionRules", index)
        condition = as_dict(as_dict(rule).get("condition"))
        given = [k for k in ("jobStatus", "jobDeploymentStatus") if k in condition]
        if len(given) != 1:
            report.add((*where, "condition"), "needs exactly one of jobStatus and jobDeploymentStatus")
            continue
        allowed = DELETION_JOB_STATUSES if given[0] == "jobStatus" else DELETION_DEPLOYMENT_STATUSES
        check_one_of(report, (*where, "condition", given[0]), condition[given[0]], allowed)
        ttl = condition.get("ttlSeconds", 0)
        if not is_int(ttl) or ttl < 0:
            report.add((*where, "condition", "ttlSeconds"), f"must be an integer >= 0, got {describe_value(ttl)}")
            continue
        policy = as_dict(rule).get("policy")
        check_policy((*where, "policy"), policy)
        by_policy = ttls.setdefault((given[0], condition[given[0]]), {})
        if policy in by_policy:
            report.add(
                where, f"duplicate rule for {json_str(str(policy))} on {given[0]} {json_str(str(condition[given[0]]))}"
            )
        by_policy[policy] = ttl
    for (key, value), by_policy in ttls.items():
        ordered = [(p, by_policy[p]) for p in _DELETION_ORDER if p in by_policy]
        for (before, low), (after, high) in itertools.pairwise(ordered):
            if high < low:
                report.add(
                    (*path, "deletionRules"),
                    f"on {key} {json_str(str(value))}: the {after} TTL ({high}) must be >= the {before} TTL ({low})",
                )


def _check_submission(report: Report, spec: Mapping[str, Any], mode: object, has_selector: bool) -> None:
    backoff = spec.get("backoffLimit")
    if is_int(backoff) and backoff < 0:
        report.add(("spec", "backoffLimit"), f"must be >= 0, got {backoff}")
    elif is_int(backoff) and backoff > 0 and (has_selector or mode == "InteractiveMode"):
        why = "clusterSelector (an existing cluster)" if has_selector else "InteractiveMode"
        report.add(("spec", "backoffLimit"), f"must be 0 with {why}: each retry needs a new RayCluster")
    if has_selector and mode == "SidecarMode":
        report.add(("spec", "submissionMode"), "SidecarMode cannot be used with clusterSelector (an existing cluster)")
    if has_selector and spec.get("suspend") is True:
        report.add(
            ("spec", "suspend"), "not allowed with clusterSelector: KubeRay cannot suspend a job on an existing cluster"
        )
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
    _check_rayjob_spec(report, spec)
    check_cluster_spec(report, ("spec", "rayClusterSpec"), spec.get("rayClusterSpec"))


def _check_rayjob_spec(report: Report, spec: Mapping[str, Any]) -> None:
    """The RayJob-level rules (``ValidateRayJobSpec`` without ``ValidateRayClusterSpec``)."""
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
    _check_deletion_strategy(report, spec, has_selector)


def rayjob_spec_problems(spec: Mapping[str, Any]) -> list[Problem]:
    """The RayJob-level rule violations of ``spec`` (a RayJob ``spec``; its ``rayClusterSpec`` is read only for
    ``enableInTreeAutoscaling`` and the head's ``restartPolicy``). Paths start with ``spec``."""
    report = Report()
    _check_rayjob_spec(report, spec)
    return report.problems


def check_raycluster(obj: Mapping[str, Any], report: Report) -> None:
    check_metadata(report, obj, dns1035=True, max_length=_RAYCLUSTER_NAME_LIMIT)
    check_cluster_spec(report, ("spec",), as_dict(obj.get("spec")))


RAY_RULES: dict[tuple[str, str, str], Callable[[Mapping[str, Any], Report], None]] = {
    _RAY.schema_key: check_rayjob,
    (_RAY.group, _RAY.version, "RayCluster"): check_raycluster,
}
