"""Backend configuration, read from the ``plugins:`` section of a FlytePropeller config.

The key spellings are propeller's (``default-tolerations``, ``gpu-resource-name``, ``serviceType``...)
so a cluster's existing configuration carries over unchanged::

    config = BackendConfig.from_yaml('''
    plugins:
      k8s:
        default-cpus: 500m
        gpu-resource-name: amd.com/gpu
      ray:
        ttlSecondsAfterFinished: 600
    ''')

Keys this backend does not use are ignored (a propeller config has many). Values of the keys it does
use are checked: a wrong type is a ``ValueError``/``TypeError`` naming ``plugins.<section>.<key>``.

>>> BackendConfig.from_flyte_config({"k8s": {"default-cpus": "2"}}).k8s.default_cpus
'2'
"""

from __future__ import annotations

import copy
import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

from ..k8sobjects import to_k8s_dict, to_k8s_list
from ..wire.compute import TemplateSet
from ..wire.extension import DEFAULT_GPU_RESOURCE_NAME
from ..wire.fields import check_str, check_str_map
from ..wire.kinds import KINDS, TRAINJOB, JobKind
from ..wire.quantity import check_quantity
from .kueue import KueueConfig
from .logs import LogConfig
from .mpi_operator import MpiOperatorConfig
from .trainjob_config import TrainJobConfig

if TYPE_CHECKING:
    from ..schema import SchemaSet

__all__ = ["BackendConfig", "K8sConfig", "RayConfig", "KfOperatorConfig", "parse_go_duration"]

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_go_duration(field_name: str, value: object) -> float:
    """Seconds in a Go duration (``"1m"``, ``"1h30m"``, ``"90s"``); a finite number is taken as seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):  # YAML's .nan / .inf
            raise ValueError(f"{field_name} must be a finite duration, got {value!r}")
        return float(value)
    if not isinstance(value, str):
        raise TypeError(f"{field_name} must be a duration like '1m', got {value!r}")
    text = value.strip()
    if text == "0":
        return 0.0
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise ValueError(f"{field_name} must be a duration like '1m' or '90s', got {value!r}")
    return total


def _bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be true or false, got {value!r}")
    return value


def _int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    return value


def _section(name: str, value: object) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a mapping, got {value!r}")
    return value


def _optional_dict(name: str, value: object) -> Optional[dict[str, Any]]:
    return None if value is None else to_k8s_dict(name, value)


@dataclass(frozen=True)
class K8sConfig:
    """``plugins.k8s``: the settings of Flyte's shared pod building that change the built object."""

    default_annotations: dict[str, str] = field(
        default_factory=lambda: {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
    )
    default_labels: dict[str, str] = field(default_factory=dict)
    default_env_vars: dict[str, str] = field(default_factory=dict)
    default_cpus: str = "1000m"
    default_memory: str = "1024Mi"
    gpu_resource_name: str = DEFAULT_GPU_RESOURCE_NAME
    gpu_device_node_label: str = "k8s.amazonaws.com/accelerator"
    gpu_partition_size_node_label: str = "k8s.amazonaws.com/gpu-partition-size"
    enable_distributed_error_aggregation: bool = False
    default_tolerations: list[dict[str, Any]] = field(default_factory=list)
    resource_tolerations: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    add_tolerations_for_extended_resources: list[str] = field(default_factory=list)
    default_node_selector: dict[str, str] = field(default_factory=dict)
    interruptible_tolerations: list[dict[str, Any]] = field(default_factory=list)
    interruptible_node_selector: dict[str, str] = field(default_factory=dict)
    interruptible_node_selector_requirement: Optional[dict[str, Any]] = None
    non_interruptible_node_selector_requirement: Optional[dict[str, Any]] = None
    default_affinity: Optional[dict[str, Any]] = None
    scheduler_name: str = ""
    image_pull_policy: str = ""
    default_pod_template_name: str = ""
    default_security_context: Optional[dict[str, Any]] = None
    default_pod_security_context: Optional[dict[str, Any]] = None
    default_pod_dns_config: Optional[dict[str, Any]] = None
    enable_host_networking_pod: Optional[bool] = None

    @classmethod
    def from_section(cls, section: Mapping[str, Any]) -> K8sConfig:
        p = "plugins.k8s."
        kw: dict[str, Any] = {}
        maps = {
            "default-annotations": "default_annotations",
            "default-labels": "default_labels",
            "default-env-vars": "default_env_vars",
            "default-node-selector": "default_node_selector",
            "interruptible-node-selector": "interruptible_node_selector",
        }
        for key, attr in maps.items():
            if section.get(key) is not None:
                kw[attr] = check_str_map(p + key, section[key], convert_scalars=True)
        for key in ("default-cpus", "default-memory"):
            if section.get(key) is not None:
                kw[key.replace("-", "_")] = check_quantity(p + key, section[key])
        for key in ("gpu-resource-name", "gpu-device-node-label", "gpu-partition-size-node-label"):
            if section.get(key) is not None:
                kw[key.replace("-", "_")] = check_str(p + key, section[key])
        for key in ("scheduler-name", "image-pull-policy", "default-pod-template-name"):
            if section.get(key) is not None:
                kw[key.replace("-", "_")] = check_str(p + key, section[key], allow_empty=True)
        for key in ("enable-distributed-error-aggregation", "enable-host-networking-pod"):
            if section.get(key) is not None:
                kw[key.replace("-", "_")] = _bool(p + key, section[key])
        for key in ("default-tolerations", "interruptible-tolerations"):
            kw[key.replace("-", "_")] = to_k8s_list(p + key, section.get(key))
        tolerations = _section(p + "resource-tolerations", section.get("resource-tolerations"))
        kw["resource_tolerations"] = {
            str(name): to_k8s_list(f"{p}resource-tolerations[{name!r}]", items) for name, items in tolerations.items()
        }
        extended = section.get("add-tolerations-for-extended-resources") or []
        if not isinstance(extended, list) or not all(isinstance(x, str) for x in extended):
            raise TypeError(f"{p}add-tolerations-for-extended-resources must be a list of str, got {extended!r}")
        kw["add_tolerations_for_extended_resources"] = list(extended)
        for key in (
            "interruptible-node-selector-requirement",
            "non-interruptible-node-selector-requirement",
            "default-affinity",
            "default-security-context",
            "default-pod-security-context",
            "default-pod-dns-config",
        ):
            kw[key.replace("-", "_")] = _optional_dict(p + key, section.get(key))
        return cls(**kw)


@dataclass(frozen=True)
class RayConfig:
    """``plugins.ray`` (defaults as in Flyte's Ray plugin)."""

    shutdown_after_job_finishes: bool = True
    ttl_seconds_after_finished: int = 3600
    service_type: str = "NodePort"
    enable_ingress: bool = False
    include_dashboard: bool = True
    dashboard_host: str = "0.0.0.0"
    enable_usage_stats: bool = False
    service_account: str = ""
    head_start_parameters: dict[str, str] = field(default_factory=lambda: {"disable-usage-stats": "true"})
    head_ip_address: str = "$MY_POD_IP"
    worker_start_parameters: dict[str, str] = field(default_factory=lambda: {"disable-usage-stats": "true"})
    worker_ip_address: str = "$MY_POD_IP"
    logs_sidecar: Optional[dict[str, Any]] = None
    #: ``plugins.ray.logs`` (Ray log links); None: no links, Flyte's default.
    logs: Optional[LogConfig] = None
    #: ``plugins.ray.dashboardURLTemplate`` (a template log plugin dict), or None.
    dashboard_url_template: Optional[dict[str, Any]] = None

    @classmethod
    def from_section(cls, section: Mapping[str, Any]) -> RayConfig:
        p = "plugins.ray."
        kw: dict[str, Any] = {}
        for key, attr in (
            ("shutdownAfterJobFinishes", "shutdown_after_job_finishes"),
            ("enableIngress", "enable_ingress"),
            ("includeDashboard", "include_dashboard"),
            ("enableUsageStats", "enable_usage_stats"),
        ):
            if section.get(key) is not None:
                kw[attr] = _bool(p + key, section[key])
        if section.get("ttlSecondsAfterFinished") is not None:
            kw["ttl_seconds_after_finished"] = _int(p + "ttlSecondsAfterFinished", section["ttlSecondsAfterFinished"])
        for key, attr in (
            ("serviceType", "service_type"),
            ("dashboardHost", "dashboard_host"),
            ("serviceAccount", "service_account"),
        ):
            if section.get(key) is not None:
                kw[attr] = check_str(p + key, section[key], allow_empty=True)
        legacy_ip = section.get("nodeIPAddress")
        defaults = _section(p + "defaults", section.get("defaults"))
        for node, prefix in (("headNode", "head"), ("workerNode", "worker")):
            spec = _section(f"{p}defaults.{node}", defaults.get(node))
            if spec.get("startParameters") is not None:
                kw[f"{prefix}_start_parameters"] = check_str_map(
                    f"{p}defaults.{node}.startParameters", spec["startParameters"], convert_scalars=True
                )
            ip = spec.get("ipAddress")
            if ip is None and legacy_ip:  # deprecated top-level key, used only when the new one is empty
                ip = legacy_ip
            if ip is not None:
                kw[f"{prefix}_ip_address"] = check_str(f"{p}defaults.{node}.ipAddress", ip, allow_empty=True)
        sidecar = kw["logs_sidecar"] = _optional_dict(p + "logsSidecar", section.get("logsSidecar"))
        if sidecar is not None:
            if not isinstance(sidecar.get("name"), str) or not sidecar["name"]:
                raise ValueError(f"{p}logsSidecar needs a non-empty name, got {sidecar!r}")
            to_k8s_list(p + "logsSidecar.volumeMounts", sidecar.get("volumeMounts"))
        if section.get("logs") is not None:
            # Go's default for plugins.ray.logs is the zero LogConfig (no Kubernetes link), not plugins.logs'.
            kw["logs"] = LogConfig.from_flyte_config(
                dict(_section(p + "logs", section["logs"])), base=LogConfig.empty()
            )
        kw["dashboard_url_template"] = _optional_dict(p + "dashboardURLTemplate", section.get("dashboardURLTemplate"))
        return cls(**kw)


@dataclass(frozen=True)
class KfOperatorConfig:
    """``plugins.kf-operator``."""

    #: Seconds after creation without a ``status.startTime`` before the job counts as stalled.
    timeout: float = 60.0

    @classmethod
    def from_section(cls, section: Mapping[str, Any]) -> KfOperatorConfig:
        if section.get("timeout") is None:
            return cls()
        return cls(timeout=parse_go_duration("plugins.kf-operator.timeout", section["timeout"]))


@functools.lru_cache(maxsize=8)
def _load_schemas(crd_dir: str) -> SchemaSet:
    from ..schema import SchemaSet

    return SchemaSet.from_dir(crd_dir)


@dataclass(frozen=True)
class BackendConfig:
    """Everything object building and status mapping read from the platform configuration."""

    k8s: K8sConfig = field(default_factory=K8sConfig)
    ray: RayConfig = field(default_factory=RayConfig)
    kf_operator: KfOperatorConfig = field(default_factory=KfOperatorConfig)
    logs: LogConfig = field(default_factory=LogConfig)
    #: ``plugins.trainjob``: the task types built as Kubeflow Trainer v2 TrainJobs (none by default).
    trainjob: TrainJobConfig = field(default_factory=TrainJobConfig)
    #: ``plugins.kueue``: the Kueue LocalQueue of jobs per namespace and task type (none by default).
    kueue: KueueConfig = field(default_factory=KueueConfig)
    #: ``plugins.mpi``: the MPIJob ``mpi`` tasks become (the Training Operator's v1 by default).
    mpi: MpiOperatorConfig = field(default_factory=MpiOperatorConfig)
    #: Directory holding the CRD schemas (``kubeflow.org_pytorchjobs.json``...); None: controller rules only.
    crd_dir: Optional[str] = None
    #: Cluster PodTemplates by name (``{"metadata": {...}, "spec": {...}}``, the object's ``template``), for
    #: ``@task(pod_template_name=...)`` and ``plugins.k8s.default-pod-template-name``; the connector, which
    #: reads the cluster, fills it. Pure building never looks anything up.
    pod_templates: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: The compute templates tasks may name (``computeTemplate``), as stored in the cluster; the connector fills
    #: it at create time from its watch cache (``kubejobs render`` from a file or the cluster). Empty, with no
    #: source, by default: a task naming one is a ``BuildError`` saying no templates were given.
    compute_templates: TemplateSet = field(default_factory=TemplateSet)

    @classmethod
    def from_flyte_config(cls, plugins: Mapping[str, Any], crd_dir: Optional[str] = None) -> BackendConfig:
        """From the ``plugins:`` mapping of a FlytePropeller config (sections ``k8s``, ``ray``,
        ``kf-operator``, ``logs``, and this backend's ``trainjob``, ``kueue`` and ``mpi``)."""
        plugins = _section("plugins", plugins)
        logs = plugins.get("logs")
        return cls(
            k8s=K8sConfig.from_section(_section("plugins.k8s", plugins.get("k8s"))),
            ray=RayConfig.from_section(_section("plugins.ray", plugins.get("ray"))),
            kf_operator=KfOperatorConfig.from_section(_section("plugins.kf-operator", plugins.get("kf-operator"))),
            logs=LogConfig() if logs is None else LogConfig.from_flyte_config(dict(_section("plugins.logs", logs))),
            trainjob=TrainJobConfig.from_section(_section("plugins.trainjob", plugins.get("trainjob"))),
            kueue=KueueConfig.from_section(_section("plugins.kueue", plugins.get("kueue"))),
            mpi=MpiOperatorConfig.from_section(_section("plugins.mpi", plugins.get("mpi"))),
            crd_dir=crd_dir,
        )

    def __post_init__(self) -> None:
        if self.mpi.operator == "v2beta1" and "mpi" in self.trainjob.task_types:
            raise ValueError(
                "plugins.mpi.operator v2beta1 and plugins.trainjob.task-types [mpi] both claim the mpi task type; "
                "choose one target"
            )

    def target_kind(self, task_type: str) -> JobKind:
        """The kind a task of ``task_type`` is built as: TrainJob (``plugins.trainjob``), the MPIJob of
        ``plugins.mpi``, or the task type's entry of the kinds table; ``KeyError`` for an unknown task type."""
        if task_type in self.trainjob.task_types:
            return TRAINJOB
        return self.mpi.kind if task_type == "mpi" else KINDS[task_type]

    @classmethod
    def from_yaml(cls, path_or_text: Union[str, Path], crd_dir: Optional[str] = None) -> BackendConfig:
        """From a YAML file or text: a whole propeller config (with ``plugins:``) or the section itself."""
        import yaml

        text = str(path_or_text)
        if isinstance(path_or_text, Path) or ("\n" not in text and Path(text).is_file()):
            text = Path(text).read_text()
        data = yaml.safe_load(text) or {}
        if not isinstance(data, Mapping):
            raise ValueError(
                f"{str(path_or_text)[:80]!r} is neither an existing file nor YAML text holding a mapping "
                f"(got {type(data).__name__})"
            )
        plugins = data.get("plugins", data)
        return cls.from_flyte_config(copy.deepcopy(plugins), crd_dir=crd_dir)

    def schemas(self) -> Optional[SchemaSet]:
        """The CRD schemas from ``crd_dir`` (loaded once per directory), or None without one."""
        return None if self.crd_dir is None else _load_schemas(str(self.crd_dir))
