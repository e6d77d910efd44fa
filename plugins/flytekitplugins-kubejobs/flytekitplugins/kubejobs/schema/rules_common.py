"""Rule-check helpers shared by the per-operator rules: a problem collector, object metadata and pod templates.

Rules read the object defensively: a field of the wrong type is the schema's to report, so a rule that meets
one skips it instead of failing (rules also run without schemas).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Optional, TypeGuard

from ..wire import k8ssyntax
from ..wire.quantity import is_integer_resource, parse_quantity
from .problems import PathPart, Problem, describe_value

__all__ = [
    "Report",
    "as_dict",
    "as_list",
    "is_int",
    "DNS1035_LABEL",
    "DNS1123_LABEL",
    "check_metadata",
    "check_pod_template",
    "check_one_of",
]

Path = tuple[PathPart, ...]

DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
# Resources the kubelet may overcommit; every other (extended) resource needs requests == limits.
_OVERCOMMITTABLE = ("cpu", "memory", "ephemeral-storage")


class Report:
    """Collects problems; ``add(path, message)``."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def add(self, path: Sequence[PathPart], message: str) -> None:
        self.problems.append(Problem(tuple(path), message))


def as_dict(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_name(report: Report, path: Path, name: str, *, dns1035: bool, max_length: int) -> None:
    if len(name) > max_length:
        report.add(path, f"{json_str(name)} is {len(name)} characters long; at most {max_length} are allowed")
    if dns1035 and not DNS1035_LABEL.match(name):
        report.add(
            path,
            f"{json_str(name)} is not a DNS-1035 label: lower-case letters, digits and '-', starting with a letter "
            "and ending with a letter or digit",
        )
    elif not dns1035 and not _DNS1123_SUBDOMAIN.match(name):
        report.add(path, f"{json_str(name)} is not a DNS-1123 subdomain (lower-case letters, digits, '-' and '.')")


def json_str(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _check_labels(report: Report, path: Path, labels: object) -> None:
    if labels is None:
        return
    if not isinstance(labels, Mapping):
        report.add(path, f"expected object of strings, got {describe_value(labels)}")
        return
    for key, value in labels.items():
        prefix, _, name = str(key).rpartition("/")
        if (
            not name
            or len(name) > 63
            or not _LABEL_NAME.match(name)
            or (prefix and not _DNS1123_SUBDOMAIN.match(prefix))
        ):
            report.add((*path, key), "not a valid label key ([prefix/]name, name at most 63 characters)")
        if not isinstance(value, str):
            report.add((*path, key), f"label values must be strings, got {describe_value(value)}")
        elif len(value) > 63 or not _LABEL_NAME.match(value):
            report.add(
                (*path, key), f"{json_str(value)} is not a valid label value (at most 63 characters, [A-Za-z0-9_.-])"
            )


def check_metadata(report: Report, obj: Mapping[str, Any], *, dns1035: bool, max_length: int) -> None:
    """``metadata``: a name (or generateName) the operator accepts, and well-formed labels/annotations.

    The API server validates ObjectMeta itself (the CRD schema leaves it open), so these checks live here.
    """
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        report.add(("metadata",), "required: an object with at least a name")
        return
    name, generate = meta.get("name"), meta.get("generateName")
    if isinstance(name, str) and name:
        _check_name(report, ("metadata", "name"), name, dns1035=dns1035, max_length=max_length)
    elif isinstance(generate, str) and generate:
        # The server appends 5 random characters.
        _check_name(report, ("metadata", "generateName"), generate + "x" * 5, dns1035=dns1035, max_length=max_length)
    else:
        report.add(("metadata", "name"), "required field is missing (or empty)")
    _check_labels(report, ("metadata", "labels"), meta.get("labels"))
    annotations = meta.get("annotations")
    if isinstance(annotations, Mapping):
        for key, value in annotations.items():
            if not isinstance(value, str):
                report.add(
                    ("metadata", "annotations", key), f"annotation values must be strings, got {describe_value(value)}"
                )
    elif annotations is not None:
        report.add(("metadata", "annotations"), f"expected object of strings, got {describe_value(annotations)}")


def _check_resources(report: Report, path: Path, resources: Mapping[str, Any]) -> None:
    requests, limits = as_dict(resources.get("requests")), as_dict(resources.get("limits"))
    if not requests and not limits:
        return
    amounts: dict[tuple[str, str], Any] = {}
    # The API server's quantity grammar and ranges, checked with or without a CRD schema (whose pattern
    # reports the same path, and then keeps its own message).
    for side, values in (("requests", requests), ("limits", limits)):
        for name, value in values.items():
            if not isinstance(value, (str, int)) or isinstance(value, bool):
                continue  # a type the schema reports
            try:
                amount = parse_quantity(value, str(name))
            except ValueError as e:
                report.add((*path, side, name), str(e))
                continue
            if amount < 0:
                report.add((*path, side, name), f"must not be negative, got {describe_value(value)}")
            elif is_integer_resource(str(name)) and amount != amount.to_integral_value():
                report.add(
                    (*path, side, name), f"must be a whole number (cannot be split), got {describe_value(value)}"
                )
            else:
                amounts[side, name] = amount

    for name, request in requests.items():
        extended = name not in _OVERCOMMITTABLE and not str(name).startswith("hugepages-")
        if name not in limits:
            if extended and "/" in str(name):
                report.add(
                    (*path, "limits", name), f"extended resource {name} is requested, so its limit must be set (equal)"
                )
            continue
        req, lim = amounts.get(("requests", name)), amounts.get(("limits", name))
        if req is None or lim is None:
            continue
        if req > lim:
            report.add((*path, "requests", name), f"request {request} is more than the limit {limits[name]}")
        elif extended and req != lim:
            report.add(
                (*path, "requests", name), f"request {request} must equal the limit {limits[name]} (extended resource)"
            )


def _check_syntax(report: Report, path: Path, check: Any, value: object) -> None:
    """One of the API server's syntax rules (``wire.k8ssyntax``), reported at ``path``; values of a wrong
    type are the schema's to report."""
    try:
        check(str(path[-1]), value)
    except ValueError as e:
        report.add(path, str(e))
    except (TypeError, AttributeError):
        pass


def _check_pod_spec_syntax(report: Report, spec_path: Path, spec: Mapping[str, Any]) -> None:
    selector = spec.get("nodeSelector")
    if isinstance(selector, Mapping) and all(isinstance(x, str) for kv in selector.items() for x in kv):
        _check_syntax(report, (*spec_path, "nodeSelector"), k8ssyntax.check_labels, selector)
    for key, check in (("tolerations", k8ssyntax.check_tolerations), ("volumes", k8ssyntax.check_volumes)):
        items = as_list(spec.get(key))
        if items and all(isinstance(item, Mapping) for item in items):
            _check_syntax(report, (*spec_path, key), check, items)
    for kind in ("initContainers", "containers"):
        for index, container in enumerate(as_list(spec.get(kind))):
            if not isinstance(container, Mapping):
                continue
            where = (*spec_path, kind, index)
            if isinstance(container.get("image"), str) and container["image"].strip():
                _check_syntax(report, (*where, "image"), k8ssyntax.check_image, container["image"])
            env = as_list(container.get("env"))
            if env and all(isinstance(var, Mapping) for var in env):
                _check_syntax(report, (*where, "env"), k8ssyntax.check_env_names, env)


def check_pod_template(
    report: Report, path: Path, template: object, *, main_container: Optional[str] = None
) -> list[Mapping[str, Any]]:
    """Containers present, each with an image and a DNS-1123 name, requests within limits, and (when
    ``main_container`` is given) one container of that name. Returns the containers (dicts only)."""
    containers_path = (*path, "spec", "containers")
    spec = as_dict(as_dict(template).get("spec"))
    containers = [c for c in as_list(spec.get("containers")) if isinstance(c, Mapping)]
    if not containers:
        report.add(containers_path, "at least one container is required")
        return containers
    _check_labels(report, (*path, "metadata", "labels"), as_dict(as_dict(template).get("metadata")).get("labels"))
    _check_pod_spec_syntax(report, (*path, "spec"), spec)
    for index, container in enumerate(as_list(spec.get("containers"))):
        if not isinstance(container, Mapping):
            continue
        image, name = container.get("image"), container.get("name")
        if not isinstance(image, str) or not image.strip():
            report.add((*containers_path, index, "image"), "every container needs an image")
        if isinstance(name, str) and name and not (len(name) <= 63 and DNS1123_LABEL.match(name)):
            report.add((*containers_path, index, "name"), f"{json_str(name)} is not a DNS-1123 label (pods would fail)")
        elif not isinstance(name, str) or not name:
            report.add((*containers_path, index, "name"), "every container needs a name")
        _check_resources(report, (*containers_path, index, "resources"), as_dict(container.get("resources")))
    if main_container is not None and not any(c.get("name") == main_container for c in containers):
        names = ", ".join(json_str(str(c.get("name"))) for c in containers)
        report.add(
            containers_path,
            f"no container named {json_str(main_container)} (the operator runs and watches it); found {names}",
        )
    return containers


def check_one_of(report: Report, path: Path, value: object, allowed: Sequence[str], what: str = "") -> None:
    """``value`` (when present) must be one of ``allowed``; an enum the schema does not encode."""
    if value is None:
        return
    if value not in allowed:
        shown = ", ".join(json_str(a) if a else '""' for a in allowed)
        report.add(path, f"{what or 'must be'} one of {shown}; got {describe_value(value)}")
