"""Builders for the backend tests: TaskTemplates and TaskExecutionMetadata as a connector receives them,
and an independent CRD check of every built object (jsonschema against the operators' CRDs)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

import pytest
from flyteidl.admin.agent_pb2 import TaskExecutionMetadata
from flyteidl.core import tasks_pb2
from flytekitplugins.kubejobs.backend import BackendConfig, build_object
from google.protobuf.struct_pb2 import Struct

_SCHEMA_KEYS = {
    "PyTorchJob": ("kubeflow.org", "v1", "PyTorchJob"),
    "TFJob": ("kubeflow.org", "v1", "TFJob"),
    "MPIJob": ("kubeflow.org", "v1", "MPIJob"),
    "RayJob": ("ray.io", "v1", "RayJob"),
}
_IDL = {"cpu": 1, "gpu": 2, "memory": 3, "ephemeral-storage": 5}

ARGS = [
    "pyflyte-execute",
    "--inputs",
    "{{.input}}",
    "--output-prefix",
    "{{.outputPrefix}}",
    "--resolver",
    "r",
    "--",
    "task-module",
    "m",
    "task-name",
    "t",
]


def idl_resources(
    requests: Optional[Mapping[str, str]] = None, limits: Optional[Mapping[str, str]] = None
) -> tasks_pb2.Resources:
    def entries(side: Optional[Mapping[str, str]]) -> list[tasks_pb2.Resources.ResourceEntry]:
        return [tasks_pb2.Resources.ResourceEntry(name=_IDL[k], value=v) for k, v in (side or {}).items()]

    return tasks_pb2.Resources(requests=entries(requests), limits=entries(limits))


def template(
    task_type: str,
    custom: Optional[Mapping[str, Any]],
    version: int = 1,
    *,
    image: str = "img:1",
    args: Optional[list[str]] = None,
    requests: Optional[Mapping[str, str]] = None,
    limits: Optional[Mapping[str, str]] = None,
    pod_spec: Optional[Mapping[str, Any]] = None,
    primary: Optional[str] = None,
    config: Optional[Mapping[str, str]] = None,
    pod_labels: Optional[Mapping[str, str]] = None,
    task_labels: Optional[Mapping[str, str]] = None,
    extended: Optional[tasks_pb2.ExtendedResources] = None,
) -> tasks_pb2.TaskTemplate:
    t = tasks_pb2.TaskTemplate(type=task_type, task_type_version=version)
    t.id.project, t.id.domain, t.id.name, t.id.version = "proj", "dev", "wf.train", "v1"
    if custom is not None:
        s = Struct()
        s.update(json.loads(json.dumps(custom)))
        t.custom.CopyFrom(s)
    if pod_spec is not None:
        t.k8s_pod.pod_spec.update(json.loads(json.dumps(pod_spec)))
        t.k8s_pod.metadata.labels.update(pod_labels or {})
        if primary:
            t.config["primary_container_name"] = primary
    else:
        t.container.image = image
        t.container.args.extend(ARGS if args is None else args)
        t.container.resources.CopyFrom(idl_resources(requests, limits))
    for k, v in (config or {}).items():
        t.config[k] = v
    t.metadata.metadata.labels.update(task_labels or {})
    if extended is not None:
        t.extended_resources.CopyFrom(extended)
    return t


def metadata(
    namespace: str = "proj-dev",
    name: str = "abc123",
    node: str = "n0",
    attempt: int = 0,
    *,
    labels: Optional[Mapping[str, str]] = None,
    annotations: Optional[Mapping[str, str]] = None,
    sa: str = "",
    interruptible: bool = False,
    env: Optional[Mapping[str, str]] = None,
    override_requests: Optional[Mapping[str, str]] = None,
    override_limits: Optional[Mapping[str, str]] = None,
    override_image: str = "",
) -> TaskExecutionMetadata:
    m = TaskExecutionMetadata(namespace=namespace, k8s_service_account=sa, interruptible=interruptible)
    tid = m.task_execution_id
    tid.node_execution_id.execution_id.project = "proj"
    tid.node_execution_id.execution_id.domain = "dev"
    tid.node_execution_id.execution_id.name = name
    tid.node_execution_id.node_id = node
    tid.retry_attempt = attempt
    m.labels.update(labels or {})
    m.annotations.update(annotations or {})
    m.environment_variables.update(env or {})
    if override_requests or override_limits:
        m.overrides.resources.CopyFrom(idl_resources(override_requests, override_limits))
    if override_image:
        m.overrides.container_image = override_image
    return m


def q(value: Any) -> Decimal:
    from kubernetes.utils import parse_quantity

    return parse_quantity(value)


def quantities(side: Mapping[str, Any]) -> dict[str, Decimal]:
    return {k: q(v) for k, v in side.items()}


def container(spec: Mapping[str, Any], name: str) -> dict[str, Any]:
    matches = [c for c in spec["containers"] if c["name"] == name]
    assert len(matches) == 1, [c["name"] for c in spec["containers"]]
    return matches[0]


def env_of(c: Mapping[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}


@pytest.fixture(scope="session")
def kit(crd_dir: Path, schemas: Any) -> SimpleNamespace:
    """Helpers; ``kit.build`` builds with the CRD schemas loaded and checks the object independently."""
    import jsonschema

    default = BackendConfig(crd_dir=str(crd_dir))
    record_dir = os.environ.get("KUBEJOBS_RECORD_BUILT_OBJECTS")
    validators = {kind: jsonschema.Draft4Validator(schemas.schema(key)) for kind, key in _SCHEMA_KEYS.items()}

    def check(obj: Mapping[str, Any]) -> None:
        errors = sorted(validators[obj["kind"]].iter_errors(obj), key=lambda e: list(e.path))
        assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])
        text = json.dumps(obj, allow_nan=False, sort_keys=True)  # plain JSON
        if record_dir:  # tests/e2e replays every object built here against the real API server
            Path(record_dir, hashlib.sha256(text.encode()).hexdigest()[:16] + ".json").write_text(text)

    def build(
        t: tasks_pb2.TaskTemplate,
        m: Optional[TaskExecutionMetadata] = None,
        config: Optional[BackendConfig] = None,
        **kw: Any,
    ) -> dict[str, Any]:
        cfg = config if config is not None else default
        if cfg.crd_dir is None:
            cfg = dataclasses.replace(cfg, crd_dir=str(crd_dir))
        obj = build_object(t, m if m is not None else metadata(), cfg, **kw)
        check(obj)
        return obj

    return SimpleNamespace(
        build=build,
        check=check,
        template=template,
        metadata=metadata,
        q=q,
        quantities=quantities,
        container=container,
        env_of=env_of,
        config=default,
        idl_resources=idl_resources,
        ARGS=ARGS,
    )
