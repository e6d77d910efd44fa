"""Connector settings: one YAML file holding the connector's own section and the backend's ``plugins:``.

::

    connector:
      namespaces: [flytesnacks-development]   # only these namespaces (empty: any)
      kubeconfig: null                         # null: $KUBECONFIG, ~/.kube/config, else in-cluster
      context: null
      cache: true                              # watch-backed cache for get()
      cache-max-informers: 64                  # watches at most; beyond: direct GETs
      cache-idle-timeout: 10m                  # a watch no call used for this long stops
      ownership-key-file: /var/run/secrets/kubejobs/ownership/key   # owner label HMAC key (a Secret)
      pod-security: baseline                   # privileged | baseline | restricted (Pod Security Standards)
      input-prefixes: [s3://my-flyte-bucket/metadata/]   # where pod-template tasks' inputs.pb may be written
      templates-namespace: flyte               # where the compute template ConfigMaps are (default: the pod's own)
      request-timeout: 10s
      watch-timeout: 5m
    plugins:                                   # the plugins: section of the FlytePropeller config
      k8s: {default-cpus: 500m}
      logs: {kubernetes-enabled: true}
    pod-templates: []                          # PodTemplate manifests tasks may name (see below)
    crd-dir: null                              # CRD schemas to validate objects against before creating

The file is named by ``$KUBEJOBS_CONNECTOR_CONFIG``; single settings can be overridden by
``KUBEJOBS_CONNECTOR_<KEY>`` variables (``KUBEJOBS_CONNECTOR_CACHE=false``,
``KUBEJOBS_CONNECTOR_NAMESPACES=a,b``). The environment is read, never changed.

>>> s = ConnectorSettings.from_mapping({"connector": {"cache": False, "request-timeout": "3s"}})
>>> s.cache, s.request_timeout
(False, 3.0)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

if TYPE_CHECKING:
    from ..backend import BackendConfig

__all__ = ["CONFIG_ENV", "SERVICE_ACCOUNT_NAMESPACE_FILE", "ConnectorSettings", "own_namespace"]

CONFIG_ENV = "KUBEJOBS_CONNECTOR_CONFIG"
#: Where a pod finds its own namespace (the service account's projected files).
SERVICE_ACCOUNT_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
_ENV_PREFIX = "KUBEJOBS_CONNECTOR_"
_TOP_LEVEL = frozenset({"connector", "plugins", "pod-templates", "crd-dir"})
_COUNTS = ("cache_max_objects", "cache_max_informers", "retry_attempts", "workers")
_DURATIONS = {
    "request_timeout",
    "connect_timeout",
    "watch_timeout",
    "retry_base_delay",
    "retry_max_delay",
    "retry_deadline",
    "cache_idle_timeout",
}


def _duration(name: str, value: object) -> float:
    from ..backend.plugins_config import parse_go_duration

    seconds = parse_go_duration(name, value)
    if seconds <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return seconds


@dataclass(frozen=True)
class ConnectorSettings:
    """How the connector reaches Kubernetes; ``backend`` is the object-building configuration."""

    #: Namespaces jobs may be created in; empty allows any (RBAC still applies).
    namespaces: tuple[str, ...] = ()
    #: Kubeconfig file (None: ``$KUBECONFIG``, else ``~/.kube/config``, else in-cluster) and context.
    kubeconfig: Optional[str] = None
    context: Optional[str] = None
    #: Serve get() from a watch-backed cache per kind and namespace (off: one GET per call).
    cache: bool = True
    #: Longest a cache keeps objects for one kind and namespace; beyond it get() falls back to GETs.
    cache_max_objects: int = 50_000
    #: Most informers (one thread and one open watch each) the cache runs; beyond it get() uses direct GETs.
    cache_max_informers: int = 64
    #: An informer no call has used for this long is stopped (its namespace's next call starts a new one).
    cache_idle_timeout: float = 600.0
    connect_timeout: float = 5.0
    request_timeout: float = 10.0
    #: Length of one watch request; the cache reconnects from its last resourceVersion after it.
    watch_timeout: float = 300.0
    #: Transient API failures (no answer, 429, 5xx) are retried until ``retry_deadline`` seconds after a call's
    #: first attempt, waiting ``retry_base_delay`` doubled per attempt up to ``retry_max_delay`` (or what a
    #: Retry-After asks); ``retry_attempts`` optionally caps the attempts too (None: the deadline alone decides).
    retry_attempts: Optional[int] = None
    retry_base_delay: float = 0.2
    retry_max_delay: float = 10.0
    retry_deadline: float = 60.0
    #: Threads running blocking client calls (also the HTTP connection pool size).
    workers: int = 32
    #: Pod Security Standards level every pod template of a job must meet (privileged, baseline, restricted).
    pod_security: str = "baseline"
    #: Where the connector may write a pod-template task's inputs.pb (Flyte's metadata prefixes); empty: nowhere.
    input_prefixes: tuple[str, ...] = ()
    #: File holding the key of the ownership label's HMAC (a mounted Secret); None: a random per-process key.
    ownership_key_file: Optional[str] = None
    #: The namespace whose labelled ConfigMaps are the compute templates tasks may name (read there only). None:
    #: the connector pod's own namespace (its service account's ``namespace`` file), else ``flyte`` (deploy/'s).
    templates_namespace: Optional[str] = None
    backend: Optional[BackendConfig] = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.namespaces, str) or not all(isinstance(n, str) and n for n in self.namespaces):
            raise TypeError(f"ConnectorSettings.namespaces must be a list of names, got {self.namespaces!r}")
        object.__setattr__(self, "namespaces", tuple(self.namespaces))
        if isinstance(self.input_prefixes, str) or not all(isinstance(n, str) and n for n in self.input_prefixes):
            raise TypeError(f"ConnectorSettings.input_prefixes must be a list of prefixes, got {self.input_prefixes!r}")
        object.__setattr__(self, "input_prefixes", tuple(self.input_prefixes))
        for name in ("kubeconfig", "context", "ownership_key_file"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise TypeError(f"ConnectorSettings.{name} must be a non-empty string or null, got {value!r}")
        if not isinstance(self.cache, bool):
            raise TypeError(f"ConnectorSettings.cache must be true or false, got {self.cache!r}")
        for name in _COUNTS:
            value = getattr(self, name)
            if name == "retry_attempts" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"ConnectorSettings.{name} must be a positive int, got {value!r}")
        for name in _DURATIONS:
            object.__setattr__(self, name, _duration(f"ConnectorSettings.{name}", getattr(self, name)))
        from ..backend.podsecurity import check_level

        check_level("ConnectorSettings.pod_security", self.pod_security)
        from ..wire.k8ssyntax import check_dns_label

        namespace = self.templates_namespace if self.templates_namespace is not None else own_namespace()
        object.__setattr__(
            self, "templates_namespace", check_dns_label("ConnectorSettings.templates_namespace", namespace)
        )

    @property
    def backend_config(self) -> BackendConfig:
        from ..backend import BackendConfig

        return self.backend if self.backend is not None else BackendConfig()

    def with_(self, **changes: Any) -> ConnectorSettings:
        """A copy with some settings changed (``settings.with_(cache=False)``)."""
        return replace(self, **changes)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], env: Optional[Mapping[str, str]] = None) -> ConnectorSettings:
        """From a parsed config file (``connector:`` and ``plugins:`` keys), then ``env`` overrides."""
        if not isinstance(data, Mapping):
            raise TypeError(f"the connector config must be a mapping, got {type(data).__name__}")
        unknown = set(data) - _TOP_LEVEL
        if unknown:
            raise ValueError(
                f"{sorted(map(str, unknown))} not known in the connector config (known: {sorted(_TOP_LEVEL)})"
            )
        section = data.get("connector") or {}
        if not isinstance(section, Mapping):
            raise TypeError(f"connector must be a mapping, got {section!r}")
        known = {f.name for f in fields(cls)} - {"backend"}
        kw: dict[str, Any] = {}
        for key, value in section.items():
            attr = str(key).replace("-", "_")
            if attr not in known:
                raise ValueError(f"connector.{key} is not a connector setting (known: {sorted(known)})")
            listed = attr in ("namespaces", "input_prefixes") and isinstance(value, list)
            kw[attr] = tuple(value or ()) if listed else value
        for key, raw in (env or {}).items():
            if key.startswith(_ENV_PREFIX) and key != CONFIG_ENV:
                attr = key[len(_ENV_PREFIX) :].lower()
                if attr in known:
                    kw[attr] = _from_env(attr, raw)
        plugins, crd_dir, templates = data.get("plugins"), data.get("crd-dir"), data.get("pod-templates")
        if plugins is not None or crd_dir is not None or templates is not None:
            from ..backend import BackendConfig

            backend = BackendConfig.from_flyte_config(plugins or {}, crd_dir=crd_dir)
            kw["backend"] = replace(backend, pod_templates=_pod_templates(templates or []))
        return cls(**kw)

    @classmethod
    def from_yaml(cls, path_or_text: Union[str, Path], env: Optional[Mapping[str, str]] = None) -> ConnectorSettings:
        """From a YAML file (path) or YAML text."""
        import yaml

        text = str(path_or_text)
        if isinstance(path_or_text, Path) or ("\n" not in text and Path(text).is_file()):
            text = Path(text).read_text()
        return cls.from_mapping(yaml.safe_load(text) or {}, env)

    @classmethod
    def from_env(cls, env: Optional[Mapping[str, str]] = None) -> ConnectorSettings:
        """The file named by ``$KUBEJOBS_CONNECTOR_CONFIG`` (defaults without it) plus env overrides."""
        env = os.environ if env is None else env
        path = env.get(CONFIG_ENV)
        return cls.from_yaml(Path(path), env) if path else cls.from_mapping({}, env)


def own_namespace(path: str = SERVICE_ACCOUNT_NAMESPACE_FILE) -> str:
    """The connector pod's namespace (its service account's ``namespace`` file), else ``flyte`` (deploy/'s)."""
    from ..wire.compute import DEFAULT_TEMPLATES_NAMESPACE

    try:
        found = Path(path).read_text().strip()
    except OSError:
        return DEFAULT_TEMPLATES_NAMESPACE
    return found or DEFAULT_TEMPLATES_NAMESPACE


def _pod_templates(manifests: object) -> dict[str, Any]:
    """``pod-templates:``, a list of PodTemplate manifests (``kubectl get podtemplate NAME -o yaml``), by name.

    The connector's RBAC does not let it read PodTemplates from the cluster, so the ones tasks name
    (``pod_template_name=``, ``plugins.k8s.default-pod-template-name``) are given here.
    """
    if not isinstance(manifests, list):
        raise TypeError(f"pod-templates must be a list of PodTemplate manifests, got {manifests!r}")
    out: dict[str, Any] = {}
    for i, manifest in enumerate(manifests):
        where = f"pod-templates[{i}]"
        if not isinstance(manifest, Mapping) or manifest.get("kind", "PodTemplate") != "PodTemplate":
            raise TypeError(f"{where} must be a PodTemplate manifest, got {manifest!r}")
        name = (manifest.get("metadata") or {}).get("name")
        template = manifest.get("template")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}.metadata.name must be a non-empty string, got {name!r}")
        if not isinstance(template, Mapping) or not isinstance(template.get("spec"), Mapping):
            raise ValueError(f"{where}.template must be a mapping with a spec, got {template!r}")
        if name in out:
            raise ValueError(f"{where}.metadata.name {name!r} is given twice")
        out[name] = dict(template)
    return out


def _from_env(attr: str, raw: str) -> Any:
    if attr in ("namespaces", "input_prefixes"):
        return tuple(n.strip() for n in raw.split(",") if n.strip())
    if attr == "cache":
        if raw.lower() not in ("true", "false", "1", "0"):
            raise ValueError(f"{_ENV_PREFIX}CACHE must be true or false, got {raw!r}")
        return raw.lower() in ("true", "1")
    if attr in _COUNTS:
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"{_ENV_PREFIX}{attr.upper()} must be an int, got {raw!r}") from None
    return raw
