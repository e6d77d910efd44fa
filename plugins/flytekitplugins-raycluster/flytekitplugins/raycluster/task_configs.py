"""Ray task configuration: the flytekitplugins-ray classes (same fields, order and defaults), validated.

Everything is checked where the config is written; a bad value raises ``ValueError``/``TypeError`` naming
``Class.field`` and the value. Additions over flytekitplugins-ray are keyword-only (``compute_template``).

>>> cfg = RayJobConfig(worker_node_config=[WorkerNodeConfig("cpu", replicas=2, max_replicas=4)])
>>> g = cfg.worker_node_config[0]
>>> (g.effective_min_replicas, g.replicas, g.effective_max_replicas)
(2, 2, 4)
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, ClassVar, Optional, Union

from flytekit import PodTemplate, Resources
from flytekitplugins.kubejobs.compute import ComputeTemplate
from flytekitplugins.kubejobs.resources import normalize_resources
from flytekitplugins.kubejobs.userwarnings import warn_user
from flytekitplugins.kubejobs.wire.compute import check_template_name
from flytekitplugins.kubejobs.wire.fields import (
    check_bool,
    check_int,
    check_optional_int,
    check_optional_str,
    check_str,
    check_str_map,
    coerce_enum,
)
from flytekitplugins.kubejobs.wire.k8ssyntax import check_env_names, check_image

from .pods import RAY_HEAD_CONTAINER, RAY_WORKER_CONTAINER, group_k8s_pod
from .runtime_env import check_runtime_env

__all__ = ["UpscalingMode", "HeadNodeConfig", "WorkerNodeConfig", "AutoscalerOptionsConfig", "RayJobConfig"]

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

    def __post_init__(self) -> None:
        set_ = object.__setattr__
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

    @property
    def effective_ttl_seconds_after_finished(self) -> Optional[int]:
        """The TTL that is sent: None when it is dropped (see the class docstring)."""
        return self.ttl_seconds_after_finished if self.shutdown_after_job_finishes else None
