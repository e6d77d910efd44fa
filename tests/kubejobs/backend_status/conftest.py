"""Builders for job objects as the API server returns them, and the official CRD status schemas.

Every object a builder returns has its ``status`` checked against the status schema of the kind's official
CRD (the ``schemas`` fixture), so the tables below exercise shapes the operators can actually write.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

#: The evaluation clock of every test (tests pass it as ``now``; nothing reads the real clock).
NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=timezone.utc)

_SCHEMA_KEYS = {
    "PyTorchJob": ("kubeflow.org", "v1", "PyTorchJob"),
    "TFJob": ("kubeflow.org", "v1", "TFJob"),
    "MPIJob": ("kubeflow.org", "v1", "MPIJob"),
    "RayJob": ("ray.io", "v1", "RayJob"),
}
_SPEC_KEYS = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs", "MPIJob": "mpiReplicaSpecs"}


def at(seconds: float) -> str:
    """``NOW + seconds`` as the API server writes times (RFC 3339, UTC, whole seconds)."""
    return (NOW + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _is_rfc3339(value: object) -> bool:
    if not isinstance(value, str) or "T" not in value:
        return False
    try:
        return datetime.fromisoformat(value).tzinfo is not None
    except ValueError:
        return False


@pytest.fixture(scope="session")
def status_validator(schemas: Any) -> Callable[[str, dict[str, Any]], None]:
    import jsonschema

    checker = jsonschema.FormatChecker()
    checker.checks("date-time")(_is_rfc3339)
    validators = {
        kind: jsonschema.Draft4Validator(schemas.schema(key)["properties"]["status"], format_checker=checker)
        for kind, key in _SCHEMA_KEYS.items()
    }

    def validate(kind: str, status: dict[str, Any]) -> None:
        validators[kind].validate(status)

    return validate


@pytest.fixture
def kubeflow_job(status_validator: Callable[[str, dict[str, Any]], None]) -> Callable[..., dict[str, Any]]:
    """``kubeflow_job(kind, replicas={"Worker": 2}, conditions=[(type, status, seconds, reason, msg)], ...)``."""

    def build(
        kind: str,
        *,
        name: str = "job",
        namespace: str = "ns",
        replicas: dict[str, int] | None = None,
        conditions: list[tuple[str, str, int, str, str]] | None = None,
        created: float = -30,
        start: float | None = -20,
        completion: float | None = None,
        suspend: bool | None = None,
    ) -> dict[str, Any]:
        replicas = {"Worker": 1} if replicas is None else replicas
        status: dict[str, Any] = {}
        if conditions is not None:
            status["conditions"] = [
                {
                    "type": ctype,
                    "status": cstatus,
                    "lastTransitionTime": at(seconds),
                    "lastUpdateTime": at(seconds),
                    "reason": reason,
                    "message": message,
                }
                for ctype, cstatus, seconds, reason, message in conditions
            ]
        if start is not None:
            status["startTime"] = at(start)
        if completion is not None:
            status["completionTime"] = at(completion)
        status_validator(kind, status)
        spec: dict[str, Any] = {
            _SPEC_KEYS[kind]: {role: {"replicas": count, "template": {}} for role, count in replicas.items()},
            "runPolicy": {} if suspend is None else {"suspend": suspend},
        }
        return {
            "apiVersion": "kubeflow.org/v1",
            "kind": kind,
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": at(created), "uid": "u-1"},
            "spec": spec,
            "status": status,
        }

    return build


@pytest.fixture
def ray_job(status_validator: Callable[[str, dict[str, Any]], None]) -> Callable[..., dict[str, Any]]:
    """``ray_job(deployment, job_status, reason=..., message=..., cluster=..., dashboard=..., cluster_status=...)``."""

    def build(
        deployment: str | None = "Running",
        job_status: str | None = "RUNNING",
        *,
        name: str = "rj",
        namespace: str = "ns",
        reason: str | None = None,
        message: str | None = None,
        cluster: str | None = "rj-raycluster-abcde",
        dashboard: str | None = "rj-raycluster-abcde-head-svc.ns.svc.cluster.local:8265",
        job_id: str | None = "rj-xyz12",
        created: float = -30,
        start: float | None = -20,
        end: float | None = None,
        cluster_status: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        status: dict[str, Any] = {}
        for key, value in (
            ("rayClusterStatus", cluster_status),
            ("jobDeploymentStatus", deployment),
            ("jobStatus", job_status),
            ("reason", reason),
            ("message", message),
            ("rayClusterName", cluster),
            ("dashboardURL", dashboard),
            ("jobId", job_id),
        ):
            if value is not None:
                status[key] = value
        if start is not None:
            status["startTime"] = at(start)
        if end is not None:
            status["endTime"] = at(end)
        status_validator("RayJob", status)
        return {
            "apiVersion": "ray.io/v1",
            "kind": "RayJob",
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": at(created)},
            "spec": {"entrypoint": "python x.py", "rayClusterSpec": {"headGroupSpec": {"template": {}}}},
            "status": status,
        }

    return build


@pytest.fixture
def now() -> datetime:
    return NOW


@pytest.fixture(name="at")
def at_fixture() -> Callable[[float], str]:
    return at
