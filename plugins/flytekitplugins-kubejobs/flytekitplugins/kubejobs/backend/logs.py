"""Log links: Flyte's ``plugins.logs`` configuration and the template rendering of Flyte's Go ``tasklog``.

``LogConfig`` reads the same keys as propeller (``kubernetes-enabled``, ``templates``...), and
``render_links`` produces the links Flyte's Go plugins produce for one pod: one link per template URI of each
enabled provider (Kubernetes, Cloudwatch, Stackdriver, then ``templates[]``), then the dynamic links named
by the task config's ``link_type``.

Substitution follows ``tasklog/template.go``: ``{{ .var }}`` or ``{{ $var }}``, case-insensitive, and a
variable whose value is empty is left in the URI as written.

>>> config = LogConfig.from_flyte_config({"kubernetes-template-uri": "https://k8s/{{ .namespace }}/{{ .podName }}"})
>>> [link.uri for link in render_links(config, LogInput(pod_name="job-worker-0", namespace="ns"))]
['https://k8s/ns/job-worker-0']
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ..wire.template import placeholder_names, substitute

if TYPE_CHECKING:
    from flyteidl.admin.agent_pb2 import TaskExecutionMetadata

__all__ = [
    "DEFAULT_KUBERNETES_TEMPLATE_URI",
    "LogConfig",
    "LogInput",
    "LogLink",
    "MessageFormat",
    "TemplateLogPlugin",
    "render_links",
    "task_execution_variables",
]

DEFAULT_KUBERNETES_TEMPLATE_URI = (
    "http://localhost:30082/#!/log/{{ .namespace }}/{{ .podName }}/pod?namespace={{ .namespace }}"
)


class MessageFormat(enum.Enum):
    """``flyteidl.core.TaskLog.MessageFormat`` (same numbers)."""

    UNKNOWN = 0
    CSV = 1
    JSON = 2

    @classmethod
    def parse(cls, field_name: str, value: object) -> MessageFormat:
        if isinstance(value, MessageFormat):
            return value
        if isinstance(value, str):
            for member in cls:
                if member.name == value.strip().upper():
                    return member
        elif isinstance(value, int) and not isinstance(value, bool):
            for member in cls:
                if member.value == value:
                    return member
        raise ValueError(f"{field_name} must be one of UNKNOWN, CSV, JSON (or 0, 1, 2), got {value!r}")


def _bool(field_name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{field_name} must be true or false, got {value!r} ({type(value).__name__})")
    return value


def _str(field_name: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{field_name} must be a str, got {value!r} ({type(value).__name__})")
    return value


def _mapping(field_name: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"{field_name} must be a mapping, got {value!r} ({type(value).__name__})")
    return value


def _refuse_unknown(field_name: str, section: Mapping[str, Any], known: Sequence[str]) -> None:
    unknown = sorted(str(k) for k in section if k not in known)
    if unknown:
        raise ValueError(f"{field_name} has unknown keys {unknown}; known keys: {sorted(known)}")


@dataclass(frozen=True)
class TemplateLogPlugin:
    """One entry of ``templates[]`` or ``dynamic-log-links`` (Go ``tasklog.TemplateLogPlugin``)."""

    display_name: str
    template_uris: tuple[str, ...]
    message_format: MessageFormat = MessageFormat.UNKNOWN
    show_while_pending: bool = False
    hide_once_finished: bool = False

    def __post_init__(self) -> None:
        _str("TemplateLogPlugin.display_name", self.display_name)
        if isinstance(self.template_uris, str) or not isinstance(self.template_uris, Sequence):
            raise TypeError(f"TemplateLogPlugin.template_uris must be a list of str, got {self.template_uris!r}")
        uris = tuple(_str(f"TemplateLogPlugin.template_uris[{i}]", u) for i, u in enumerate(self.template_uris))
        object.__setattr__(self, "template_uris", uris)
        fmt = MessageFormat.parse("TemplateLogPlugin.message_format", self.message_format)
        object.__setattr__(self, "message_format", fmt)
        _bool("TemplateLogPlugin.show_while_pending", self.show_while_pending)
        _bool("TemplateLogPlugin.hide_once_finished", self.hide_once_finished)

    #: Keys of the Go struct; ``name`` and ``scheme`` are accepted and not used by the k8s plugins.
    _KEYS = ("displayName", "templateUris", "messageFormat", "showWhilePending", "hideOnceFinished", "name", "scheme")

    @classmethod
    def from_flyte_config(cls, entry: object, *, field_name: str = "template") -> TemplateLogPlugin:
        """From a ``{displayName, templateUris, messageFormat, showWhilePending, hideOnceFinished}`` dict."""
        section = _mapping(field_name, entry)
        _refuse_unknown(field_name, section, cls._KEYS)
        uris = section.get("templateUris") or []
        if isinstance(uris, str) or not isinstance(uris, Sequence):
            raise TypeError(f"{field_name}.templateUris must be a list of str, got {uris!r}")
        fmt = section.get("messageFormat")
        return cls(
            display_name=_str(f"{field_name}.displayName", section.get("displayName") or ""),
            template_uris=tuple(_str(f"{field_name}.templateUris[{i}]", u) for i, u in enumerate(uris)),
            message_format=MessageFormat.UNKNOWN
            if fmt is None
            else MessageFormat.parse(f"{field_name}.messageFormat", fmt),
            show_while_pending=_bool(f"{field_name}.showWhilePending", section.get("showWhilePending") or False),
            hide_once_finished=_bool(f"{field_name}.hideOnceFinished", section.get("hideOnceFinished") or False),
        )


@dataclass(frozen=True)
class LogLink:
    """One rendered link; ``PhaseInfo.to_task_logs()`` turns these into ``flyteidl.core.TaskLog``."""

    name: str
    uri: str
    message_format: MessageFormat = MessageFormat.JSON
    show_while_pending: bool = False
    hide_once_finished: bool = False


# Flyte config key -> LogConfig attribute, for the scalar keys.
_SCALAR_KEYS = {
    "kubernetes-enabled": "kubernetes_enabled",
    "kubernetes-url": "kubernetes_url",
    "kubernetes-template-uri": "kubernetes_template_uri",
    "cloudwatch-enabled": "cloudwatch_enabled",
    "cloudwatch-region": "cloudwatch_region",
    "cloudwatch-log-group": "cloudwatch_log_group",
    "cloudwatch-template-uri": "cloudwatch_template_uri",
    "stackdriver-enabled": "stackdriver_enabled",
    "gcp-project": "gcp_project",
    "stackdriver-logresourcename": "stackdriver_logresourcename",
    "stackdriver-template-uri": "stackdriver_template_uri",
}


@dataclass(frozen=True)
class LogConfig:
    """Flyte's ``plugins.logs`` section. Defaults are flyteplugins' ``logs.DefaultConfig``: only the
    Kubernetes dashboard link, at ``localhost:30082``."""

    kubernetes_enabled: bool = True
    kubernetes_url: str = ""
    kubernetes_template_uri: str = DEFAULT_KUBERNETES_TEMPLATE_URI
    cloudwatch_enabled: bool = False
    cloudwatch_region: str = ""
    cloudwatch_log_group: str = ""
    cloudwatch_template_uri: str = ""
    stackdriver_enabled: bool = False
    gcp_project: str = ""
    stackdriver_logresourcename: str = ""
    stackdriver_template_uri: str = ""
    templates: tuple[TemplateLogPlugin, ...] = ()
    #: ``link_type`` name -> plugin; fires only when the task config's ``link_type`` names it.
    dynamic_log_links: Mapping[str, TemplateLogPlugin] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for attr in _SCALAR_KEYS.values():
            check = _bool if attr.endswith("_enabled") else _str
            check(f"LogConfig.{attr}", getattr(self, attr))
        if isinstance(self.templates, (str, Mapping)) or not isinstance(self.templates, Sequence):
            raise TypeError(f"LogConfig.templates must be a list of TemplateLogPlugin, got {self.templates!r}")
        for i, plugin in enumerate(self.templates):
            if not isinstance(plugin, TemplateLogPlugin):
                raise TypeError(f"LogConfig.templates[{i}] must be a TemplateLogPlugin, got {plugin!r}")
        object.__setattr__(self, "templates", tuple(self.templates))
        links = _mapping("LogConfig.dynamic_log_links", self.dynamic_log_links)
        for name, plugin in links.items():
            if not isinstance(name, str) or not isinstance(plugin, TemplateLogPlugin):
                raise TypeError(f"LogConfig.dynamic_log_links must map str to TemplateLogPlugin, got {name!r}")
        object.__setattr__(self, "dynamic_log_links", dict(links))

    @classmethod
    def empty(cls) -> LogConfig:
        """No links at all: the Go zero value, which is the default of ``plugins.ray.logs``."""
        return cls(kubernetes_enabled=False, kubernetes_template_uri="")

    @classmethod
    def from_flyte_config(cls, section: Mapping[str, Any], *, base: LogConfig | None = None) -> LogConfig:
        """Parse a ``plugins.logs``-shaped mapping over ``base`` (default ``LogConfig()``; use
        ``LogConfig.empty()`` for ``plugins.ray.logs``, whose Go default is the zero value).

        Keys left out (or null) keep the base value; unknown keys are a ``ValueError`` (a typo would
        otherwise silently drop a link). Setting ``kubernetes-url`` without ``kubernetes-template-uri``
        builds links from the URL (propeller keeps its localhost default template there; see README).

        >>> LogConfig.from_flyte_config({"kubernetes-url": "https://dash"}).kubernetes_template_uri
        ''
        """
        section = _mapping("plugins.logs", section)
        known = (*_SCALAR_KEYS, "templates", "dynamic-log-links")
        _refuse_unknown("plugins.logs", section, known)
        base = cls() if base is None else base
        kw: dict[str, Any] = {attr: getattr(base, attr) for attr in _SCALAR_KEYS.values()}
        for key, attr in _SCALAR_KEYS.items():
            value = section.get(key)
            if value is not None:
                kw[attr] = (_bool if attr.endswith("_enabled") else _str)(f"plugins.logs.{key}", value)
        if section.get("kubernetes-url") and section.get("kubernetes-template-uri") is None:
            kw["kubernetes_template_uri"] = ""
        templates: tuple[TemplateLogPlugin, ...] = base.templates
        if section.get("templates") is not None:
            raw = section["templates"]
            if isinstance(raw, (str, Mapping)) or not isinstance(raw, Sequence):
                raise TypeError(f"plugins.logs.templates must be a list, got {raw!r}")
            templates = tuple(
                TemplateLogPlugin.from_flyte_config(t, field_name=f"plugins.logs.templates[{i}]")
                for i, t in enumerate(raw)
            )
        dynamic: Mapping[str, TemplateLogPlugin] = base.dynamic_log_links
        if section.get("dynamic-log-links") is not None:
            raw_links = _mapping("plugins.logs.dynamic-log-links", section["dynamic-log-links"])
            dynamic = {
                _str("plugins.logs.dynamic-log-links key", name): TemplateLogPlugin.from_flyte_config(
                    entry, field_name=f"plugins.logs.dynamic-log-links[{name!r}]"
                )
                for name, entry in raw_links.items()
            }
        return cls(**kw, templates=templates, dynamic_log_links=dynamic)

    def static_plugins(self) -> tuple[TemplateLogPlugin, ...]:
        """The providers in propeller's order: Kubernetes, Cloudwatch, Stackdriver, then ``templates``."""
        plugins: list[TemplateLogPlugin] = []
        if self.kubernetes_enabled:
            uri = self.kubernetes_template_uri or (
                self.kubernetes_url + "/#!/log/{{ .namespace }}/{{ .podName }}/pod?namespace={{ .namespace }}"
            )
            plugins.append(TemplateLogPlugin("Kubernetes Logs", (uri,), MessageFormat.JSON))
        if self.cloudwatch_enabled:
            uri = self.cloudwatch_template_uri or (
                f"https://console.aws.amazon.com/cloudwatch/home?region={self.cloudwatch_region}"
                f"#logEventViewer:group={self.cloudwatch_log_group};stream=var.log.containers."
                "{{ .podName }}_{{ .namespace }}_{{ .containerName }}-{{ .containerId }}.log"
            )
            plugins.append(TemplateLogPlugin("Cloudwatch Logs", (uri,), MessageFormat.JSON))
        if self.stackdriver_enabled:
            project = self.gcp_project
            uri = self.stackdriver_template_uri or (
                f"https://console.cloud.google.com/logs/viewer?project={project}"
                f"&angularJsUrl=%2Flogs%2Fviewer%3Fproject%3D{project}&resource={self.stackdriver_logresourcename}"
                "&advancedFilter=resource.labels.pod_name%3D{{ .podName }}"
            )
            plugins.append(TemplateLogPlugin("Stackdriver Logs", (uri,), MessageFormat.JSON))
        plugins.extend(self.templates)
        return tuple(plugins)


@dataclass(frozen=True)
class LogInput:
    """What one pod contributes to the templates (Go ``tasklog.Input``)."""

    pod_name: str = ""
    namespace: str = ""
    container_name: str = ""
    #: Appended to every display name with no separator (``"master"`` gives ``Kubernetes Logsmaster``).
    log_name: str = ""
    start_time: datetime | None = None
    finish_time: datetime | None = None
    #: ``task_execution_variables()`` output: nodeID, generatedName, taskID, executionName...
    execution: Mapping[str, str] = field(default_factory=dict)
    #: Plugin-specific variables (Ray: ``rayJobID``, ``rayClusterName``), substituted first.
    extra: Mapping[str, str] = field(default_factory=dict)

    def variables(self) -> list[tuple[str, str]]:
        """``(name, value)`` in Go's substitution order; empty values are skipped at substitution."""
        pairs = [("logName", self.log_name), *self.extra.items()]
        pairs += [
            ("podName", self.pod_name),
            ("podUID", ""),
            ("namespace", self.namespace),
            ("containerName", self.container_name),
            ("containerID", ""),
            ("hostname", ""),
            ("nodeName", ""),
        ]
        pairs += list(self.execution.items())
        pairs += [
            ("podRFC3339StartTime", _rfc3339(self.start_time)),
            ("podRFC3339FinishTime", _rfc3339(self.finish_time)),
            ("podUnixStartTime", _unix(self.start_time)),
            ("podUnixFinishTime", _unix(self.finish_time)),
        ]
        return pairs


def _rfc3339(moment: datetime | None) -> str:
    # Go formats in the process's local zone; propeller pods run in UTC, and UTC keeps the output stable.
    if moment is None:
        return ""
    return moment.astimezone(timezone.utc).replace(microsecond=0, tzinfo=None).isoformat() + "Z"


def _unix(moment: datetime | None) -> str:
    return "" if moment is None else str(math.floor(moment.timestamp()))


def _substitute(template: str, variables: Sequence[tuple[str, str]]) -> str:
    return substitute(template, variables, keep_empty=True)  # Go: an empty value leaves the placeholder


def _task_config_keys(uri: str) -> list[str]:
    prefix = "taskconfig."
    return [name[len(prefix) :] for name in placeholder_names(uri) if name.lower().startswith(prefix)]


def render_links(
    config: LogConfig, *pods: LogInput, task_config: Mapping[str, str] | None = None
) -> tuple[LogLink, ...]:
    """All links for ``pods``, pod by pod: the static providers, then the dynamic links selected by
    ``task_config["link_type"]`` (comma-separated names of ``dynamic-log-links``)."""
    static = config.static_plugins()
    link_types = [t for t in (task_config or {}).get("link_type", "").split(",") if t]
    links: list[LogLink] = []
    for pod in pods:
        variables = pod.variables()
        for plugin in static:
            name = _substitute(plugin.display_name, variables) + _substitute(pod.log_name, variables)
            links.extend(
                LogLink(
                    name,
                    _substitute(uri, variables),
                    plugin.message_format,
                    plugin.show_while_pending,
                    plugin.hide_once_finished,
                )
                for uri in plugin.template_uris
            )
        for link_type, plugin in config.dynamic_log_links.items():
            if link_type not in link_types:
                continue
            for uri in plugin.template_uris:
                dynamic = list(variables)
                for key in _task_config_keys(uri):
                    if key in (task_config or {}):
                        dynamic.append((f"taskConfig.{key}", (task_config or {})[key]))
                # Go: dynamic links are always JSON and their display name is not substituted.
                links.append(
                    LogLink(
                        plugin.display_name + pod.log_name,
                        _substitute(uri, dynamic),
                        MessageFormat.JSON,
                        plugin.show_while_pending,
                        plugin.hide_once_finished,
                    )
                )
    return tuple(links)


def task_execution_variables(metadata: TaskExecutionMetadata | None, generated_name: str) -> dict[str, str]:
    """The template variables taken from the task execution id (empty without ``metadata``).

    ``generatedName`` is the object's name (the name propeller generated for this attempt).
    """
    if metadata is None:
        return {}
    exec_id = metadata.task_execution_id
    node = exec_id.node_execution_id
    out = {
        "nodeID": node.node_id,
        "generatedName": generated_name,
        "taskRetryAttempt": str(exec_id.retry_attempt),
    }
    if exec_id.HasField("task_id"):
        out.update(
            taskID=exec_id.task_id.name,
            taskVersion=exec_id.task_id.version,
            taskProject=exec_id.task_id.project,
            taskDomain=exec_id.task_id.domain,
        )
    if exec_id.HasField("node_execution_id") and node.HasField("execution_id"):
        out.update(
            executionName=node.execution_id.name,
            executionProject=node.execution_id.project,
            executionDomain=node.execution_id.domain,
        )
    return out
