"""The build context (a tar.gz) and the ConfigMap + Job that run kaniko on it (pure: plain dicts, no client).

The context travels in a ConfigMap's ``binaryData`` (the Kubernetes API limits a ConfigMap to 1 MiB: a larger
context is refused here, with its size), mounted read-only into the kaniko container and read with
``--context tar://``. The Job runs one pod (``backoffLimit: 0``: a failed build is not retried with the same
inputs), is deleted ``ttlSecondsAfterFinished`` after it ends, and owns the ConfigMap (the runner sets the
owner reference once the Job exists), so both go together.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import tarfile
from collections.abc import Mapping
from typing import Any

from .settings import BuildSettings

#: The largest build context the ConfigMap can carry (the API server's limit on a ConfigMap's data, 1 MiB).
MAX_CONTEXT_BYTES = 1024 * 1024
#: The ConfigMap key (and file name in the kaniko container) of the build context.
CONTEXT_KEY = "context.tar.gz"
#: Where the context ConfigMap is mounted in the kaniko container.
# Not /kaniko/buildcontext: kaniko unpacks a tar:// context there, so that folder must stay writable.
CONTEXT_MOUNT = "/kaniko/context-archive"
#: Labels of every object the builder creates (the sample Role and `kubectl get -l` rely on them).
BUILD_LABELS = {
    "app.kubernetes.io/managed-by": "flytekitplugins-kubejobs",
    "app.kubernetes.io/component": "image-build",
}
#: The annotation holding the image a build Job pushes.
IMAGE_ANNOTATION = "kubejobs.flyte.org/image"
#: The kaniko container's name.
CONTAINER = "kaniko"

__all__ = [
    "BUILD_LABELS",
    "CONTAINER",
    "CONTEXT_KEY",
    "CONTEXT_MOUNT",
    "IMAGE_ANNOTATION",
    "MAX_CONTEXT_BYTES",
    "ContextTooLarge",
    "build_job",
    "build_name",
    "context_archive",
    "context_configmap",
]


class ContextTooLarge(ValueError):
    """The build context is above what one ConfigMap can hold."""


def context_archive(files: Mapping[str, bytes]) -> bytes:
    """A reproducible tar.gz of ``files`` (path in the context -> content): fixed mtimes, owners and modes."""
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as zipped, tarfile.open(fileobj=zipped, mode="w") as tar:
        for name in sorted(files):
            if name.startswith("/") or ".." in name.split("/"):
                raise ValueError(f"build context path {name!r} must be relative and stay inside the context")
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(files[name]), 0o644, 0
            tar.addfile(info, io.BytesIO(files[name]))
    archive = buffer.getvalue()
    if len(archive) > MAX_CONTEXT_BYTES:
        raise ContextTooLarge(
            f"the build context is {len(archive)} bytes compressed, above the {MAX_CONTEXT_BYTES} bytes a "
            "ConfigMap holds: copy fewer files (ImageSpec.copy / source_root) or put large data in the base image"
        )
    return archive


def build_name(image: str, suffix: str) -> str:
    """``kaniko-<10 hex of the image's sha256>-<suffix>``: readable, unique per attempt, a DNS-1123 label."""
    return f"kaniko-{hashlib.sha256(image.encode()).hexdigest()[:10]}-{suffix}"


def context_configmap(name: str, settings: BuildSettings, archive: bytes) -> dict[str, Any]:
    """The ConfigMap carrying the build context."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": settings.namespace, "labels": dict(BUILD_LABELS)},
        "binaryData": {CONTEXT_KEY: base64.b64encode(archive).decode("ascii")},
        "immutable": True,
    }


def build_job(name: str, settings: BuildSettings, image: str, platform: str = "linux/amd64") -> dict[str, Any]:
    """The Job running the kaniko executor on the ConfigMap ``name``'s context and pushing ``image``.

    kaniko runs as root (it unpacks the base image's filesystem and runs the RUN steps in its own container,
    so it needs root's file ownership and chown rights); the pod gets nothing else: no privilege escalation,
    RuntimeDefault seccomp, no service account token, read-only mounts. That fits Pod Security ``baseline``,
    not ``restricted``: keep builds in their own namespace (see the README's security notes).
    """
    labels = {**BUILD_LABELS, "kubejobs.flyte.org/build": name}
    mounts: list[dict[str, Any]] = [{"name": "context", "mountPath": CONTEXT_MOUNT, "readOnly": True}]
    volumes: list[dict[str, Any]] = [{"name": "context", "configMap": {"name": name}}]
    if settings.registry_secret is not None:
        mounts.append({"name": "docker-config", "mountPath": "/kaniko/.docker", "readOnly": True})
        volumes.append(
            {
                "name": "docker-config",
                "secret": {
                    "secretName": settings.registry_secret,
                    "items": [{"key": ".dockerconfigjson", "path": "config.json"}],
                },
            }
        )
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": settings.kaniko_image,
        "args": [
            f"--context=tar://{CONTEXT_MOUNT}/{CONTEXT_KEY}",
            "--dockerfile=Dockerfile",
            f"--destination={image}",
            f"--custom-platform={platform}",
            *settings.kaniko_args,
        ],
        # The pod status then carries the log's tail when the logs API cannot be read.
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "resources": {side: dict(amounts) for side, amounts in settings.resources.items()},
        "volumeMounts": mounts,
        "securityContext": {
            "runAsUser": 0,
            "runAsNonRoot": False,
            "allowPrivilegeEscalation": False,
            "privileged": False,
        },
    }
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": volumes,
    }
    pod_metadata: dict[str, Any] = {"labels": labels}
    if settings.pod_annotations:
        pod_metadata["annotations"] = dict(settings.pod_annotations)
    if settings.service_account is not None:
        pod_spec["serviceAccountName"] = settings.service_account
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": settings.namespace,
            "labels": labels,
            "annotations": {IMAGE_ANNOTATION: image},
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": settings.timeout,
            "ttlSecondsAfterFinished": settings.ttl_seconds_after_finished,
            "template": {"metadata": pod_metadata, "spec": pod_spec},
        },
    }
