"""The backend: a Flyte task (``TaskTemplate`` + ``TaskExecutionMetadata``, what a connector receives)
to the Kubernetes object that runs it, and that object's status to a Flyte phase.

Pure functions on plain dicts: no Kubernetes client, no I/O. The objects match what Flyte's Go
plugins build for the same input, with the deviations listed in the package README.

>>> from flyteidl.admin.agent_pb2 import TaskExecutionMetadata
>>> from flyteidl.core.tasks_pb2 import Container, TaskTemplate
>>> from google.protobuf.struct_pb2 import Struct
>>> custom = Struct()
>>> custom.update({"workerReplicas": {"replicas": 2}})
>>> template = TaskTemplate(type="pytorch", task_type_version=1, custom=custom,
...                         container=Container(image="img:1", args=["pyflyte-execute"]))
>>> meta = TaskExecutionMetadata(namespace="proj-dev")
>>> meta.task_execution_id.node_execution_id.execution_id.name = "exec1"
>>> meta.task_execution_id.node_execution_id.node_id = "n0"
>>> obj = build_object(template, meta)
>>> obj["kind"], obj["metadata"]["name"], obj["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"]
('PyTorchJob', 'exec1-n0-0', 2)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from ..wire.kinds import KINDS
from . import kubeflow, ray  # noqa: F401  # their builders register themselves
from .builders import BuildContext, spec_builder
from .errors import BuildError
from .kueue import apply_queue, task_queue
from .naming import execution_name_parts, object_name
from .plugins_config import BackendConfig
from .status import Phase, PhaseInfo, task_phase

__all__ = ["BackendConfig", "BuildError", "Phase", "PhaseInfo", "build_object", "object_name_for", "task_phase"]


def object_name_for(template: Any, metadata: Any, config: Optional[BackendConfig] = None) -> str:
    """The object's name: ``<execution>-<node>-<attempt>``, made a DNS-1035 label within the limit of the kind
    ``config`` builds the task as."""
    try:
        limit = (config or BackendConfig()).target_kind(template.type).max_name_length
    except KeyError:
        limit = 63
    return object_name(execution_name_parts(metadata.task_execution_id), limit)


def _validate(obj: dict[str, Any], config: BackendConfig) -> None:
    from ..schema import validate_object  # loads jsonschema only when CRD schemas are used

    try:
        validate_object(obj, config.schemas())
    except ValueError as e:
        raise BuildError(f"the built {obj['kind']} is invalid: {e}") from e


def build_object(
    template: Any,
    metadata: Any,
    config: Optional[BackendConfig] = None,
    *,
    template_vars: Optional[Mapping[str, str]] = None,
    validate: bool = True,
) -> dict[str, Any]:
    """The complete Kubernetes object (a JSON-able dict) for a ``pytorch``, ``tensorflow``, ``mpi`` or
    ``ray`` task.

    ``template_vars`` fills Flyte's argument placeholders (``{"input": "s3://.../inputs.pb",
    "outputPrefix": ...}`` for ``{{.input}}``, ``{{.outputPrefix}}``...); unknown ones are left as
    written. The object is checked with ``flytekitplugins.kubejobs.schema.validate_object`` against the
    CRD schemas of ``config.crd_dir`` (controller rules only without one) unless ``validate`` is False.
    Any malformed input is a ``BuildError`` (a ``ValueError``) whose message says what is wrong.
    """
    config = config or BackendConfig()
    if template.type in config.trainjob.task_types:
        from .trainjob import build_trainjob

        return build_trainjob(
            template, metadata, config, config.trainjob, template_vars=template_vars, validate=validate
        )
    if template.type not in KINDS:
        raise BuildError(f"task type {template.type!r} is not one of {sorted(KINDS)}")
    kind = config.target_kind(template.type)
    for key, value in (template_vars or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"template_vars must map str to str, got {key!r}: {value!r}")
    ctx = BuildContext(
        template,
        metadata,
        config,
        object_name_for(template, metadata, config),
        dict(template_vars) if template_vars else None,
        kind,
    )
    built = spec_builder(kind)(ctx)
    task_meta = template.metadata.metadata
    k8s = config.k8s
    object_meta: dict[str, Any] = {
        "name": ctx.name,
        "labels": {**k8s.default_labels, **built.labels, **task_meta.labels, **metadata.labels},
        "annotations": {
            **k8s.default_annotations,
            **built.annotations,
            **task_meta.annotations,
            **metadata.annotations,
        },
    }
    if metadata.namespace:
        object_meta["namespace"] = metadata.namespace
    obj = {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": object_meta, "spec": built.spec}
    apply_queue(obj, template.type, task_queue(template, kind), config.kueue)
    if validate:
        _validate(obj, config)
    return obj
