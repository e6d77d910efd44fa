"""The kaniko builder's configuration: a YAML file and ``KUBEJOBS_IMAGE_BUILD_<KEY>`` overrides (no flytekit here).

``BuildSettings.from_env(environ)`` reads the file named by ``KUBEJOBS_IMAGE_BUILD_CONFIG`` (keys as below,
with ``-`` or ``_``), then each ``KUBEJOBS_IMAGE_BUILD_<KEY>`` variable wins over the file:

>>> s = BuildSettings.from_env({"KUBEJOBS_IMAGE_BUILD_NAMESPACE": "builds", "KUBEJOBS_IMAGE_BUILD_TIMEOUT": "600"})
>>> s.namespace, s.timeout, s.kaniko_image
('builds', 600, 'gcr.io/kaniko-project/executor:v1.23.2')
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from ..wire.fields import check_int, check_str_map
from ..wire.k8ssyntax import check_image
from ..wire.quantity import check_quantity

#: The kaniko executor image when none is configured (a pinned tag: the image runs as root with the context).
KANIKO_IMAGE = "gcr.io/kaniko-project/executor:v1.23.2"
#: The environment variable naming the YAML settings file.
CONFIG_ENV = "KUBEJOBS_IMAGE_BUILD_CONFIG"
#: The prefix of the per-setting environment variables (``KUBEJOBS_IMAGE_BUILD_NAMESPACE``...).
ENV_PREFIX = "KUBEJOBS_IMAGE_BUILD_"

_DNS_1123 = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"

__all__ = ["CONFIG_ENV", "ENV_PREFIX", "KANIKO_IMAGE", "BuildSettings"]


def _check_name(field_name: str, value: object, limit: int) -> str:
    import re

    if not isinstance(value, str):
        raise TypeError(f"{field_name} must be a str, got {value!r}")
    if len(value) > limit or not re.fullmatch(_DNS_1123 if limit == 63 else rf"{_DNS_1123}(\.{_DNS_1123})*", value):
        raise ValueError(f"{field_name} {value!r} is not a Kubernetes name (DNS-1123, at most {limit} characters)")
    return value


@dataclass(frozen=True)
class BuildSettings:
    """Where and how image builds run.

    ``namespace``: the build namespace (Jobs, ConfigMaps, pods); ``registry_secret``: a
    ``kubernetes.io/dockerconfigjson`` Secret in it, mounted as kaniko's ``/kaniko/.docker/config.json``
    (None: push without credentials); ``service_account``: the build pod's (None: the namespace default;
    its token is not mounted either way); ``resources``: the kaniko container's requests/limits;
    ``timeout``: seconds until the Job's ``activeDeadlineSeconds`` and the builder give up;
    ``ttl_seconds_after_finished``: how long the finished Job (and its pod, ConfigMap) stays for inspection;
    ``kubeconfig``: the client's kubeconfig (None: ``$KUBECONFIG``, ``~/.kube/config``, in-cluster);
    ``kaniko_args``: extra executor flags (``--cache=true``...), each a ``--flag``; ``pod_annotations``: the
    build pod's annotations (``sidecar.istio.io/inject: "false"``: a mesh sidecar would keep the Job running).
    """

    namespace: str = "image-builds"
    registry_secret: Optional[str] = None
    kaniko_image: str = KANIKO_IMAGE
    service_account: Optional[str] = None
    resources: Mapping[str, Mapping[str, str]] = field(
        default_factory=lambda: {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "4Gi"}}
    )
    timeout: int = 1800
    ttl_seconds_after_finished: int = 3600
    kubeconfig: Optional[str] = None
    kaniko_args: tuple[str, ...] = ()
    pod_annotations: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_name("BuildSettings.namespace", self.namespace, 63)
        if self.registry_secret is not None:
            _check_name("BuildSettings.registry_secret", self.registry_secret, 253)
        if self.service_account is not None:
            _check_name("BuildSettings.service_account", self.service_account, 253)
        check_image("BuildSettings.kaniko_image", self.kaniko_image)
        if not isinstance(self.resources, Mapping) or set(self.resources) - {"requests", "limits"}:
            raise ValueError(f"BuildSettings.resources {self.resources!r} must hold requests and/or limits only")
        for side, amounts in self.resources.items():
            if not isinstance(amounts, Mapping):
                raise TypeError(f"BuildSettings.resources.{side} must be a mapping, got {amounts!r}")
            for name, amount in amounts.items():
                check_quantity(f"BuildSettings.resources.{side}.{name}", str(amount))
        for name in ("timeout", "ttl_seconds_after_finished"):
            value = check_int(f"BuildSettings.{name}", getattr(self, name))
            if value <= 0:
                raise ValueError(f"BuildSettings.{name} must be positive, got {value}")
        if not isinstance(self.pod_annotations, Mapping):
            raise TypeError(f"BuildSettings.pod_annotations must be a mapping, got {self.pod_annotations!r}")
        check_str_map("BuildSettings.pod_annotations", self.pod_annotations)
        for arg in self.kaniko_args:
            if not isinstance(arg, str) or not arg.startswith("--") or any(ord(c) < 32 for c in arg):
                raise ValueError(f"BuildSettings.kaniko_args {arg!r} must be a --flag[=value]")
            if arg.split("=", 1)[0] in {"--context", "--dockerfile", "--destination", "--custom-platform"}:
                raise ValueError(f"BuildSettings.kaniko_args {arg!r}: the builder sets this flag itself")

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> BuildSettings:
        """Settings from a mapping of keys (``namespace``, ``registry-secret`` or ``registry_secret``...)."""
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in values.items():
            name = str(key).replace("-", "_").lower()
            if name not in names:
                raise ValueError(f"image build setting {key!r} is unknown; known: {', '.join(sorted(names))}")
            kwargs[name] = value
        if "kaniko_args" in kwargs:
            args = kwargs["kaniko_args"]
            kwargs["kaniko_args"] = tuple(args.split()) if isinstance(args, str) else tuple(args)
        for name in ("timeout", "ttl_seconds_after_finished"):
            if isinstance(kwargs.get(name), str) and kwargs[name].isdigit():
                kwargs[name] = int(kwargs[name])
        return cls(**kwargs)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> BuildSettings:
        """The file of ``KUBEJOBS_IMAGE_BUILD_CONFIG`` (if set), then ``KUBEJOBS_IMAGE_BUILD_<KEY>`` variables."""
        values: dict[str, Any] = {}
        path = environ.get(CONFIG_ENV)
        if path:
            import yaml

            with open(path, encoding="utf-8") as f:
                loaded = yaml.safe_load(f) or {}
            if not isinstance(loaded, Mapping):
                raise ValueError(f"{CONFIG_ENV} {path!r} must hold a mapping of settings")
            values.update({str(k).replace("-", "_").lower(): v for k, v in loaded.items()})
        for key, value in environ.items():
            if key.startswith(ENV_PREFIX) and key != CONFIG_ENV:
                name = key[len(ENV_PREFIX) :].lower()
                if name in ("resources", "pod_annotations"):
                    import yaml

                    values[name] = yaml.safe_load(value)
                else:
                    values[name] = value
        return cls.from_mapping(values)
