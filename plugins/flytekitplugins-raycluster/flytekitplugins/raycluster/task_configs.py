"""Ray task configuration: the flytekitplugins-ray classes (same fields, order and defaults), validated.

Everything is checked where the config is written; a bad value raises ``ValueError``/``TypeError`` naming
``Class.field`` and the value. Additions over flytekitplugins-ray are keyword-only (``compute_template``, and
the RayJob settings flyteidl cannot carry: ``submission_mode``, ``deletion_strategy``, ``backoff_limit``...,
which travel under the ``kubejobs`` extension key; see the package README's table).

>>> cfg = RayJobConfig(worker_node_config=[WorkerNodeConfig("cpu", replicas=2, max_replicas=4)])
>>> g = cfg.worker_node_config[0]
>>> (g.effective_min_replicas, g.replicas, g.effective_max_replicas)
(2, 2, 4)
"""

from __future__ import annotations

import enum
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, ClassVar, Optional, Union

from flytekit import PodTemplate, Resources
from flytekitplugins.kubejobs.compute import ComputeTemplate
from flytekitplugins.kubejobs.resources import normalize_resources, resources_to_k8s
from flytekitplugins.kubejobs.schema.problems import format_path
from flytekitplugins.kubejobs.schema.rules_ray import (
    AUTOSCALER_VERSIONS,
    CLUSTER_SELECTOR_KEY,
    DELETION_DEPLOYMENT_STATUSES,
    DELETION_JOB_STATUSES,
    DELETION_POLICIES,
    rayjob_spec_problems,
    worker_idle_timeout_problem,
)
from flytekitplugins.kubejobs.userwarnings import warn_user
from flytekitplugins.kubejobs.wire.compute import check_template_name
from flytekitplugins.kubejobs.wire.extension import RayJobExtension
from flytekitplugins.kubejobs.wire.fields import (
    check_bool,
    check_int,
    check_optional_bool,
    check_optional_int,
    check_optional_str,
    check_str,
    check_str_map,
    coerce_enum,
)
from flytekitplugins.kubejobs.wire.k8ssyntax import check_dns_label, check_env_names, check_image

from .pods import RAY_HEAD_CONTAINER, RAY_WORKER_CONTAINER, group_k8s_pod
from .runtime_env import check_runtime_env

__all__ = [
    "UpscalingMode",
    "HeadNodeConfig",
    "WorkerNodeConfig",
    "AutoscalerOptionsConfig",
    "RayJobConfig",
    "SubmissionMode",
    "DeletionRule",
    "DeletionStrategy",
]

# KubeRay names pods and services after groups: a DNS-1123 label.
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class UpscalingMode(enum.IntEnum):
    """The autoscaler's upscaling mode; values are flyteidl's ``AutoscalerOptions.UpscalingMode`` numbers,
    so the official plugin's ints compare equal."""

    UNSPECIFIED = 0
    DEFAULT = 1
    AGGRESSIVE = 2
    CONSERVATIVE = 3

    @classmethod
    def coerce(cls, field: str, value: object) -> UpscalingMode:
        """A member, its int, or its name in any case (also the proto's ``UPSCALING_MODE_`` spelling)."""
        if isinstance(value, str) and value.strip().upper().startswith("UPSCALING_MODE_"):
            value = value.strip()[len("UPSCALING_MODE_") :]
        return coerce_enum(field, cls, value)


_Mode = UpscalingMode  # the annotation below must not resolve to the class attribute of the same name


class SubmissionMode(str, enum.Enum):
    """How KubeRay submits the Ray job (RayJob ``submissionMode``); a value or a name, in any case."""

    K8S_JOB = "K8sJobMode"  #: a submitter Kubernetes Job runs ``ray job submit`` (KubeRay's default)
    HTTP = "HTTPMode"  #: the operator submits through the dashboard's HTTP API: no submitter pod
    SIDECAR = "SidecarMode"  #: a submitter container in the head pod
    INTERACTIVE = "InteractiveMode"  #: nothing is submitted: KubeRay waits for a job id (``spec.jobId``)

    @classmethod
    def coerce(cls, field: str, value: object) -> SubmissionMode:
        if isinstance(value, str):
            for member in cls:
                if value.strip().lower() == member.value.lower():
                    return member
        return coerce_enum(field, cls, value)


_POLICIES = tuple(p for p in DELETION_POLICIES if p != "DeleteSelf")


def _check_policy(field: str, value: object) -> str:
    if value == "DeleteSelf":
        raise ValueError(
            f"{field}='DeleteSelf' is refused: the connector reads the task's outcome from the RayJob, so deleting "
            "it would report the task as deleted outside Flyte; use 'DeleteCluster'"
        )
    if value not in _POLICIES:
        raise ValueError(f"{field} must be one of {list(_POLICIES)}, got {value!r}")
    return str(value)


@dataclass(frozen=True)
class DeletionRule:
    """One KubeRay deletion rule: delete ``policy``'s resources ``ttl_seconds`` after the job reaches
    ``job_status`` (``"SUCCEEDED"``/``"FAILED"``) or ``job_deployment_status`` (``"Failed"``), exactly one."""

    policy: str
    job_status: Optional[str] = None
    job_deployment_status: Optional[str] = None
    ttl_seconds: int = 0

    def __post_init__(self) -> None:
        _check_policy("DeletionRule.policy", self.policy)
        if (self.job_status is None) == (self.job_deployment_status is None):
            raise ValueError(
                "DeletionRule needs exactly one of job_status and job_deployment_status, got "
                f"job_status={self.job_status!r}, job_deployment_status={self.job_deployment_status!r}"
            )
        if self.job_status is not None and self.job_status not in DELETION_JOB_STATUSES:
            raise ValueError(
                f"DeletionRule.job_status must be one of {list(DELETION_JOB_STATUSES)}, got {self.job_status!r}"
            )
        if self.job_deployment_status is not None and self.job_deployment_status not in DELETION_DEPLOYMENT_STATUSES:
            raise ValueError(
                "DeletionRule.job_deployment_status must be one of "
                f"{list(DELETION_DEPLOYMENT_STATUSES)}, got {self.job_deployment_status!r}"
            )
        check_int("DeletionRule.ttl_seconds", self.ttl_seconds)

    def to_k8s(self) -> dict[str, Any]:
        condition: dict[str, Any] = (
            {"jobStatus": self.job_status} if self.job_status else {"jobDeploymentStatus": self.job_deployment_status}
        )
        condition["ttlSeconds"] = self.ttl_seconds
        return {"policy": self.policy, "condition": condition}


@dataclass(frozen=True)
class DeletionStrategy:
    """KubeRay's ``deletionStrategy``: either ``rules`` (``DeletionRule``, KubeRay 1.5+) or both ``on_success``
    and ``on_failure`` (a policy name each, the older form). ``DeleteSelf`` is refused (see the README)."""

    rules: Sequence[DeletionRule] = ()
    on_success: Optional[str] = None
    on_failure: Optional[str] = None

    def __post_init__(self) -> None:
        rules = self.rules
        if isinstance(rules, (str, bytes, Mapping)) or not isinstance(rules, Sequence):
            raise TypeError(f"DeletionStrategy.rules must be a list of DeletionRule, got {rules!r}")
        for i, rule in enumerate(rules):
            if not isinstance(rule, DeletionRule):
                raise TypeError(f"DeletionStrategy.rules[{i}] must be a DeletionRule, got {rule!r}")
        object.__setattr__(self, "rules", tuple(rules))
        legacy = (self.on_success, self.on_failure)
        if rules and any(p is not None for p in legacy):
            raise ValueError("DeletionStrategy takes rules or on_success/on_failure, not both")
        if not rules:
            if None in legacy:
                raise ValueError(
                    "DeletionStrategy needs rules, or both on_success and on_failure, got "
                    f"on_success={self.on_success!r}, on_failure={self.on_failure!r}"
                )
            _check_policy("DeletionStrategy.on_success", self.on_success)
            _check_policy("DeletionStrategy.on_failure", self.on_failure)

    def to_k8s(self) -> dict[str, Any]:
        if self.rules:
            return {"deletionRules": [rule.to_k8s() for rule in self.rules]}
        return {"onSuccess": {"policy": self.on_success}, "onFailure": {"policy": self.on_failure}}


def _check_start_params(field: str, value: object) -> Optional[dict[str, str]]:
    """``ray start`` parameters: str values; ints and bools become strings, anything else is refused."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(item, float):
                raise TypeError(f"{field}[{key!r}] must be a str (or int/bool), got {item!r} (float)")
    return check_str_map(field, value, convert_scalars=True)


def _check_compute_template(field: str, value: object) -> Optional[ComputeTemplate]:
    """The template object to apply now; a name (a template stored in the cluster) is checked and left to the
    connector, which applies it with the same precedence."""
    if isinstance(value, str):
        check_template_name(field, value)
        return None
    if value is not None and not isinstance(value, ComputeTemplate):
        raise TypeError(f"{field} must be a ComputeTemplate or a template name, got {value!r} ({type(value).__name__})")
    return value


def _init_group(group: HeadNodeConfig | WorkerNodeConfig, owner: str, ray_container: str) -> None:
    """The checks and normalization head and worker groups share, then the group's ``k8sPod``: built now,
    from a copy of the pod template, so what is validated is what is sent."""
    set_ = object.__setattr__
    set_(group, "ray_start_params", _check_start_params(f"{owner}.ray_start_params", group.ray_start_params))
    set_(group, "requests", normalize_resources(f"{owner}.requests", group.requests))
    set_(group, "limits", normalize_resources(f"{owner}.limits", group.limits))
    template = _check_compute_template(f"{owner}.compute_template", group.compute_template)
    pod = group_k8s_pod(owner, ray_container, group.pod_template, template, group.requests, group.limits)
    set_(group, "_k8s_pod", pod)


@dataclass(frozen=True)
class HeadNodeConfig:
    """The head group. ``pod_template``, ``compute_template`` and ``requests``/``limits`` combine (see
    :mod:`flytekitplugins.raycluster.pods`); none is dropped."""

    ray_start_params: Optional[dict[str, str]] = None
    pod_template: Optional[PodTemplate] = None
    requests: Optional[Resources] = None
    limits: Optional[Resources] = None
    _: KW_ONLY
    #: A ``ComputeTemplate`` object, or the name of a template stored in the cluster (resolved by the connector).
    compute_template: Optional[Union[ComputeTemplate, str]] = None
    _k8s_pod: Optional[dict[str, Any]] = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _init_group(self, "HeadNodeConfig", RAY_HEAD_CONTAINER)

    @property
    def k8s_pod(self) -> Optional[dict[str, Any]]:
        """The group's ``k8sPod`` (camelCase dict), or None."""
        return self._k8s_pod


@dataclass(frozen=True)
class WorkerNodeConfig:
    """One worker group.

    Omitted ``min_replicas``/``max_replicas`` mean ``replicas`` (a fixed-size group), as in
    flytekitplugins-ray. Given ones must satisfy ``min_replicas <= replicas <= max_replicas``: nothing is
    clamped.
    """

    group_name: str
    replicas: int
    min_replicas: Optional[int] = None
    max_replicas: Optional[int] = None
    ray_start_params: Optional[dict[str, str]] = None
    pod_template: Optional[PodTemplate] = None
    requests: Optional[Resources] = None
    limits: Optional[Resources] = None
    _: KW_ONLY
    #: A ``ComputeTemplate`` object, or the name of a template stored in the cluster (resolved by the connector).
    compute_template: Optional[Union[ComputeTemplate, str]] = None
    #: Seconds an idle worker of this group lives before the autoscaler removes it, instead of
    #: ``AutoscalerOptionsConfig.idle_timeout_seconds`` (KubeRay 1.5+, autoscaler v2 only).
    idle_timeout_seconds: Optional[int] = None
    _k8s_pod: Optional[dict[str, Any]] = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        name = check_str("WorkerNodeConfig.group_name", self.group_name)
        if len(name) > 63 or not _DNS1123_LABEL.match(name):
            raise ValueError(
                "WorkerNodeConfig.group_name must be a DNS-1123 label (lower-case letters, digits and '-', "
                f"starting and ending with a letter or digit, at most 63 characters), got {name!r}"
            )
        where = f"WorkerNodeConfig({name!r})"
        check_int(f"{where}.replicas", self.replicas)
        check_optional_int(f"{where}.min_replicas", self.min_replicas)
        check_optional_int(f"{where}.max_replicas", self.max_replicas)
        check_optional_int(f"{where}.idle_timeout_seconds", self.idle_timeout_seconds)
        if self.min_replicas is not None and self.min_replicas > self.replicas:
            raise ValueError(f"{where}.min_replicas must be <= replicas ({self.replicas}), got {self.min_replicas}")
        if self.max_replicas is not None and self.max_replicas < self.replicas:
            raise ValueError(f"{where}.max_replicas must be >= replicas ({self.replicas}), got {self.max_replicas}")
        _init_group(self, where, RAY_WORKER_CONTAINER)

    @property
    def effective_min_replicas(self) -> int:
        return self.replicas if self.min_replicas is None else self.min_replicas

    @property
    def effective_max_replicas(self) -> int:
        return self.replicas if self.max_replicas is None else self.max_replicas

    @property
    def k8s_pod(self) -> Optional[dict[str, Any]]:
        """The group's ``k8sPod`` (camelCase dict), or None."""
        return self._k8s_pod


@dataclass(frozen=True)
class AutoscalerOptionsConfig:
    """KubeRay's ``autoscalerOptions``. ``upscaling_mode`` also takes a mode's name in any case."""

    UpscalingMode: ClassVar[type[UpscalingMode]] = UpscalingMode
    upscaling_mode: Optional[_Mode] = None
    idle_timeout_seconds: Optional[int] = None
    env: Optional[dict[str, str]] = None
    image: Optional[str] = None
    requests: Optional[Resources] = None
    limits: Optional[Resources] = None
    _: KW_ONLY
    #: ``"v1"`` or ``"v2"`` (KubeRay 1.4+; v2 needs Ray 2.47+ and pods that are never restarted).
    version: Optional[str] = None
    image_pull_policy: Optional[str] = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if self.version is not None and self.version not in AUTOSCALER_VERSIONS:
            raise ValueError(
                f"AutoscalerOptionsConfig.version must be one of {list(AUTOSCALER_VERSIONS)}, got {self.version!r}"
            )
        pull = ("Always", "IfNotPresent", "Never")
        if self.image_pull_policy is not None and self.image_pull_policy not in pull:
            raise ValueError(
                f"AutoscalerOptionsConfig.image_pull_policy must be one of {list(pull)}, got {self.image_pull_policy!r}"
            )
        if self.upscaling_mode is not None:
            mode = UpscalingMode.coerce("AutoscalerOptionsConfig.upscaling_mode", self.upscaling_mode)
            set_(self, "upscaling_mode", mode)
        check_optional_int("AutoscalerOptionsConfig.idle_timeout_seconds", self.idle_timeout_seconds)
        if self.env is not None:
            set_(self, "env", check_str_map("AutoscalerOptionsConfig.env", self.env))
            check_env_names("AutoscalerOptionsConfig.env", [{"name": name} for name in self.env])
        if check_optional_str("AutoscalerOptionsConfig.image", self.image) is not None:
            check_image("AutoscalerOptionsConfig.image", self.image)
        set_(self, "requests", normalize_resources("AutoscalerOptionsConfig.requests", self.requests))
        set_(self, "limits", normalize_resources("AutoscalerOptionsConfig.limits", self.limits))


@dataclass(frozen=True)
class RayJobConfig:
    """A Ray task's cluster (a KubeRay RayJob on Flyte; a local Ray when run locally).

    ``ttl_seconds_after_finished`` > 0 without ``shutdown_after_job_finishes=True`` is dropped with a
    ``UserWarning``: KubeRay 1.7 rejects that combination and Flyte's backend ignores the TTL then anyway.
    """

    worker_node_config: Sequence[WorkerNodeConfig]
    head_node_config: Optional[HeadNodeConfig] = None
    enable_autoscaling: bool = False
    autoscaler_options: Optional[AutoscalerOptionsConfig] = None
    runtime_env: Optional[dict[str, Any]] = None
    address: Optional[str] = None
    shutdown_after_job_finishes: bool = False
    ttl_seconds_after_finished: Optional[int] = None
    _: KW_ONLY
    submission_mode: Union[SubmissionMode, str, None] = None
    deletion_strategy: Optional[DeletionStrategy] = None
    #: Retries of the whole job on a new cluster (RayJob ``backoffLimit``; ``Retrying`` while it retries).
    backoff_limit: Optional[int] = None
    active_deadline_seconds: Optional[int] = None
    pre_running_deadline_seconds: Optional[int] = None
    entrypoint_num_cpus: Optional[float] = None
    entrypoint_num_gpus: Optional[float] = None
    entrypoint_resources: Optional[dict[str, float]] = None
    #: The submitter pod's container resources (K8sJobMode), instead of the task's (the head's) resources.
    submitter_requests: Optional[Resources] = None
    submitter_limits: Optional[Resources] = None
    #: Retries of the submitter Job (RayJob ``submitterConfig.backoffLimit``).
    submitter_backoff_limit: Optional[int] = None
    suspend: Optional[bool] = None
    #: Run on this existing RayCluster (its name, or a selector with ``ray.io/cluster``): no cluster is made.
    cluster_selector: Optional[Any] = None
    _ray_job_extension: Optional[RayJobExtension] = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        groups = self.worker_node_config
        if isinstance(groups, (str, bytes, Mapping)) or not isinstance(groups, Sequence):
            raise TypeError(f"RayJobConfig.worker_node_config must be a list of WorkerNodeConfig, got {groups!r}")
        seen: set[str] = set()
        for i, group in enumerate(groups):
            if not isinstance(group, WorkerNodeConfig):
                raise TypeError(
                    f"RayJobConfig.worker_node_config[{i}] must be a flytekitplugins.raycluster.WorkerNodeConfig, "
                    f"got {group!r}"
                )
            if group.group_name in seen:
                raise ValueError(
                    f"RayJobConfig.worker_node_config: group_name {group.group_name!r} is used by two groups"
                )
            seen.add(group.group_name)
        set_(self, "worker_node_config", tuple(groups))
        if self.head_node_config is not None and not isinstance(self.head_node_config, HeadNodeConfig):
            raise TypeError(f"RayJobConfig.head_node_config must be a HeadNodeConfig, got {self.head_node_config!r}")
        check_bool("RayJobConfig.enable_autoscaling", self.enable_autoscaling)
        options = self.autoscaler_options
        if options is not None and not isinstance(options, AutoscalerOptionsConfig):
            raise TypeError(f"RayJobConfig.autoscaler_options must be an AutoscalerOptionsConfig, got {options!r}")
        if self.runtime_env is not None:
            set_(self, "runtime_env", check_runtime_env("RayJobConfig.runtime_env", self.runtime_env))
        check_optional_str("RayJobConfig.address", self.address)
        check_bool("RayJobConfig.shutdown_after_job_finishes", self.shutdown_after_job_finishes)
        check_optional_int("RayJobConfig.ttl_seconds_after_finished", self.ttl_seconds_after_finished)
        if self.ttl_seconds_after_finished and not self.shutdown_after_job_finishes:
            warn_user(
                f"RayJobConfig.ttl_seconds_after_finished={self.ttl_seconds_after_finished} is dropped: it needs "
                "shutdown_after_job_finishes=True (KubeRay rejects a TTL without it, Flyte's backend ignores it)",
                UserWarning,
            )

        self._check_idle_timeouts()
        set_(self, "_ray_job_extension", self._build_ray_job_extension() or None)

    def _check_idle_timeouts(self) -> None:
        """A group's idle timeout needs the autoscaler that reads it: KubeRay's rule, and autoscaling on."""
        options = self.autoscaler_options
        head_pod = (self.head_node_config.k8s_pod if self.head_node_config else None) or {}
        cluster = {
            "autoscalerOptions": {"version": options.version} if options and options.version else {},
            "headGroupSpec": {"template": {"spec": head_pod.get("podSpec") or {}}},
        }
        for group in self.worker_node_config:
            if group.idle_timeout_seconds is None:
                continue
            where = f"WorkerNodeConfig({group.group_name!r}).idle_timeout_seconds={group.idle_timeout_seconds}"
            problem = worker_idle_timeout_problem(cluster, {"idleTimeoutSeconds": group.idle_timeout_seconds})
            if not problem and not self.enable_autoscaling:
                problem = "needs enable_autoscaling=True: no autoscaler would read it"
            if problem:
                raise ValueError(f"{where} {problem}")

    def _build_ray_job_extension(self) -> RayJobExtension:
        """The ``kubejobs.rayJob`` section (KubeRay's field names), checked against KubeRay's rules."""
        set_ = object.__setattr__
        ext: RayJobExtension = {}
        if self.submission_mode is not None:
            mode = SubmissionMode.coerce("RayJobConfig.submission_mode", self.submission_mode)
            set_(self, "submission_mode", mode)
            ext["submissionMode"] = mode.value
        if self.deletion_strategy is not None:
            if not isinstance(self.deletion_strategy, DeletionStrategy):
                raise TypeError(
                    f"RayJobConfig.deletion_strategy must be a DeletionStrategy, got {self.deletion_strategy!r}"
                )
            ext["deletionStrategy"] = self.deletion_strategy.to_k8s()
        if check_optional_int("RayJobConfig.backoff_limit", self.backoff_limit) is not None:
            ext["backoffLimit"] = self.backoff_limit  # type: ignore[typeddict-item]  # checked int
        for attr, key in (
            ("active_deadline_seconds", "activeDeadlineSeconds"),
            ("pre_running_deadline_seconds", "preRunningDeadlineSeconds"),
        ):
            value = check_optional_int(f"RayJobConfig.{attr}", getattr(self, attr), minimum=1)
            if value is not None:
                ext[key] = value  # type: ignore[literal-required]
        for attr, key in (("entrypoint_num_cpus", "entrypointNumCpus"), ("entrypoint_num_gpus", "entrypointNumGpus")):
            value = getattr(self, attr)
            if value is not None:
                ext[key] = _check_amount(f"RayJobConfig.{attr}", value)  # type: ignore[literal-required]
        if self.entrypoint_resources is not None:
            resources = self.entrypoint_resources
            if not isinstance(resources, Mapping) or not resources:
                raise TypeError(
                    f"RayJobConfig.entrypoint_resources must be a non-empty dict of str to number, got {resources!r}"
                )
            for name, amount in resources.items():
                check_str("RayJobConfig.entrypoint_resources key", name)
                _check_amount(f"RayJobConfig.entrypoint_resources[{name!r}]", amount)
            set_(self, "entrypoint_resources", dict(resources))
            ext["entrypointResources"] = json.dumps(dict(resources), sort_keys=True)
        set_(
            self, "submitter_requests", normalize_resources("RayJobConfig.submitter_requests", self.submitter_requests)
        )
        set_(self, "submitter_limits", normalize_resources("RayJobConfig.submitter_limits", self.submitter_limits))
        submitter = {side: resources_to_k8s(getattr(self, f"submitter_{side}")) for side in ("requests", "limits")}
        submitter = {side: values for side, values in submitter.items() if values}
        if submitter:
            ext["submitterPodTemplate"] = {"spec": {"containers": [{"resources": submitter}]}}
        if check_optional_int("RayJobConfig.submitter_backoff_limit", self.submitter_backoff_limit) is not None:
            ext["submitterConfig"] = {"backoffLimit": self.submitter_backoff_limit}
        if check_optional_bool("RayJobConfig.suspend", self.suspend) is not None:
            ext["suspend"] = self.suspend  # type: ignore[typeddict-item]  # checked bool
        if self.cluster_selector is not None:
            ext["clusterSelector"] = self._check_cluster_selector()
        options = self.autoscaler_options
        extra = (
            {}
            if options is None
            else {
                key: value
                for key, value in (("version", options.version), ("imagePullPolicy", options.image_pull_policy))
                if value is not None
            }
        )
        if extra:
            if not self.enable_autoscaling:
                raise ValueError(
                    f"RayJobConfig.autoscaler_options {sorted(extra)} need enable_autoscaling=True: KubeRay runs no "
                    "autoscaler without it"
                )
            ext["rayClusterSpec"] = {"autoscalerOptions": extra}  # type: ignore[typeddict-item]
        submission = ext.get("submissionMode", "K8sJobMode")
        if submission != "K8sJobMode":
            given = [
                a
                for a in ("submitter_requests", "submitter_limits", "submitter_backoff_limit")
                if getattr(self, a) is not None
            ]
            if given:
                raise ValueError(
                    f"RayJobConfig.{given[0]} needs submission_mode K8sJobMode (the only mode with a "
                    f"submitter Job), got submission_mode={submission!r}"
                )
        if ext:
            self._check_kuberay_rules(ext)
        return ext

    def _check_cluster_selector(self) -> dict[str, str]:
        value = self.cluster_selector
        selector = (
            {CLUSTER_SELECTOR_KEY: value}
            if isinstance(value, str)
            else check_str_map("RayJobConfig.cluster_selector", value)
        )
        check_dns_label(f"RayJobConfig.cluster_selector[{CLUSTER_SELECTOR_KEY!r}]", selector.get(CLUSTER_SELECTOR_KEY))
        described = [
            name
            for name, present in (
                ("worker_node_config", bool(self.worker_node_config)),
                ("head_node_config", self.head_node_config is not None),
                ("enable_autoscaling", self.enable_autoscaling),
                ("autoscaler_options", self.autoscaler_options is not None),
                ("shutdown_after_job_finishes", self.shutdown_after_job_finishes),
                ("ttl_seconds_after_finished", bool(self.ttl_seconds_after_finished)),
            )
            if present
        ]
        if described:
            raise ValueError(
                f"RayJobConfig.cluster_selector={value!r} runs the job on an existing RayCluster; {described} "
                "describe a cluster to create or delete and would be dropped (pass worker_node_config=[])"
            )
        return selector

    def _check_kuberay_rules(self, ext: RayJobExtension) -> None:
        spec: dict[str, Any] = {key: value for key, value in ext.items() if key != "rayClusterSpec"}
        spec["shutdownAfterJobFinishes"] = self.shutdown_after_job_finishes
        if self.effective_ttl_seconds_after_finished:
            spec["ttlSecondsAfterFinished"] = self.effective_ttl_seconds_after_finished
        if "clusterSelector" not in ext:
            head_pod = (self.head_node_config.k8s_pod if self.head_node_config else None) or {}
            restart = (head_pod.get("podSpec") or {}).get("restartPolicy")
            spec["rayClusterSpec"] = {
                "enableInTreeAutoscaling": self.enable_autoscaling,
                "headGroupSpec": {"template": {"spec": {"restartPolicy": restart}}},
            }
        problems = rayjob_spec_problems(spec)
        if problems:
            problem = problems[0]
            key = problem.path[1] if len(problem.path) > 1 else ""
            attr = _SPEC_FIELDS.get(str(key), str(key))
            raise ValueError(
                f"RayJobConfig.{attr}={getattr(self, attr, None)!r} is refused by KubeRay: "
                f"{format_path(problem.path)} {problem.message}"
            )

    @property
    def ray_job_extension(self) -> Optional[RayJobExtension]:
        """The ``kubejobs.rayJob`` section this config sends, or None when the IDL carries everything."""
        return self._ray_job_extension

    @property
    def effective_ttl_seconds_after_finished(self) -> Optional[int]:
        """The TTL that is sent: None when it is dropped (see the class docstring)."""
        return self.ttl_seconds_after_finished if self.shutdown_after_job_finishes else None


#: RayJob spec field -> the RayJobConfig field that sets it (to name the field a KubeRay rule refuses).
_SPEC_FIELDS = {
    "submissionMode": "submission_mode",
    "deletionStrategy": "deletion_strategy",
    "backoffLimit": "backoff_limit",
    "activeDeadlineSeconds": "active_deadline_seconds",
    "preRunningDeadlineSeconds": "pre_running_deadline_seconds",
    "entrypointResources": "entrypoint_resources",
    "submitterPodTemplate": "submitter_requests",
    "submitterConfig": "submitter_backoff_limit",
    "suspend": "suspend",
    "clusterSelector": "cluster_selector",
    "shutdownAfterJobFinishes": "shutdown_after_job_finishes",
    "ttlSecondsAfterFinished": "ttl_seconds_after_finished",
    "rayClusterSpec": "head_node_config",
}


def _check_amount(field: str, value: object) -> float:
    """A Ray resource amount: a finite number >= 0 (KubeRay's float32)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{field} must be a number, got {value!r} ({type(value).__name__})")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{field} must be a finite number >= 0, got {value!r}")
    return value
