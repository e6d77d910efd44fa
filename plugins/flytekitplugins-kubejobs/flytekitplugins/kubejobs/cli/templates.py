"""What ``kubejobs templates`` and ``kubejobs render --templates/--from-cluster`` read and write: compute templates
as documents (YAML/JSON files) and as the labelled ConfigMaps the connector reads (``wire.compute``), through the
user's kubeconfig. PyYAML and the kubernetes client are imported inside the functions.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Optional

from ..wire.compute import LABEL_SELECTOR, LABELS, TemplateSet, TemplateSpec, parse_configmap, parse_document
from .errors import fail
from .manifests import documents

__all__ = [
    "TemplateApi",
    "parse_toleration",
    "parse_pairs",
    "template_from_flags",
    "templates_from_file",
]


def parse_pairs(option: str, values: Sequence[str]) -> dict[str, str]:
    """``NAME=VALUE`` flags (``--node-selector pool=a100``) as a dict; a flag without ``=`` is an error."""
    out: dict[str, str] = {}
    for value in values:
        key, eq, item = value.partition("=")
        if not eq or not key:
            fail(f"{option} takes NAME=VALUE, got {value!r}")
        out[key] = item
    return out


def parse_toleration(value: str) -> dict[str, Any]:
    """``KEY[=VALUE][:EFFECT]`` (kubectl's taint spelling) as a toleration: ``Equal`` with a value, else
    ``Exists``; or a JSON object (``{"key": ..., "tolerationSeconds": 60, ...}``).

    >>> parse_toleration("nvidia.com/gpu:NoSchedule")
    {'key': 'nvidia.com/gpu', 'operator': 'Exists', 'effect': 'NoSchedule'}
    >>> parse_toleration("pool=a100")
    {'key': 'pool', 'operator': 'Equal', 'value': 'a100'}
    """
    if value.lstrip().startswith("{"):
        try:
            parsed = json.loads(value)
        except ValueError as e:
            fail(f"--toleration {value!r} is not a JSON object: {e}")
        if not isinstance(parsed, dict):
            fail(f"--toleration {value!r} is not a JSON object")
        return parsed
    head, _, effect = value.partition(":")
    key, eq, item = head.partition("=")
    tol: dict[str, Any] = {"key": key, "operator": "Equal" if eq else "Exists"}
    if eq:
        tol["value"] = item
    if effect:
        tol["effect"] = effect
    return tol


def template_from_flags(
    name: str,
    cpu: Optional[str],
    memory: Optional[str],
    gpu: int,
    gpu_resource_name: Optional[str],
    extended: Sequence[str],
    tolerations: Sequence[str],
    node_selector: Sequence[str],
) -> TemplateSpec:
    """The template the ``create`` flags describe, validated as a stored one is."""
    doc: dict[str, Any] = {"name": name}
    for key, value in (("cpu", cpu), ("memory", memory), ("gpuResourceName", gpu_resource_name)):
        if value is not None:
            doc[key] = value
    if gpu:
        doc["gpu"] = gpu
    if extended:
        doc["extendedResources"] = parse_pairs("--extended-resource", extended)
    if tolerations:
        doc["tolerations"] = [parse_toleration(t) for t in tolerations]
    if node_selector:
        doc["nodeSelector"] = parse_pairs("--node-selector", node_selector)
    return parse_document("the command line", doc)


def _documents(path: str) -> Iterator[tuple[str, Any]]:
    for label, doc in documents(path):
        if isinstance(doc, list):  # a YAML list of templates
            for i, item in enumerate(doc):
                yield f"{label}[{i}]", item
        else:
            yield label, doc


def templates_from_file(path: str) -> list[TemplateSpec]:
    """Every template of a YAML/JSON file: template documents (``name``, ``cpu``, ...) or template ConfigMaps (as
    ``kubectl get configmap -o yaml`` prints them, ``List``s included); the first invalid one fails with its message."""
    out: list[TemplateSpec] = []
    seen: set[str] = set()
    for label, doc in _documents(path):
        try:
            if isinstance(doc, Mapping) and doc.get("kind") == "ConfigMap":
                spec = parse_configmap(doc)
            else:
                spec = parse_document(label, doc)
        except (TypeError, ValueError) as e:
            fail(f"{label}: {e}")
        if spec.name in seen:
            fail(f"{label}: compute template {spec.name!r} is given twice")
        seen.add(spec.name)
        out.append(spec)
    if not out:
        fail(f"{path} holds no compute template")
    return out


class TemplateApi:
    """The template ConfigMaps of one namespace, through the user's kubeconfig (``$KUBECONFIG``, ``~/.kube/config``,
    else in-cluster)."""

    def __init__(self, namespace: str):
        from kubernetes import client

        from ..connector.kubeconfig import KubeconfigError, client_configuration

        try:
            self._api_client = client.ApiClient(client_configuration())
        except KubeconfigError as e:
            fail(str(e))
        self.namespace = namespace
        self._core: Any = client.CoreV1Api(self._api_client)

    def close(self) -> None:
        self._api_client.close()  # type: ignore[no-untyped-call]

    def __enter__(self) -> TemplateApi:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException

        try:
            response = fn(*args, _preload_content=False, **kwargs)
        except ApiException as e:
            try:
                message = json.loads(e.body or "{}").get("message") or e.reason
            except ValueError:
                message = e.reason
            raise _ApiFailure(int(e.status or 0), f"{what}: {e.status} {message}") from None
        except Exception as e:  # connection refused, DNS, TLS...
            fail(f"{what}: cannot reach {self._api_client.configuration.host}: {getattr(e, 'reason', None) or e}")
        return json.loads(response.data or b"{}")

    def list(self) -> TemplateSet:
        """The namespace's templates as the connector sees them (malformed ones under ``invalid``)."""
        body = self._checked(
            f"listing the compute templates of namespace {self.namespace}",
            self._core.list_namespaced_config_map,
            self.namespace,
            label_selector=LABEL_SELECTOR,
        )
        return TemplateSet.from_configmaps(body.get("items") or [], self.namespace)

    def read(self, name: str) -> Optional[dict[str, Any]]:
        """The ConfigMap ``name`` (None when it does not exist)."""
        try:
            found: dict[str, Any] = self._call(
                f"reading ConfigMap {self.namespace}/{name}",
                self._core.read_namespaced_config_map,
                name,
                self.namespace,
            )
        except _ApiFailure as e:
            if e.status == 404:
                return None
            fail(str(e))
        return found

    def _checked(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return self._call(what, fn, *args, **kwargs)
        except _ApiFailure as e:
            fail(str(e))

    def _template_configmap(self, name: str) -> Optional[dict[str, Any]]:
        found = self.read(name)
        if found is None:
            return None
        labels = (found.get("metadata") or {}).get("labels") or {}
        if any(labels.get(k) != v for k, v in LABELS.items()):
            fail(f"ConfigMap {self.namespace}/{name} exists and is not a compute template (no {LABEL_SELECTOR} label)")
        return found

    def create(self, spec: TemplateSpec, replace: bool) -> str:
        """Create (or, with ``replace``, overwrite) the template's ConfigMap; returns what was done."""
        body = spec.to_configmap(self.namespace)
        where = f"compute template {spec.name!r} (ConfigMap {self.namespace}/{spec.name})"
        existing = self._template_configmap(spec.name)
        if existing is not None:
            if not replace:
                fail(f"{where} already exists; give --replace to overwrite it")
            body["metadata"]["resourceVersion"] = existing["metadata"].get("resourceVersion")
            self._checked(
                f"replacing {where}", self._core.replace_namespaced_config_map, spec.name, self.namespace, body
            )
            return f"replaced: {where}"
        self._checked(f"creating {where}", self._core.create_namespaced_config_map, self.namespace, body)
        return f"created: {where}"

    def get(self, name: str) -> dict[str, Any]:
        """The stored ConfigMap of template ``name`` (a template ConfigMap, or the command fails)."""
        found = self._template_configmap(name)
        if found is None:
            fail(f"compute template {name!r} does not exist in namespace {self.namespace}")
        return found

    def delete(self, name: str) -> str:
        found = self.get(name)
        uid = (found.get("metadata") or {}).get("uid")
        self._checked(
            f"deleting compute template {name!r}",
            self._core.delete_namespaced_config_map,
            name,
            self.namespace,
            body={"preconditions": {"uid": uid}} if uid else None,
        )
        return f"deleted: compute template {name!r} (ConfigMap {self.namespace}/{name})"


class _ApiFailure(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
