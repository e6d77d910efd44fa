"""Running a build Job (Kubernetes I/O; the client is imported here, lazily, by the first build).

Create the context ConfigMap, then the Job, then make the Job the ConfigMap's owner (so the Job's TTL
collects both); watch the Job's pod and report each phase; on success return the image, on failure raise
:class:`ImageBuildFailed` with the tail of the kaniko log (the logs API first, else the container's
termination message, which ``FallbackToLogsOnError`` fills with the log's tail).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Optional

from .manifests import CONTAINER
from .settings import BuildSettings

#: Lines of the kaniko log an ImageBuildFailed carries.
LOG_TAIL_LINES = 40

__all__ = ["LOG_TAIL_LINES", "ImageBuildFailed", "api_client", "run_build"]


class ImageBuildFailed(RuntimeError):
    """The kaniko Job failed (or timed out); the message ends with the build log's tail."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message + (f"\n--- build log (tail) ---\n{log_tail}" if log_tail else ""))
        self.log_tail = log_tail


def api_client(settings: BuildSettings) -> Any:
    """A client from ``settings.kubeconfig``, else ``$KUBECONFIG`` / ``~/.kube/config``, else in-cluster."""
    from kubernetes import client

    config: Any = __import__("kubernetes.config").config  # untyped loaders
    configuration = client.Configuration()
    try:
        config.load_kube_config(config_file=settings.kubeconfig, client_configuration=configuration)
    except config.ConfigException:
        if settings.kubeconfig is not None:
            raise
        config.load_incluster_config(client_configuration=configuration)
    return client.ApiClient(configuration)


def run_build(
    settings: BuildSettings,
    configmap: dict[str, Any],
    job: dict[str, Any],
    image: str,
    report: Callable[[str], None],
    client: Optional[Any] = None,
) -> str:
    """Create ``configmap`` and ``job``, follow the build to its end and return ``image`` (or raise)."""
    from kubernetes import client as k8s

    api = client if client is not None else api_client(settings)
    core: Any = k8s.CoreV1Api(api)  # bodies are plain dicts, which the client serializes as they are
    batch: Any = k8s.BatchV1Api(api)
    namespace, name = settings.namespace, job["metadata"]["name"]
    core.create_namespaced_config_map(namespace, configmap)
    created = batch.create_namespaced_job(namespace, job)
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": created.metadata.uid}
    core.patch_namespaced_config_map(name, namespace, {"metadata": {"ownerReferences": [owner]}})
    report(f"kaniko: building {image} in Job {namespace}/{name}")
    deadline = time.monotonic() + settings.timeout + 60
    last: Optional[str] = None
    while True:
        pod = _follow(core, namespace, name, deadline, last, report)
        if pod is not None:
            last = pod.status.phase
            if last == "Succeeded":
                report(f"kaniko: pushed {image}")
                return image
            if last == "Failed":
                raise ImageBuildFailed(
                    f"kaniko: the build of {image} failed (pod {namespace}/{pod.metadata.name})",
                    _log_tail(core, pod),
                )
        failed = _job_failure(batch, namespace, name) or _pod_creation_failure(core, namespace, name)
        if failed is not None:
            raise ImageBuildFailed(f"kaniko: Job {namespace}/{name} failed: {failed}")
        if time.monotonic() > deadline:
            raise ImageBuildFailed(f"kaniko: the build of {image} did not finish within {settings.timeout} s")


def _follow(
    core: Any, namespace: str, job: str, deadline: float, last: Optional[str], report: Callable[[str], None]
) -> Any:
    """Watch the Job's pod until it ends (returned) or a watch window closes (None: check the Job)."""
    from kubernetes import watch

    watcher: Any = watch.Watch()  # type: ignore[no-untyped-call]
    window = max(1, min(10, int(deadline - time.monotonic())))
    stream = watcher.stream(
        core.list_namespaced_pod, namespace, label_selector=f"job-name={job}", timeout_seconds=window
    )
    for event in stream:
        pod = event["object"]
        phase = pod.status.phase if pod.status is not None else None
        if phase and phase != last:
            report(f"kaniko: pod {pod.metadata.name} {phase}")
            last = phase
        if phase in ("Succeeded", "Failed"):
            return pod
    return None


def _job_failure(batch: Any, namespace: str, name: str) -> Optional[str]:
    job = batch.read_namespaced_job_status(name, namespace)
    for condition in (job.status.conditions if job.status is not None else None) or ():
        if condition.type == "Failed" and condition.status == "True":
            return f"{condition.reason}: {condition.message}"
    return None


def _pod_creation_failure(core: Any, namespace: str, name: str) -> Optional[str]:
    """The job controller's FailedCreate event (e.g. Pod Security refusing the root kaniko pod), if any."""
    from kubernetes.client.exceptions import ApiException

    selector = f"involvedObject.kind=Job,involvedObject.name={name},reason=FailedCreate"
    try:
        events = core.list_namespaced_event(namespace, field_selector=selector).items
    except ApiException:
        return None  # no right to read events: the Job's deadline ends the wait
    return f"FailedCreate: {events[-1].message}" if events else None


def _log_tail(core: Any, pod: Any) -> str:
    from kubernetes.client.exceptions import ApiException

    try:
        text = core.read_namespaced_pod_log(
            pod.metadata.name, pod.metadata.namespace, container=CONTAINER, tail_lines=LOG_TAIL_LINES
        )
        if text:
            return str(text).rstrip()
    except ApiException:
        pass  # no kubelet to ask (or no rights): the termination message below carries the tail
    for status in pod.status.container_statuses or ():
        terminated = status.state.terminated if status.state is not None else None
        if status.name == CONTAINER and terminated is not None and terminated.message:
            return "\n".join(str(terminated.message).rstrip().splitlines()[-LOG_TAIL_LINES:])
    return ""
