"""Compute templates: THE validation of a template's fields, and the stored form kept in the cluster.

One check (:func:`normalize_template`) serves both the SDK's ``ComputeTemplate`` objects and the named
templates platform engineers store as labelled ConfigMaps, so a stored template is refused for exactly what
an object would be refused for. Standard library only: the connector and ``kubejobs render`` parse stored
templates without flytekit.

The stored form (after KubeRay's API server, which keeps its compute templates as ConfigMaps labelled
``ray.io/config-type: compute-template``; the layout here is this project's own)::

    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: a100x8                                   # the template's name (a DNS-1123 label)
      namespace: flyte                               # the connector's namespace; others are ignored
      labels: {kubejobs.flyte.org/config-type: compute-template}
    data:                                            # every value a string; all keys optional
      cpu: "8"
      memory: 64Gi
      gpu: "8"
      gpuResourceName: nvidia.com/gpu                # the accelerator the gpu count means
      extendedResources: '{"rdma/hca": "1"}'         # JSON object
      tolerations: '[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]'   # JSON list
      nodeSelector: '{"pool": "a100"}'               # JSON object

A data key outside these is refused (a template carries resources, tolerations and a node selector only:
nothing that touches pod security).

>>> spec = parse_configmap({"metadata": {"name": "small", "namespace": "flyte", "labels": LABELS},
...                         "data": {"cpu": "2", "memory": "4Gi"}})
>>> spec.amounts()
{'cpu': '2', 'memory': '4Gi'}
>>> parse_document("t.yaml", {"name": "bad", "memory": "lots"})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: compute template 'bad' (t.yaml).memory is not a Kubernetes quantity: 'lots' ...
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from .extension import DEFAULT_GPU_RESOURCE_NAME
from .fields import check_int, check_str, check_str_map
from .k8ssyntax import check_dns_label, check_labels, check_tolerations
from .quantity import check_quantity, is_integer_resource

__all__ = [
    "DEFAULT_TEMPLATES_NAMESPACE",
    "LABELS",
    "LABEL_SELECTOR",
    "STORED_KEYS",
    "TemplateSet",
    "TemplateSpec",
    "check_template_name",
    "normalize_template",
    "parse_configmap",
    "parse_document",
]

#: The label that marks a ConfigMap as a compute template (the connector lists and watches by it).
LABELS = {"kubejobs.flyte.org/config-type": "compute-template"}
#: ``LABELS`` as a label selector.
LABEL_SELECTOR = ",".join(f"{k}={v}" for k, v in LABELS.items())
#: Where templates live unless configured otherwise: the connector's namespace in ``deploy/``.
DEFAULT_TEMPLATES_NAMESPACE = "flyte"
#: The data keys of a stored template (and the keys of a template document), camelCase as in Kubernetes.
STORED_KEYS = (
    "cpu",
    "memory",
    "gpu",
    "gpuResourceName",
    "extendedResources",
    "tolerations",
    "nodeSelector",
)
# Document spelling <-> the ComputeTemplate field it is.
_SNAKE = {
    "cpu": "cpu",
    "memory": "memory",
    "gpu": "gpu",
    "gpuResourceName": "gpu_resource_name",
    "extendedResources": "extended_resources",
    "tolerations": "tolerations",
    "nodeSelector": "node_selector",
}
# A qualified Kubernetes resource name: optional DNS prefix, then a name segment.
_RESOURCE_NAME = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_STANDARD = {"cpu", "memory", "ephemeral-storage"}
_TOLERATION_KEYS = frozenset({"key", "operator", "value", "effect", "tolerationSeconds"})


def check_template_name(field_name: str, value: object) -> str:
    """A template name: a DNS-1123 label (it is a ConfigMap name and a label value)."""
    return check_dns_label(field_name, value)


def normalize_template(
    where: str,
    *,
    cpu: object = None,
    memory: object = None,
    gpu: object = 0,
    gpu_resource_name: object = DEFAULT_GPU_RESOURCE_NAME,
    extended_resources: object = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    node_selector: object = None,
    camel: bool = False,
) -> dict[str, Any]:
    """THE checks of a compute template's fields; the normalized values (quantities as strings, tolerations as
    a tuple of dicts). ``where`` prefixes every message (``ComputeTemplate('a100')``); ``camel`` names fields
    as the stored form does (``gpuResourceName``) instead of the Python ones (``gpu_resource_name``)."""

    def name(snake: str) -> str:
        return f"{where}.{next(k for k, v in _SNAKE.items() if v == snake) if camel else snake}"

    out: dict[str, Any] = {
        "cpu": None if cpu is None else check_quantity(name("cpu"), cpu),
        "memory": None if memory is None else check_quantity(name("memory"), memory),
        "gpu": check_int(name("gpu"), gpu),
    }
    accelerator = check_str(name("gpu_resource_name"), gpu_resource_name)
    if not _RESOURCE_NAME.match(accelerator) or accelerator in _STANDARD:
        raise ValueError(f"{name('gpu_resource_name')} is not an accelerator resource name: {accelerator!r}")
    out["gpu_resource_name"] = accelerator
    extended_field = name("extended_resources")
    if extended_resources is None:
        extended_resources = {}
    if not isinstance(extended_resources, Mapping):
        raise TypeError(f"{extended_field} must be a dict, got {extended_resources!r}")
    extended: dict[str, str] = {}
    for key, value in extended_resources.items():
        if not isinstance(key, str) or not _RESOURCE_NAME.match(key) or key in _STANDARD:
            raise ValueError(f"{extended_field} has an invalid resource name: {key!r}")
        extended[key] = check_quantity(f"{extended_field}[{key!r}]", value, integer=is_integer_resource(key))
    out["extended_resources"] = extended
    tolerations_field = name("tolerations")
    for i, tol in enumerate(tolerations):
        unknown = sorted(set(tol) - _TOLERATION_KEYS)
        if unknown:
            raise ValueError(
                f"{tolerations_field}[{i}] has unknown fields {unknown}; a toleration has {sorted(_TOLERATION_KEYS)}"
            )
        seconds = tol.get("tolerationSeconds")
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int)):
            raise TypeError(f"{tolerations_field}[{i}].tolerationSeconds must be an int, got {seconds!r}")
    check_tolerations(tolerations_field, tolerations)
    out["tolerations"] = tuple(dict(t) for t in tolerations)
    selector_field = name("node_selector")
    labels = check_str_map(selector_field, {} if node_selector is None else node_selector)
    out["node_selector"] = check_labels(selector_field, labels)
    return out


@dataclass(frozen=True)
class TemplateSpec:
    """A validated compute template as stored in the cluster (quantities as strings)."""

    name: str
    cpu: Optional[str] = None
    memory: Optional[str] = None
    gpu: int = 0
    gpu_resource_name: str = DEFAULT_GPU_RESOURCE_NAME
    extended_resources: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[dict[str, Any], ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)

    def amounts(self, gpu_name: Optional[str] = None) -> dict[str, str]:
        """``{resource name: quantity}`` the template asks for, as both request and limit; the GPU count under
        ``gpu_name`` (default: the template's own accelerator)."""
        out: dict[str, str] = {}
        if self.cpu is not None:
            out["cpu"] = self.cpu
        if self.memory is not None:
            out["memory"] = self.memory
        if self.gpu:
            out[gpu_name or self.gpu_resource_name] = str(self.gpu)
        out.update(self.extended_resources)
        return out

    def to_document(self) -> dict[str, Any]:
        """The template as a document (``kubejobs templates get -o yaml``, ``create -f``): set fields only."""
        doc: dict[str, Any] = {"name": self.name}
        if self.cpu is not None:
            doc["cpu"] = self.cpu
        if self.memory is not None:
            doc["memory"] = self.memory
        if self.gpu:
            doc["gpu"] = self.gpu
        if self.gpu_resource_name != DEFAULT_GPU_RESOURCE_NAME:
            doc["gpuResourceName"] = self.gpu_resource_name
        if self.extended_resources:
            doc["extendedResources"] = dict(self.extended_resources)
        if self.tolerations:
            doc["tolerations"] = [dict(t) for t in self.tolerations]
        if self.node_selector:
            doc["nodeSelector"] = dict(self.node_selector)
        return doc

    def to_configmap(self, namespace: str) -> dict[str, Any]:
        """The labelled ConfigMap that stores the template (module docstring)."""
        data: dict[str, str] = {}
        for key, value in self.to_document().items():
            if key == "name":
                continue
            data[key] = json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else str(value)
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": self.name, "namespace": namespace, "labels": dict(LABELS)},
            "data": data,
        }


def _spec(where: str, name: str, values: Mapping[str, Any]) -> TemplateSpec:
    tolerations = values.get("tolerations")
    if tolerations is None:
        tolerations = []
    if not isinstance(tolerations, list) or not all(isinstance(t, Mapping) for t in tolerations):
        raise TypeError(f"{where}.tolerations must be a list of objects, got {tolerations!r:.200}")
    normalized = normalize_template(
        where,
        cpu=values.get("cpu"),
        memory=values.get("memory"),
        gpu=values.get("gpu", 0),
        gpu_resource_name=values.get("gpuResourceName", DEFAULT_GPU_RESOURCE_NAME),
        extended_resources=values.get("extendedResources"),
        tolerations=tolerations,
        node_selector=values.get("nodeSelector"),
        camel=True,
    )
    return TemplateSpec(name=name, **normalized)


def _unknown_keys(where: str, keys: Iterable[str], allowed: Iterable[str]) -> None:
    unknown = sorted(set(keys) - set(allowed))
    if unknown:
        raise ValueError(
            f"{where} has unknown keys {str(unknown)[:200]}; a compute template holds only {list(STORED_KEYS)} "
            "(resources, tolerations and a node selector)"
        )


def parse_document(source: str, doc: object) -> TemplateSpec:
    """A template document (``name`` plus the ``STORED_KEYS``, YAML/JSON values), as ``kubejobs templates create
    -f`` and ``kubejobs render --templates`` read them; ``ValueError``/``TypeError`` naming the field."""
    if not isinstance(doc, Mapping):
        raise TypeError(f"{source}: a compute template must be a mapping, got {doc!r:.200}")
    name = check_template_name(f"{source}: compute template name", doc.get("name"))
    where = f"compute template {name!r} ({source})"
    _unknown_keys(where, doc, ("name", *STORED_KEYS))
    return _spec(where, name, doc)


def parse_configmap(obj: Mapping[str, Any], namespace: Optional[str] = None) -> TemplateSpec:
    """The template a ConfigMap stores (module docstring); ``ValueError``/``TypeError`` with a message naming the
    ConfigMap and the field. With ``namespace``, a ConfigMap from any other namespace is refused."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        raise TypeError(f"a compute template ConfigMap needs metadata, got {obj!r:.200}")
    found_ns = meta.get("namespace")
    cm = f"ConfigMap {found_ns}/{meta.get('name')}"
    if namespace is not None and found_ns != namespace:
        raise ValueError(f"{cm} is not in the templates namespace {namespace!r}")
    labels = meta.get("labels") or {}
    if not isinstance(labels, Mapping) or any(labels.get(k) != v for k, v in LABELS.items()):
        raise ValueError(f"{cm} does not carry the compute template label {LABEL_SELECTOR}")
    name = check_template_name(f"{cm}: the template name (metadata.name)", meta.get("name"))
    where = f"compute template {name!r} ({cm})"
    if obj.get("binaryData"):
        raise ValueError(f"{where} has binaryData; a compute template is text data only")
    data = obj.get("data") or {}
    if not isinstance(data, Mapping):
        raise TypeError(f"{where}: data must be a mapping, got {data!r:.200}")
    _unknown_keys(f"{where} data", data, STORED_KEYS)
    values: dict[str, Any] = {}
    for key, raw in data.items():
        if not isinstance(raw, str):
            raise TypeError(f"{where}.{key} must be a string in ConfigMap data, got {raw!r:.200}")
        if key in ("extendedResources", "tolerations", "nodeSelector"):
            try:
                values[key] = json.loads(raw)
            except ValueError as e:
                raise ValueError(f"{where}.{key} is not JSON: {e}") from None
        elif key == "gpu":
            if not raw.strip().isascii() or not raw.strip().isdigit():
                raise ValueError(f"{where}.gpu must be a whole number, got {raw!r:.200}")
            values[key] = int(raw.strip())
        else:
            values[key] = raw
    return _spec(where, name, values)


@dataclass(frozen=True)
class TemplateSet:
    """The compute templates a backend resolves names against: the valid ones by name, the stored ones that
    failed validation (name -> why), and where they came from (for messages)."""

    templates: Mapping[str, TemplateSpec] = field(default_factory=dict)
    invalid: Mapping[str, str] = field(default_factory=dict)
    #: Where the set came from, shown in errors (``namespace 'flyte'``, ``templates.yaml``).
    source: str = ""

    @classmethod
    def from_configmaps(cls, objs: Iterable[Mapping[str, Any]], namespace: str) -> TemplateSet:
        """Every labelled ConfigMap of ``namespace`` among ``objs`` (others are ignored: a template in another
        namespace is no template), parsed; a malformed one goes to ``invalid`` with its message."""
        templates: dict[str, TemplateSpec] = {}
        invalid: dict[str, str] = {}
        for obj in objs:
            meta = obj.get("metadata") if isinstance(obj, Mapping) else None
            if not isinstance(meta, Mapping) or meta.get("namespace") != namespace:
                continue
            name = meta.get("name")
            if not isinstance(name, str):
                continue
            try:
                templates[name] = parse_configmap(obj, namespace)
            except (TypeError, ValueError) as e:
                invalid[name] = str(e)
        return cls(templates, invalid, f"namespace {namespace!r}")

    def names(self) -> list[str]:
        return sorted(self.templates)

    def resolve(self, field_name: str, name: str) -> TemplateSpec:
        """The template called ``name``; a ``LookupError`` naming it and the templates that exist, or saying why
        the stored one is invalid."""
        found = self.templates.get(name)
        if found is not None:
            return found
        if not self.source:
            raise LookupError(
                f"{field_name}: compute template {name!r} cannot be resolved: no compute templates were given (the "
                "connector reads them from its namespace; kubejobs render takes --templates FILE or --from-cluster)"
            )
        where = f" in {self.source}"
        if name in self.invalid:
            raise LookupError(f"{field_name}: compute template {name!r}{where} is invalid: {self.invalid[name]}")
        existing = ", ".join(repr(n) for n in self.names()) or "none"
        raise LookupError(
            f"{field_name}: compute template {name!r} does not exist{where}; existing templates: {existing}"
        )
