"""The ``/dev/shm`` volume of PyTorch and Elastic tasks, as flytekitplugins-kfpytorch 1.16 adds it.

A container runtime gives a pod 64 MB of ``/dev/shm``; a ``DataLoader`` with worker processes needs more
(it dies with "bus error"). So, like the official plugin, a PyTorch or Elastic task gets the pod template
``emptyDir`` volume ``shm`` with medium ``Memory`` mounted at ``/dev/shm`` on the primary container, unless
``increase_shared_mem=False`` or ``@task(shared_memory=True | "<size>")`` (flytekit's extended resources
then carry it). It travels exactly as the official plugin sends it, as the task's ``k8s_pod``, which every
Flyte backend (ours included) applies to every replica of the job. The user's ``PodTemplate`` is copied,
never changed, so one template serves any number of tasks.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from flytekit.core.pod_template import PodTemplate

__all__ = ["SHM_VOLUME", "SHM_MOUNT_PATH", "wants_shm_volume", "with_shm_volume"]

#: The volume name and mount path the official plugin uses.
SHM_VOLUME = "shm"
SHM_MOUNT_PATH = "/dev/shm"


def wants_shm_volume(increase_shared_mem: Optional[bool], shared_memory: object) -> bool:
    """The official rule: unless opted out, and unless ``@task(shared_memory=...)`` asks for flytekit's own
    shared memory (``True`` or a size; ``None``/``False`` do not)."""
    return increase_shared_mem is not False and (shared_memory is None or shared_memory is False)


def _conflict(owner: str, what: str) -> ValueError:
    return ValueError(
        f"{owner}: {what}, so the /dev/shm volume cannot be added; set {owner}(..., increase_shared_mem=False) "
        "and mount your own, or use @task(shared_memory=True) (or a size such as shared_memory='2Gi')"
    )


def check_role_mounts(owner: str, roles: Mapping[str, Any]) -> None:
    """A role's own ``volumes``/``volume_mounts`` (the kubejobs extension) must not collide with the
    added volume: the pod would be refused by the API server."""
    for role_name, role in roles.items():
        for mount in role.volume_mounts or ():
            if mount.get("mountPath") == SHM_MOUNT_PATH:
                raise _conflict(owner, f"{role_name}.volume_mounts already mounts {SHM_MOUNT_PATH}")
        for volume in role.volumes or ():
            if volume.get("name") == SHM_VOLUME:
                raise _conflict(owner, f"{role_name}.volumes already has a volume named {SHM_VOLUME!r}")


def _names(items: Optional[Sequence[Any]], attr: str) -> list[Any]:
    return [getattr(i, attr, None) for i in items or ()]


def with_shm_volume(owner: str, pod_template: Optional[PodTemplate]) -> PodTemplate:
    """A copy of ``pod_template`` (a new one when None) with the ``shm`` volume and its mount on the primary
    container. Refused, as by the official plugin, when the template has several containers or already
    mounts ``/dev/shm``; and (the official would send a pod the API server refuses) when it already has a
    volume named ``shm``."""
    from kubernetes.client import V1Container, V1EmptyDirVolumeSource, V1PodSpec, V1Volume, V1VolumeMount

    template = PodTemplate() if pod_template is None else copy.deepcopy(pod_template)
    if template.pod_spec is None:
        template.pod_spec = V1PodSpec(containers=[])
    spec = template.pod_spec
    containers = list(spec.containers or [])
    if len(containers) >= 2:
        raise _conflict(owner, f"the pod template has {len(containers)} containers")
    if SHM_VOLUME in _names(spec.volumes, "name"):
        raise _conflict(owner, f"the pod template already has a volume named {SHM_VOLUME!r}")
    primary_name = template.primary_container_name
    primary = next((c for c in containers if c.name == primary_name), None)
    if primary is None:
        # The official plugin would mount a lone non-primary container (a sidecar); flytekit adds the
        # primary at serialization, so it is added here to carry the mount.
        primary = V1Container(name=primary_name)
        containers.append(primary)
    if SHM_MOUNT_PATH in _names(primary.volume_mounts, "mount_path"):
        raise _conflict(owner, f"the pod template's container {primary_name!r} already mounts {SHM_MOUNT_PATH}")
    primary.volume_mounts = [*(primary.volume_mounts or []), V1VolumeMount(name=SHM_VOLUME, mount_path=SHM_MOUNT_PATH)]
    spec.containers = containers
    spec.volumes = [*(spec.volumes or []), V1Volume(name=SHM_VOLUME, empty_dir=V1EmptyDirVolumeSource(medium="Memory"))]
    return template
