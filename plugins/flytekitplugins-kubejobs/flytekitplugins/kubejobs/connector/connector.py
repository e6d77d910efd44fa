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
import contextlib
import json
import logging
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Optional

from flyteidl.core.execution_pb2 import TaskExecution
from flytekit.exceptions.system import FlyteConnectorNotFound
from flytekit.extend.backend.base_connector import AsyncConnectorBase, ConnectorRegistry, Resource, ResourceMeta

from ..wire.kinds import KINDS, MPIJOB_V2BETA1, TRAINJOB, TRAINJOB_TASK_TYPES, JobKind, kind_of
from .errors import ForeignObjectError, TaskRefused

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
    "MAX_REFUSAL_CHARS",
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
#: The longest refusal message kept in (and read back from) a ResourceMeta; the rest is cut.
MAX_REFUSAL_CHARS = 2048
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_PHASES = {
    "QUEUED": TaskExecution.QUEUED,
    "INITIALIZING": TaskExecution.INITIALIZING,
    "RUNNING": TaskExecution.RUNNING,
    "SUCCEEDED": TaskExecution.SUCCEEDED,
    "RETRYABLE_FAILURE": TaskExecution.RETRYABLE_FAILED,
    "PERMANENT_FAILURE": TaskExecution.FAILED,
}


@dataclass
class KubeJobMetadata(ResourceMeta):  # type: ignore[misc]
    """Where the job lives and which object it is (``uid``, empty in metadata written before uids were kept);
    ``execution`` (the task execution metadata) and ``task_config`` feed log links.

    The caller sends it back as opaque bytes it could have forged: ``get`` and ``delete`` check every field
    (served kind, allowed namespace, the object's uid) before acting on it. ``refused`` (non-empty: the
    connector refused the task at create and created nothing) short-cuts both: ``get`` reports a permanent
    failure with that message, ``delete`` does nothing; a forged one makes no API call either.
    """

    group: str
    version: str
    plural: str
    namespace: str
    name: str
    task_type: str = ""
    execution: str = ""
    task_config: str = ""
    uid: str = ""
    refused: str = ""

    @classmethod
    def refusal(cls, kind: JobKind, reason: str) -> KubeJobMetadata:
        """The metadata of a task refused at create: no object, only the reason."""
        return cls(
            group=kind.group,
            version=kind.version,
            plural=kind.plural,
            namespace="",
            name="",
            task_type=kind.task_type,
            refused=_bounded(reason),
        )


def _bounded(text: str) -> str:
    """``text`` on one printable line of at most ``MAX_REFUSAL_CHARS`` characters."""
    printable = "".join(ch if ch.isprintable() else " " for ch in text[: MAX_REFUSAL_CHARS + 1])
    return printable if len(printable) <= MAX_REFUSAL_CHARS else printable[: MAX_REFUSAL_CHARS - 3] + "..."


def execution_id(metadata: PbTaskExecutionMetadata) -> str:
    """The task execution id as ``project/domain/execution/node/attempt/task``."""
    tid = metadata.task_execution_id
    ex = tid.node_execution_id.execution_id
    parts = (ex.project, ex.domain, ex.name, tid.node_execution_id.node_id, str(tid.retry_attempt), tid.task_id.name)
    return "/".join(parts)


def _recorded_execution(resource_meta: KubeJobMetadata) -> tuple[PbTaskExecutionMetadata, str]:
    """The task execution metadata kept in ``resource_meta`` and its id ("" when none was kept)."""
    from flyteidl.admin.agent_pb2 import TaskExecutionMetadata as PbMeta

    meta_pb = PbMeta()
    if not resource_meta.execution:
        return meta_pb, ""
    try:
        meta_pb.ParseFromString(base64.b64decode(resource_meta.execution, validate=True))
    except Exception as err:  # binascii.Error, protobuf DecodeError: the bytes were not ours
        raise ValueError(f"KubeJobMetadata.execution is not a serialized TaskExecutionMetadata: {err}") from None
    return meta_pb, execution_id(meta_pb)


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
        #: The kinds this connector creates and so may read and delete: its task type's, and those the backend may
        #: target instead (TrainJob, ``plugins.trainjob``; MPIJob v2beta1, ``plugins.mpi``).
        self.kinds: tuple[JobKind, ...] = (
            self.kind,
            *((TRAINJOB,) if task_type in TRAINJOB_TASK_TYPES else ()),
            *((MPIJOB_V2BETA1,) if task_type == MPIJOB_V2BETA1.task_type else ()),
        )

    async def create(
        self,
        task_template: TaskTemplate,
        output_prefix: str,
        inputs: Optional[LiteralMap] = None,
        task_execution_metadata: Optional[TaskExecutionMetadata] = None,
        **kwargs: Any,
    ) -> KubeJobMetadata:
        """``submit``, with a refused task (``errors.refuses_task``) answered by a metadata that records the
        refusal instead of an error: nothing was created, and ``get`` reports it as a permanent failure.

        Why not an error: FlytePropeller 1.16 turns every ``CreateTask`` error, whatever its gRPC code, into a
        retryable failure of the attempt, so a refusal raised here would be re-attempted while the task's
        retries last; a ``FAILED`` phase from ``GetTask`` is the one permanent failure it knows. Transient
        faults (``ApiUnavailable``) and the rest of the error tree still raise: propeller retries them.
        """
        from .errors import refuses_task

        try:
            return await self.submit(task_template, output_prefix, inputs, task_execution_metadata, **kwargs)
        except Exception as err:
            if not refuses_task(err):
                raise
            log.warning("refused %s task: %s: %s", self.kind.task_type, type(err).__name__, err)
            return KubeJobMetadata.refusal(self.kind, f"{type(err).__name__}: {err}")

    async def submit(
        self,
        task_template: TaskTemplate,
        output_prefix: str,
        inputs: Optional[LiteralMap] = None,
        task_execution_metadata: Optional[TaskExecutionMetadata] = None,
        **kwargs: Any,
    ) -> KubeJobMetadata:
        """Create the job (or adopt the one a previous attempt of this same call created); every failure
        raises (a refusal as ``TaskRefused``/``BuildError``/``ApiRejected``).

        Placeholders propeller left in the task (pod-template targets) are filled first, and the inputs
        written to ``<output_prefix>/inputs.pb`` when ``{{.input}}`` asks for them (``placeholders.py``).
        """
        from ..backend import build_object, object_name_for
        from ..backend.podsecurity import pod_security_violations
        from . import placeholders
        from .errors import ApiUnavailable, Conflict

        if task_execution_metadata is None:
            raise ValueError(f"{self.kind.kind} tasks need the task execution metadata to name their object")
        rt = _runtime()
        template_pb, meta_pb = task_template.to_flyte_idl(), task_execution_metadata.to_flyte_idl()
        pods = (template_pb.container, template_pb.k8s_pod, template_pb.custom, meta_pb.overrides.pod_template)
        found = placeholders.found_placeholders(b"".join(part.SerializeToString() for part in pods))
        config = await rt.config_for(template_pb)
        template_vars = placeholders.values(found, output_prefix, inputs, object_name_for(template_pb, meta_pb, config))
        obj = build_object(template_pb, meta_pb, config, template_vars=template_vars)
        kind = kind_of(obj["kind"], obj["apiVersion"])  # the task type's kind, or the one the backend targets instead
        metadata = obj["metadata"]
        namespace = rt.check_namespace(metadata.get("namespace") or meta_pb.namespace or "default")
        violations = pod_security_violations(obj, rt.settings.pod_security)
        if violations:
            shown = "; ".join(str(v) for v in violations[:5])
            more = f" (and {len(violations) - 5} more)" if len(violations) > 5 else ""
            raise TaskRefused(
                f"{kind.kind} {metadata['name']} is refused by the connector's pod security level "
                f"{rt.settings.pod_security!r}: {shown}{more}"
            )
        if found & {"input", "inputPrefix"}:  # before the job exists: its pods read them at start
            placeholders.check_output_prefix(output_prefix, rt.settings.input_prefixes)
            await placeholders.write_inputs(output_prefix, inputs, rt.settings.request_timeout)
        execution = execution_id(meta_pb)
        from .runtime import MANAGED_BY, MANAGED_BY_LABEL

        owner = rt.ownership.label(execution)
        metadata["labels"] = {**metadata.get("labels", {}), MANAGED_BY_LABEL: MANAGED_BY, EXECUTION_LABEL: owner}
        metadata["annotations"] = {**metadata.get("annotations", {}), EXECUTION_ANNOTATION: execution}
        name = metadata["name"]
        rt.watch(kind, namespace)
        try:
            created = await rt.client.create(kind, namespace, obj)
        except Conflict:
            created = await self._adopt(rt, kind, namespace, name, execution)
        except ApiUnavailable:  # the POST may have landed: leave nothing behind
            await self._cleanup(rt, kind, namespace, name, execution)
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
            uid=str((created.get("metadata") or {}).get("uid") or ""),
        )

    async def _adopt(self, rt: Runtime, kind: JobKind, namespace: str, name: str, execution: str) -> dict[str, Any]:
        """The existing object if an earlier attempt of this create made it (its keyed owner label says so)."""
        existing = await rt.client.get(kind, namespace, name)
        if not rt.ownership.created_by(existing, execution, EXECUTION_LABEL):
            raise ForeignObjectError(
                f"{kind.kind} {namespace}/{name} already exists and was not created by this task execution "
                f"(its {EXECUTION_LABEL} label is not this execution's owner label); delete it or rename the "
                "execution"
            )
        log.info("adopted existing %s %s/%s (created by an earlier try of this call)", kind.kind, namespace, name)
        return existing

    async def _cleanup(self, rt: Runtime, kind: JobKind, namespace: str, name: str, execution: str) -> None:
        """One try each (the create already used its retry deadline: the error must reach propeller now)."""
        from dataclasses import replace

        from .errors import ApiError, NotFound

        once = replace(rt.client.retry, max_attempts=1)
        try:
            existing = await rt.client.get(kind, namespace, name, retry=once)
            if rt.ownership.created_by(existing, execution, EXECUTION_LABEL):
                await rt.client.delete(kind, namespace, name, uid=existing["metadata"].get("uid"), retry=once)
        except NotFound:
            pass
        except ApiError as err:
            log.warning("could not clean up %s %s/%s after a failed create: %s", kind.kind, namespace, name, err)

    def _checked(self, rt: Runtime, resource_meta: object) -> tuple[KubeJobMetadata, JobKind]:
        """``resource_meta`` and its kind if it names an object this connector may touch: a resource of a kind
        it creates (the task type's kind, or TrainJob for the task types the Trainer serves), in an allowed
        namespace, under a valid name. Checked before any request (the bytes may be forged)."""
        if not isinstance(resource_meta, KubeJobMetadata):
            raise TaskRefused(f"expected KubeJobMetadata, got {type(resource_meta).__name__}")
        for name, value in vars(resource_meta).items():
            if not isinstance(value, str):
                raise TaskRefused(f"KubeJobMetadata.{name} must be a string, got {value!r}")
        named = (resource_meta.group, resource_meta.version, resource_meta.plural)
        kind = next((k for k in self.kinds if (k.group, k.version, k.plural) == named), None)
        if kind is None:
            served = ", ".join(f"{k.plural}.{k.group}/{k.version}" for k in self.kinds)
            raise TaskRefused(
                f"KubeJobMetadata names {resource_meta.plural}.{resource_meta.group}/{resource_meta.version}; "
                f"the {self.kind.task_type} connector serves {served} only"
            )
        rt.check_namespace(resource_meta.namespace)
        if len(resource_meta.name) > 253 or not _DNS_SUBDOMAIN.match(resource_meta.name):
            raise TaskRefused(f"KubeJobMetadata.name {resource_meta.name!r} is not a Kubernetes object name")
        return resource_meta, kind

    async def get(self, resource_meta: KubeJobMetadata, **kwargs: Any) -> Resource:
        """Phase, message and log links of the job (outputs are written by the task itself)."""
        from ..backend import task_phase

        if isinstance(resource_meta, KubeJobMetadata) and resource_meta.refused:
            message = f"[TaskRefused] {_bounded(str(resource_meta.refused))}"
            return Resource(phase=TaskExecution.FAILED, message=message, custom_info={"refused": True})
        rt = _runtime()
        resource_meta, kind = self._checked(rt, resource_meta)
        ns, name = resource_meta.namespace, resource_meta.name
        meta_pb, execution = _recorded_execution(resource_meta)
        obj = await rt.read(kind, ns, name)
        where = f"{ns}/{name}"
        if obj is None or not rt.ownership.is_recorded(obj, resource_meta.uid, execution, EXECUTION_LABEL):
            held = "" if obj is None else "; the name is now held by an object this task did not create"
            message = (
                f"[ResourceDeletedExternally] resource not found, name [{where}]: {kind.kind} was deleted outside "
                f"Flyte{held}"
            )
            return Resource(phase=TaskExecution.RETRYABLE_FAILED, message=message)
        task_config = json.loads(resource_meta.task_config) if resource_meta.task_config else None
        pods = await _listed_pods(rt, kind, ns, name, obj) if kind.lists_pods else []
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
        # The backend's facts first (RayJob head service, ports, dashboard); the identifying keys win over them.
        custom: dict[str, Any] = {**info.custom_info, "kind": kind.kind, "namespace": ns, "name": name}
        if info.reason:
            custom["reason"] = info.reason
        if info.error_kind is not None:
            custom["errorKind"] = info.error_kind.value
        return Resource(
            phase=_PHASES[info.phase.value], message=message, log_links=info.to_task_logs(), custom_info=custom
        )

    async def delete(self, resource_meta: KubeJobMetadata, **kwargs: Any) -> None:
        """Delete the job the metadata recorded, with background propagation (the operator's pods and services
        go with it, by garbage collection); a job already gone is a success, and so is a name now held by
        another object, which is left alone (the delete carries a uid precondition)."""
        from .errors import Conflict, NotFound

        if isinstance(resource_meta, KubeJobMetadata) and resource_meta.refused:
            return  # refused at create: nothing was created
        rt = _runtime()
        resource_meta, kind = self._checked(rt, resource_meta)
        ns, name, uid = resource_meta.namespace, resource_meta.name, resource_meta.uid
        with contextlib.suppress(NotFound):
            if not uid:  # metadata from before uids were kept: find the object and check it is that execution's
                found = await rt.client.get(kind, ns, name)
                _, execution = _recorded_execution(resource_meta)
                if not rt.ownership.is_recorded(found, "", execution, EXECUTION_LABEL):
                    log.warning("not deleting %s %s/%s: it is not the object this task created", kind.kind, ns, name)
                    return
                uid = str(found["metadata"].get("uid") or "")
            try:
                await rt.client.delete(kind, ns, name, uid=uid)
            except Conflict:  # the uid precondition failed: ours is gone, the name is someone else's
                log.warning("not deleting %s %s/%s: the name is held by another object now", kind.kind, ns, name)


async def _listed_pods(
    rt: Runtime, kind: JobKind, namespace: str, name: str, obj: dict[str, Any]
) -> list[dict[str, Any]]:
    """The pods of a job whose pod names cannot be derived (``kind.lists_pods``: a TrainJob's, an MPIJob
    v2beta1's launcher), for its log links; none (and a warning) where the connector may not list pods.
    Listed once per state of the job (``Runtime.pod_lists``), not on every ``get``.

    When the job has ended, the pods listed before are kept beside the ones still there: JobSet deletes the
    child Jobs still running at the end (an MPI job's nodes once its launcher is done), and the user wants the
    links of every rank that ran (a log backend keeps their logs). The backend links the newest pod of each
    rank, so a pod replaced earlier is not linked twice."""
    from ..backend.status import job_finished, pod_selector
    from .errors import Forbidden

    meta = obj.get("metadata") or {}
    key, version = (namespace, name, str(meta.get("uid") or "")), str(meta.get("resourceVersion") or "")
    cached = rt.pod_lists.get(key, version, time.monotonic())
    if cached is not None:
        return cached
    try:
        pods = await rt.client.list_pods(namespace, pod_selector(kind, name))
    except Forbidden as err:
        log.warning("no log links for %s %s/%s: listing its pods is not allowed (%s)", kind.kind, namespace, name, err)
        return []  # not kept: a grant added later gives links at the next get
    if job_finished(obj):
        listed = {(p.get("metadata") or {}).get("name") for p in pods}
        pods = [*pods, *(p for p in rt.pod_lists.last(key) if (p.get("metadata") or {}).get("name") not in listed)]
    rt.pod_lists.put(key, version, pods, time.monotonic())
    return pods


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
