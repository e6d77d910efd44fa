"""Kubernetes' own syntax rules for the pod settings users give, checked at construction (stdlib only).

The API server refuses these when the job's pods are created, long after ``pyflyte run``/``register``
succeeded; checked here, the mistake is reported where it is written, naming the field and the value.
The rules are the API server's validation (``k8s.io/apimachinery`` label and DNS-1123 names; the core
``Toleration``, ``EnvVar`` and ``Volume`` checks).

>>> check_labels("Worker.node_selector", {"cloud.google.com/gke-accelerator": "nvidia-a100"})
{'cloud.google.com/gke-accelerator': 'nvidia-a100'}
>>> check_labels("Worker.node_selector", {"gpu type": "a100"})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: Worker.node_selector key 'gpu type' is not a Kubernetes label key: a name of at most 63 ...
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "check_dns_label",
    "check_labels",
    "check_env_names",
    "check_tolerations",
    "check_volumes",
    "check_volume_mounts",
    "check_image",
    "check_pod_spec",
]

_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?\Z")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_LABEL_KEY_RULE = (
    "a name of at most 63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or"
    " digit, with an optional DNS subdomain prefix and '/'"
)
_TOLERATION_OPERATORS = ("Exists", "Equal")
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _label_name_ok(name: str) -> bool:
    return len(name) <= 63 and bool(_LABEL_NAME.match(name))


def _label_key_ok(key: str) -> bool:
    prefix, slash, name = key.rpartition("/")
    if slash and not (prefix and len(prefix) <= 253 and _DNS_SUBDOMAIN.match(prefix)):
        return False
    return _label_name_ok(name)


def check_dns_label(field: str, value: object) -> str:
    """``value`` if it is a DNS-1123 label (an object name that is also a label value, such as a Kueue
    LocalQueue or WorkloadPriorityClass name written in a label)."""
    if not isinstance(value, str) or len(value) > 63 or not _DNS_LABEL.match(value):
        raise ValueError(
            f"{field} must be a DNS-1123 label (at most 63 lower-case letters, digits and '-', starting and ending"
            f" with a letter or digit), got {value!r:.200}"
        )
    return value


def check_labels(field: str, value: Mapping[str, str]) -> dict[str, str]:
    """``value`` (str keys and values already checked) if every key is a label key and every value a
    label value (empty, or a label name)."""
    for key, item in value.items():
        if not _label_key_ok(key):
            raise ValueError(f"{field} key {key!r} is not a Kubernetes label key: {_LABEL_KEY_RULE}")
        if item and not _label_name_ok(item):
            raise ValueError(
                f"{field}[{key!r}] value {item!r} is not a Kubernetes label value: empty, or at most 63 letters,"
                " digits, '-', '_' and '.', starting and ending with a letter or digit"
            )
    return dict(value)


def check_env_names(field: str, env: Sequence[Mapping[str, Any]]) -> None:
    """Env var names: non-empty printable ASCII without ``=`` (the API server's rule since 1.34)."""
    for i, var in enumerate(env):
        name = var.get("name")
        if not isinstance(name, str) or not name or "=" in name or not all(" " <= c <= "~" for c in name):
            raise ValueError(
                f"{field}[{i}] name {name!r} is not an environment variable name: printable ASCII without '='"
            )


def check_tolerations(field: str, tolerations: Sequence[Mapping[str, Any]]) -> None:
    """Operators ``Exists``/``Equal``, the taint effects Kubernetes has, keys of label syntax, no value with
    ``Exists``, an empty key only with ``Exists``, ``tolerationSeconds`` only with ``NoExecute``."""
    for i, tol in enumerate(tolerations):
        where = f"{field}[{i}]"
        operator = tol.get("operator", "Equal")
        if operator not in _TOLERATION_OPERATORS:
            raise ValueError(f"{where}.operator must be Exists or Equal, got {operator!r}")
        key = tol.get("key", "")
        if not isinstance(key, str) or (key and not _label_key_ok(key)):
            raise ValueError(f"{where}.key {key!r} is not a Kubernetes label key: {_LABEL_KEY_RULE}")
        if not key and operator != "Exists":
            raise ValueError(f"{where}: an empty key tolerates every taint and needs operator Exists, got {operator!r}")
        value = tol.get("value", "")
        if operator == "Exists" and value:
            raise ValueError(f"{where}.value must be empty with operator Exists, got {value!r}")
        if value and (not isinstance(value, str) or not _label_name_ok(value)):
            raise ValueError(f"{where}.value {value!r} is not a Kubernetes label value")
        effect = tol.get("effect", "")
        if effect and effect not in _TAINT_EFFECTS:
            raise ValueError(f"{where}.effect must be one of {', '.join(_TAINT_EFFECTS)} or empty, got {effect!r}")
        if tol.get("tolerationSeconds") is not None and effect != "NoExecute":
            raise ValueError(f"{where}.tolerationSeconds is only allowed with effect NoExecute, got {effect!r}")


def check_volumes(field: str, volumes: Sequence[Mapping[str, Any]], sourceless: bool = False) -> None:
    """Each volume: a DNS-1123 label name and exactly one source (at most one with ``sourceless``: Kubernetes
    makes a source-less volume an emptyDir, and the official plugins pass a task-level pod template as is)."""
    for i, volume in enumerate(volumes):
        name = volume.get("name")
        if not isinstance(name, str) or len(name) > 63 or not _DNS_LABEL.match(name):
            raise ValueError(
                f"{field}[{i}].name {name!r} is not a volume name: at most 63 lowercase letters, digits and '-',"
                " starting and ending with a letter or digit"
            )
        sources = sorted(set(volume) - {"name"})
        if len(sources) > 1 or (not sources and not sourceless):
            raise ValueError(f"{field}[{i}] ({name!r}) must have exactly one volume source, got {sources or 'none'}")


def check_volume_mounts(field: str, mounts: Sequence[Mapping[str, Any]]) -> None:
    """Each mount names a volume and an absolute-or-relative, non-empty path without ``:``."""
    for i, mount in enumerate(mounts):
        if not isinstance(mount.get("name"), str) or not mount["name"]:
            raise ValueError(f"{field}[{i}] needs the name of a volume, got {mount!r}")
        path = mount.get("mountPath")
        if not isinstance(path, str) or not path or ":" in path:
            raise ValueError(f"{field}[{i}].mountPath must be a non-empty path without ':', got {path!r}")


def check_image(field: str, image: object) -> str:
    """An image reference: non-empty printable ASCII with no whitespace anywhere."""
    if not isinstance(image, str):
        raise TypeError(f"{field} must be a str, got {image!r} ({type(image).__name__})")
    if not image or not all("!" <= c <= "~" for c in image):
        raise ValueError(f"{field} {image!r} is not a container image reference: no whitespace, ASCII only")
    return image


def _items(field: str, value: object) -> list[Mapping[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(item, Mapping) for item in value):
        raise TypeError(f"{field} must be a list of objects, got {value!r}")
    return value


def check_pod_spec(field: str, spec: Mapping[str, Any], sourceless_volumes: bool = False) -> None:
    """The parts of a user's (camelCase) pod spec these rules cover: node selector, tolerations, volumes
    (``sourceless_volumes``: see check_volumes), and each container's image, env var names and volume mounts."""
    selector = spec.get("nodeSelector")
    if selector is not None:
        if not isinstance(selector, Mapping) or not all(isinstance(x, str) for kv in selector.items() for x in kv):
            raise TypeError(f"{field}.nodeSelector must be a dict of str to str, got {selector!r}")
        check_labels(f"{field}.nodeSelector", selector)
    if spec.get("tolerations") is not None:
        check_tolerations(f"{field}.tolerations", _items(f"{field}.tolerations", spec["tolerations"]))
    if spec.get("volumes") is not None:
        check_volumes(f"{field}.volumes", _items(f"{field}.volumes", spec["volumes"]), sourceless_volumes)
    for kind in ("initContainers", "containers"):
        for i, container in enumerate(_items(f"{field}.{kind}", spec.get(kind) or [])):
            where = f"{field}.{kind}[{i}]"
            if container.get("image") is not None:
                check_image(f"{where}.image", container["image"])
            if container.get("env") is not None:
                check_env_names(f"{where}.env", _items(f"{where}.env", container["env"]))
            if container.get("volumeMounts") is not None:
                check_volume_mounts(f"{where}.volumeMounts", _items(f"{where}.volumeMounts", container["volumeMounts"]))
