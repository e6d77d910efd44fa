"""``validate_object``: a job object checked against its CRD schema and its operator's rules, all problems at once.

>>> job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "train"},
...        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 2, "template": {"spec": {
...            "containers": [{"name": "pytorch", "image": "python:3.11"}]}}}}}}
>>> try:
...     validate_object(job, None, warn_without_schemas=False)
... except ObjectInvalid as e:
...     print(e)
PyTorchJob "train" is invalid (1 problem):
  spec.pytorchReplicaSpecs.Master.replicas: must be set to 1 (got integer 2)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Optional

from .problems import ObjectInvalid, Problem, describe_value
from .rules_common import Report
from .rules_kubeflow import KUBEFLOW_RULES
from .rules_ray import RAY_RULES
from .schemaset import SchemaKey, SchemaSet
from .structural import schema_problems

__all__ = ["validate_object", "object_problems", "RULES", "SUPPORTED_KINDS"]

_log = logging.getLogger(__name__)

#: (group, version, kind) -> the operator's rules.
RULES: dict[SchemaKey, Callable[[Mapping[str, Any], Report], None]] = {**KUBEFLOW_RULES, **RAY_RULES}
#: ``"<group>/<version> <Kind>"`` of every kind the rules cover (the kinds ``validate_object`` checks).
SUPPORTED_KINDS = tuple(sorted({f"{g}/{v} {k}" for g, v, k in RULES}))

_warned = threading.Event()


def _warn_no_schemas_once() -> None:
    # A log record, not warnings.warn: under `-W error` a warning would turn this degraded mode into a failure
    # of every object built (the connector builds objects in a long-running process that logs).
    if not _warned.is_set():
        _warned.set()
        _log.warning(
            "kubejobs: no CRD schemas configured, so objects are checked against the operators' rules only "
            "(unknown fields, types and ranges are not checked). Give a CRD schema directory (BackendConfig.crd_dir, "
            "`kubejobs validate --crd-dir`) or read them from the cluster (`--from-cluster`)."
        )


def _subject(obj: Mapping[str, Any]) -> str:
    kind = obj.get("kind") if isinstance(obj.get("kind"), str) else "object"
    name = (obj.get("metadata") or {}).get("name") if isinstance(obj.get("metadata"), Mapping) else None
    return f'{kind} "{name}"' if isinstance(name, str) and name else str(kind)


def _key(obj: Mapping[str, Any]) -> tuple[Optional[SchemaKey], list[Problem]]:
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    problems = []
    if not isinstance(api_version, str) or "/" not in api_version:
        problems.append(Problem(("apiVersion",), f"expected group/version, got {describe_value(api_version)}"))
    if not isinstance(kind, str) or not kind:
        problems.append(Problem(("kind",), f"required, got {describe_value(kind)}"))
    if problems:
        return None, problems
    assert isinstance(api_version, str) and isinstance(kind, str)
    group, _, version = api_version.partition("/")
    return (group, version, kind), []


def object_problems(obj: Mapping[str, Any], schemas: Optional[SchemaSet]) -> list[Problem]:
    """Every problem of ``obj`` (empty when valid); ``validate_object`` without the raise."""
    if not isinstance(obj, Mapping):
        return [Problem((), f"expected an object (mapping), got {describe_value(obj)}")]
    key, problems = _key(obj)
    if key is None:
        return problems
    group, version, kind = key
    rules = RULES.get(key)
    if schemas is not None:
        if key in schemas:
            problems.extend(schema_problems(schemas.validator(key), obj))
        elif rules is not None:
            served = schemas.served_versions(group, kind)
            shown = ", ".join(f"{group}/{v}" for v in served) if served else "none"
            problems.append(
                Problem(("apiVersion",), f"no schema for {group}/{version} {kind} in the CRDs given (served: {shown})")
            )
    if rules is None:
        known = [k for k in RULES if k[2] == kind]
        if known:
            shown = ", ".join(f"{g}/{v}" for g, v, _ in known)
            problems.append(Problem(("apiVersion",), f"{kind} is supported as {shown}, got {group}/{version}"))
        elif schemas is None or key not in schemas:
            problems.append(
                Problem(
                    ("kind",), f"unsupported kind {group}/{version} {kind}; supported: {', '.join(SUPPORTED_KINDS)}"
                )
            )
        return problems
    report = Report()
    rules(obj, report)
    # A field the schema already reported keeps only the schema's message.
    seen = {p.path for p in problems}
    problems.extend(p for p in report.problems if p.path not in seen)
    return problems


def validate_object(obj: Mapping[str, Any], schemas: Optional[SchemaSet], *, warn_without_schemas: bool = True) -> None:
    """Raise ``ObjectInvalid`` listing every problem of ``obj``, each with the path of its field.

    ``schemas`` None: only the operators' rules run, and a warning is logged once per process (unless
    ``warn_without_schemas`` is False). The object is never modified.
    """
    if schemas is None and warn_without_schemas:
        _warn_no_schemas_once()
    problems = object_problems(obj, schemas)
    if problems:
        raise ObjectInvalid(_subject(obj) if isinstance(obj, Mapping) else "object", problems)
