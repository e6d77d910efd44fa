"""Driving tasks through the connector on the real control plane (test-only code).

A task is registered with our plugins (flytekit's serialization), its container args rendered as
FlytePropeller renders them before the CreateTask call, and handed to ``KubeJobConnector.create``; its
phase is what ``KubeJobConnector.get`` answers. The runtime is the connector's own, configured with the
admin kubeconfig and the backend configuration under test.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from flyteidl.admin.agent_pb2 import TaskExecutionMetadata as PbMeta
from flyteidl.core.execution_pb2 import TaskExecution
from flyteidl.core.tasks_pb2 import TaskTemplate as PbTemplate
from flytekit import task
from flytekit.configuration import ImageConfig, SerializationSettings
from flytekit.extend.backend.base_connector import Resource
from flytekit.models.task import TaskExecutionMetadata, TaskTemplate
from flytekit.tools.translator import get_serializable
from flytekitplugins.kubejobs.backend import BackendConfig
from flytekitplugins.kubejobs.connector.connector import KubeJobConnector, KubeJobMetadata
from flytekitplugins.kubejobs.connector.runtime import configure, shutdown
from flytekitplugins.kubejobs.connector.settings import ConnectorSettings
from flytekitplugins.kubejobs.wire.template import substitute

from .controlplane import OUTCOME, RUN_FOR

SETTINGS = SerializationSettings(
    project="proj", domain="dev", version="v1", image_config=ImageConfig.auto(img_name="registry.example/flyte:1.0")
)
#: Where the connector writes a pod-template task's inputs.pb (a local folder: flytekit's data persistence).
OUTPUT_PREFIX = tempfile.mkdtemp(prefix="kubejobs-e2e-outputs-")
#: What propeller puts in a container task's placeholders before the connector sees it.
_RENDERED = (
    ("input", f"{OUTPUT_PREFIX}/inputs.pb"),
    ("outputPrefix", OUTPUT_PREFIX),
    ("rawOutputDataPrefix", f"{OUTPUT_PREFIX}/raw"),
    ("checkpointOutputPrefix", f"{OUTPUT_PREFIX}/checkpoint"),
    ("prevCheckpointPrefix", ""),
)
TERMINAL = {TaskExecution.SUCCEEDED, TaskExecution.FAILED, TaskExecution.RETRYABLE_FAILED}


def train(epochs: int) -> float:
    return float(epochs)


@contextmanager
def connector_runtime(kubeconfig: str, backend: BackendConfig) -> Iterator[None]:
    """The connector's runtime on the e2e cluster (no cache: every get() reads the API server)."""
    configure(ConnectorSettings(kubeconfig=kubeconfig, cache=False, input_prefixes=(OUTPUT_PREFIX,), backend=backend))
    try:
        yield
    finally:
        shutdown()


def registered(config: Any) -> PbTemplate:
    """The task template flytekit registers for ``config``; a container target's args rendered as propeller
    does (a pod-template target arrives as written: the connector fills it)."""
    template: PbTemplate = get_serializable(
        OrderedDict(), SETTINGS, task(task_config=config)(train)
    ).template.to_flyte_idl()
    if template.WhichOneof("target") != "container":  # touching .container would switch the oneof
        return template
    rendered = [substitute(arg, _RENDERED) for arg in template.container.args]
    del template.container.args[:]
    template.container.args.extend(rendered)
    return template


def execution(namespace: str, name: str, outcome: str, run_for: str = "3s") -> PbMeta:
    meta = PbMeta(namespace=namespace, annotations={OUTCOME: outcome, RUN_FOR: run_for})
    meta.task_execution_id.node_execution_id.execution_id.name = name
    meta.task_execution_id.node_execution_id.node_id = "n0"
    return meta


@dataclass
class Run:
    """A task created through the connector, and everything observed while it ran."""

    connector: KubeJobConnector
    handle: KubeJobMetadata
    phases: list[int] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    statuses: list[dict[str, Any]] = field(default_factory=list)
    last: Resource | None = None

    @property
    def phase(self) -> int:
        return self.phases[-1] if self.phases else TaskExecution.UNDEFINED


def create(template: PbTemplate, meta: PbMeta) -> Run:
    connector = KubeJobConnector(template.type, template.task_type_version)
    handle = asyncio.run(
        connector.create(
            TaskTemplate.from_flyte_idl(template),
            OUTPUT_PREFIX,
            None,
            TaskExecutionMetadata.from_flyte_idl(meta),
        )
    )
    return Run(connector, handle)


def poll(k8s: Any, run: Run) -> Resource:
    """One connector get(), recording the phase and the object's status when they change."""
    from kubernetes import client

    resource: Resource = asyncio.run(run.connector.get(run.handle))
    h = run.handle
    obj: Any = client.CustomObjectsApi(k8s).get_namespaced_custom_object(
        h.group, h.version, h.namespace, h.plural, h.name
    )
    status = obj.get("status") or {}
    if status and (not run.statuses or run.statuses[-1] != status):
        run.statuses.append(status)
    if not run.phases or run.phases[-1] != resource.phase:
        run.phases.append(resource.phase)
        run.messages.append(resource.message)
    run.last = resource
    return resource


def wait_terminal(k8s: Any, runs: list[Run], timeout: float = 150) -> None:
    """Poll every run until each reports a terminal phase (a condition with a deadline)."""
    deadline = time.monotonic() + timeout
    delay = 0.1
    while True:
        pending = [r for r in runs if r.phase not in TERMINAL]
        for run in pending:
            poll(k8s, run)
        if all(r.phase in TERMINAL for r in runs):
            return
        if time.monotonic() > deadline:
            summary = [(r.handle.name, [TaskExecution.Phase.Name(p) for p in r.phases]) for r in runs]
            raise TimeoutError(f"not finished after {timeout:.0f}s: {summary}")
        time.sleep(delay)  # polling interval of a condition with a deadline
        delay = min(delay * 1.5, 1.0)


def condition_sequence(statuses: list[dict[str, Any]]) -> list[str]:
    """Each condition as it first appeared with its status: ``Type=Status(Reason)``."""
    seen: list[str] = []
    for status in statuses:
        for c in status.get("conditions", []):
            entry = f"{c['type']}={c['status']}({c.get('reason', '')})"
            if entry not in seen:
                seen.append(entry)
    return seen


def phase_names(run: Run) -> list[str]:
    return [TaskExecution.Phase.Name(p) for p in run.phases]
