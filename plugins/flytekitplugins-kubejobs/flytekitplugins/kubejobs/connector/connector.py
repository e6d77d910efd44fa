"""Flyte async connectors for the ``pytorch``, ``tensorflow``, ``mpi`` and ``ray`` task types.

Each connector turns a task into a job object (``backend.build_object``), creates it with the
Kubernetes API, reports its phase (``backend.task_phase``) and deletes it on abort. Module import is
cheap: the Kubernetes client, the backend and the configuration load on the first call.

>>> from flytekit.extend.backend.base_connector import ConnectorRegistry
>>> ConnectorRegistry.get_connector("pytorch", 1).name
'Kubejobs Connector'
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Optional

from flyteidl.core.execution_pb2 import TaskExecution
from flytekit.exceptions.system import FlyteConnectorNotFound
from flytekit.extend.backend.base_connector import AsyncConnectorBase, ConnectorRegistry, Resource, ResourceMeta

from ..wire.kinds import KINDS, TRAINJOB, JobKind, kind_for_resource, kind_of

if TYPE_CHECKING:
    from flyteidl.admin.agent_pb2 import TaskExecutionMetadata as PbTaskExecutionMetadata
    from flytekit.models.literals import LiteralMap
    from flytekit.models.task import TaskExecutionMetadata, TaskTemplate

    from .runtime import Runtime

__all__ = [
    "EXECUTION_ANNOTATION",
    "EXECUTION_LABEL",
    "CONNECTOR_NAME",
    "ForeignObjectError",
    "KubeJobConnector",
    "KubeJobMetadata",
    "SUPPORTED",
    "register_connectors",
]

log = logging.getLogger(__name__)
CONNECTOR_NAME = "Kubejobs Connector"
EXECUTION_LABEL = "kubejobs.flyte.org/execution"
EXECUTION_ANNOTATION = "kubejobs.flyte.org/execution-id"
#: (task type, task_type_version) pairs served: kubeflow customs of version 0 and 1, Ray's version 0.
SUPPORTED: tuple[tuple[str, int], ...] = tuple(
    (kind.task_type, version) for kind in KINDS.values() for version in kind.task_type_versions
)
_PHASES = {
    "QUEUED": TaskExecution.QUEUED,
    "INITIALIZING": TaskExecution.INITIALIZING,
    "RUNNING": TaskExecution.RUNNING,
    "SUCCEEDED": TaskExecution.SUCCEEDED,
    "RETRYABLE_FAILURE": TaskExecution.RETRYABLE_FAILED,
    "PERMANENT_FAILURE": TaskExecution.FAILED,
}


class ForeignObjectError(RuntimeError):
    """The object name is taken by an object this task execution did not create."""


@dataclass
class KubeJobMetadata(ResourceMeta):  # type: ignore[misc]
    """Where the job lives; ``execution`` (the task execution metadata) and ``task_config`` feed log links."""

    group: str
    version: str
    plural: str
    namespace: str
    name: str
    task_type: str = ""
    execution: str = ""
    task_config: str = ""

    @property
    def kind(self) -> JobKind:
        try:
            return kind_for_resource(self.group, self.plural)
        except KeyError:
            raise ValueError(f"KubeJobMetadata names an unknown resource {self.plural}.{self.group}") from None


def execution_id(metadata: PbTaskExecutionMetadata) -> str:
    """The task execution id as ``project/domain/execution/node/attempt/task``."""
    tid = metadata.task_execution_id
    ex = tid.node_execution_id.execution_id
    parts = (ex.project, ex.domain, ex.name, tid.node_execution_id.node_id, str(tid.retry_attempt), tid.task_id.name)
    return "/".join(parts)


def execution_label(metadata: PbTaskExecutionMetadata) -> str:
    """A label value (<= 63 chars) that identifies the task execution: a hash of its id."""
    return hashlib.sha256(execution_id(metadata).encode()).hexdigest()[:40]


def _runtime() -> Runtime:
    from .runtime import runtime

    return runtime()


class KubeJobConnector(AsyncConnectorBase):  # type: ignore[misc]
    """One connector instance per (task type, version); all share the process's runtime."""

    name = CONNECTOR_NAME

    def __init__(self, task_type: str, task_type_version: int = 0):
        if task_type not in KINDS:
            raise ValueError(f"KubeJobConnector.task_type must be one of {sorted(KINDS)}, got {task_type!r}")
        super().__init__(task_type_name=task_type, task_type_version=task_type_version, metadata_type=KubeJobMetadata)
        self.kind = KINDS[task_type]

    async def create(
        self,
        task_template: TaskTemplate,
        output_prefix: str,
        inputs: Optional[LiteralMap] = None,
        task_execution_metadata: Optional[TaskExecutionMetadata] = None,
        **kwargs: Any,
    ) -> KubeJobMetadata:
        """Create the job (or adopt the one a previous attempt of this same call created).

        Placeholders propeller left in the task (pod-template targets) are filled first, and the inputs
        written to ``<output_prefix>/inputs.pb`` when ``{{.input}}`` asks for them (``placeholders.py``).
        """
        from ..backend import build_object, object_name_for
        from ..backend.podsecurity import pod_security_violations
        from . import placeholders
        from .client import ApiError

        if task_execution_metadata is None:
            raise ValueError(f"{self.kind.kind} tasks need the task execution metadata to name their object")
        rt = _runtime()
        template_pb, meta_pb = task_template.to_flyte_idl(), task_execution_metadata.to_flyte_idl()
        pods = (template_pb.container, template_pb.k8s_pod, template_pb.custom, meta_pb.overrides.pod_template)
        found = placeholders.found_placeholders(b"".join(part.SerializeToString() for part in pods))
        template_vars = placeholders.values(found, output_prefix, inputs, object_name_for(template_pb, meta_pb))
        obj = build_object(template_pb, meta_pb, await rt.build_config(), template_vars=template_vars)
        kind = kind_of(obj["kind"])  # the task type's v1 kind, or the TrainJob the backend targets instead
        metadata = obj["metadata"]
        namespace = metadata.get("namespace") or meta_pb.namespace or "default"
        allowed = rt.settings.namespaces
        if allowed and namespace not in allowed:
            raise ValueError(f"namespace {namespace!r} is not one of the connector's namespaces {list(allowed)}")
        violations = pod_security_violations(obj, rt.settings.pod_security)
        if violations:
            shown = "; ".join(str(v) for v in violations[:5])
            more = f" (and {len(violations) - 5} more)" if len(violations) > 5 else ""
            raise ValueError(
                f"{kind.kind} {metadata['name']} is refused by the connector's pod security level "
                f"{rt.settings.pod_security!r}: {shown}{more}"
            )
        if found & {"input", "inputPrefix"}:  # before the job exists: its pods read them at start
            placeholders.check_output_prefix(output_prefix, rt.settings.input_prefixes)
            await placeholders.write_inputs(output_prefix, inputs, rt.settings.request_timeout)
        ours = execution_label(meta_pb)
        from .runtime import MANAGED_BY, MANAGED_BY_LABEL

        metadata["labels"] = {**metadata.get("labels", {}), MANAGED_BY_LABEL: MANAGED_BY, EXECUTION_LABEL: ours}
        metadata["annotations"] = {**metadata.get("annotations", {}), EXECUTION_ANNOTATION: execution_id(meta_pb)}
        name = metadata["name"]
        rt.watch(kind, namespace)
        try:
            await rt.client.create(kind, namespace, obj)
        except ApiError as err:
            if err.status == 409:
                await self._adopt(rt, kind, namespace, name, ours)
            else:
                if err.status == 0 or err.status >= 429:  # the POST may have landed: leave nothing behind
                    await self._cleanup(rt, kind, namespace, name, ours)
                raise
        return KubeJobMetadata(
            group=kind.group,
            version=kind.version,
            plural=kind.plural,
            namespace=namespace,
            name=name,
            task_type=self.kind.task_type,
            execution=base64.b64encode(meta_pb.SerializeToString()).decode(),
            task_config=json.dumps(dict(task_template.config or {})),
        )

    async def _adopt(self, rt: Runtime, kind: JobKind, namespace: str, name: str, ours: str) -> None:
        existing = await rt.client.get(kind, namespace, name)
        owner = (existing.get("metadata", {}).get("labels") or {}).get(EXECUTION_LABEL)
        if owner != ours:
            raise ForeignObjectError(
                f"{kind.kind} {namespace}/{name} already exists and was not created by this task execution "
                f"(label {EXECUTION_LABEL}={owner!r}, expected {ours!r}); delete it or rename the execution"
            )
        log.info("adopted existing %s %s/%s (created by an earlier try of this call)", kind.kind, namespace, name)

    async def _cleanup(self, rt: Runtime, kind: JobKind, namespace: str, name: str, ours: str) -> None:
        from .client import ApiError

        try:
            existing = await rt.client.get(kind, namespace, name)
            if (existing.get("metadata", {}).get("labels") or {}).get(EXECUTION_LABEL) == ours:
                await rt.client.delete(kind, namespace, name)
        except ApiError as err:
            if err.status != 404:
                log.warning("could not clean up %s %s/%s after a failed create: %s", kind.kind, namespace, name, err)

    async def get(self, resource_meta: KubeJobMetadata, **kwargs: Any) -> Resource:
        """Phase, message and log links of the job (outputs are written by the task itself)."""
        from flyteidl.admin.agent_pb2 import TaskExecutionMetadata as PbMeta

        from ..backend import task_phase

        rt = _runtime()
        kind, ns, name = resource_meta.kind, resource_meta.namespace, resource_meta.name
        obj = await rt.read(kind, ns, name)
        where = f"{ns}/{name}"
        if obj is None:
            message = (
                f"[ResourceDeletedExternally] resource not found, name [{where}]: {kind.kind} was deleted outside Flyte"
            )
            return Resource(phase=TaskExecution.RETRYABLE_FAILED, message=message)
        meta_pb = PbMeta()
        if resource_meta.execution:
            meta_pb.ParseFromString(base64.b64decode(resource_meta.execution))
        task_config = json.loads(resource_meta.task_config) if resource_meta.task_config else None
        pods = await _trainjob_pods(rt, ns, name) if kind is TRAINJOB else []
        try:
            info = task_phase(obj, rt.backend, meta_pb, datetime.now(timezone.utc), task_config=task_config, pods=pods)
        except ValueError as err:  # a malformed object fails this call only, with a message that names it
            raise ValueError(f"{kind.kind} {where} cannot be mapped to a phase: {err}") from err
        if obj.get("metadata", {}).get("deletionTimestamp") and not info.phase.is_terminal:
            message = f"[UnexpectedObjectDeletion] object [{where}] terminated in the background, manually"
            return Resource(phase=TaskExecution.RETRYABLE_FAILED, message=message)
        message = info.message or info.reason
        if info.code:
            message = f"[{info.code}] {message}"
        custom: dict[str, Any] = {"kind": kind.kind, "namespace": ns, "name": name}
        if info.reason:
            custom["reason"] = info.reason
        if info.error_kind is not None:
            custom["errorKind"] = info.error_kind.value
        return Resource(
            phase=_PHASES[info.phase.value], message=message, log_links=info.to_task_logs(), custom_info=custom
        )

    async def delete(self, resource_meta: KubeJobMetadata, **kwargs: Any) -> None:
        """Delete the job with background propagation; a job already gone is a success."""
        from .client import ApiError

        rt = _runtime()
        try:
            await rt.client.delete(resource_meta.kind, resource_meta.namespace, resource_meta.name)
        except ApiError as err:
            if err.status != 404:
                raise


async def _trainjob_pods(rt: Runtime, namespace: str, name: str) -> list[dict[str, Any]]:
    """The pods of a TrainJob, for its log links; none (and a warning) where the connector may not list pods."""
    from ..backend.trainjob_status import trainjob_pod_selector
    from .client import ApiError

    try:
        return await rt.client.list_pods(namespace, trainjob_pod_selector(name))
    except ApiError as err:
        if err.status not in (401, 403):
            raise
        log.warning("no log links for TrainJob %s/%s: listing its pods is not allowed (%s)", namespace, name, err)
        return []


def register_connectors() -> list[KubeJobConnector]:
    """Register a connector for each supported (task type, version) not already served by another.

    Never raises: it runs during ``import flytekit`` (entry point), where an error would break every
    flytekit user. Returns the connectors registered by this call.
    """
    added = []
    for task_type, version in SUPPORTED:
        try:
            ConnectorRegistry.get_connector(task_type, version)
            continue  # already registered (by us on a re-import, or by another package): keep it
        except FlyteConnectorNotFound:
            pass
        try:
            connector = KubeJobConnector(task_type, version)
            ConnectorRegistry.register(connector)
        except Exception:  # must not break `import flytekit`; the log says what failed
            log.exception("could not register the kubejobs connector for %s v%d", task_type, version)
            continue
        added.append(connector)
    return added
