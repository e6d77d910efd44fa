"""Pod specs and what the Kubernetes Pod Security Standards (the Pod Security admission's latest policy
version) say of them: allowed at baseline, allowed at restricted. Shared by the offline checker's tests and
the e2e test that asks the real API server's Pod Security admission the same question."""

from __future__ import annotations

import copy
from typing import Any

# A container that meets the restricted level; each case below changes one thing.
RESTRICTED_CONTAINER: dict[str, Any] = {
    "name": "main",
    "image": "busybox:1.36",
    "securityContext": {
        "allowPrivilegeEscalation": False,
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
        "capabilities": {"drop": ["ALL"]},
    },
}


def pod(spec: dict[str, Any] | None = None, container: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    """A pod template: the restricted container updated with ``container``, the spec with ``spec``."""
    c = copy.deepcopy(RESTRICTED_CONTAINER)
    for key, value in (container or {}).items():
        if key == "securityContext":
            c["securityContext"].update(value)
        else:
            c[key] = value
    return {"metadata": dict(meta), "spec": {"containers": [c], **(spec or {})}}


# (id, pod template, allowed at baseline, allowed at restricted)
CASES: list[tuple[str, dict[str, Any], bool, bool]] = [
    ("restricted-pod", pod(), True, True),
    ("plain-pod", {"metadata": {}, "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}}, True, False),
    ("host-network", pod({"hostNetwork": True}), False, False),
    ("host-pid", pod({"hostPID": True}), False, False),
    ("host-ipc", pod({"hostIPC": True}), False, False),
    ("host-network-false", pod({"hostNetwork": False}), True, True),
    # (privileged needs allowPrivilegeEscalation: the API server refuses privileged with it false)
    (
        "privileged",
        pod(container={"securityContext": {"privileged": True, "allowPrivilegeEscalation": True}}),
        False,
        False,
    ),
    ("privileged-false", pod(container={"securityContext": {"privileged": False}}), True, True),
    ("host-path-root", pod({"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}), False, False),
    ("empty-dir", pod({"volumes": [{"name": "shm", "emptyDir": {"medium": "Memory"}}]}), True, True),
    ("nfs-volume", pod({"volumes": [{"name": "data", "nfs": {"server": "nfs", "path": "/x"}}]}), True, False),
    ("pvc-volume", pod({"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "c"}}]}), True, True),
    ("host-port", pod(container={"ports": [{"containerPort": 80, "hostPort": 8080}]}), False, False),
    ("container-port", pod(container={"ports": [{"containerPort": 80}]}), True, True),
    (
        "cap-sys-admin",
        pod(container={"securityContext": {"capabilities": {"add": ["SYS_ADMIN"], "drop": ["ALL"]}}}),
        False,
        False,
    ),
    (
        "cap-chown",
        pod(container={"securityContext": {"capabilities": {"add": ["CHOWN"], "drop": ["ALL"]}}}),
        True,
        False,
    ),
    (
        "cap-net-bind",
        pod(container={"securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}}}),
        True,
        True,
    ),
    ("caps-not-dropped", pod(container={"securityContext": {"capabilities": {}}}), True, False),
    (
        "seccomp-unconfined",
        pod(container={"securityContext": {"seccompProfile": {"type": "Unconfined"}}}),
        False,
        False,
    ),
    (
        "seccomp-on-pod-only",
        {
            "metadata": {},
            "spec": {
                "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}, "runAsNonRoot": True},
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox:1.36",
                        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                    }
                ],
            },
        },
        True,
        True,
    ),
    ("escalation-allowed", pod(container={"securityContext": {"allowPrivilegeEscalation": True}}), True, False),
    ("run-as-root-user", pod(container={"securityContext": {"runAsUser": 0}}), True, False),
    ("run-as-non-root-false", pod(container={"securityContext": {"runAsNonRoot": False}}), True, False),
    ("pod-run-as-user-0", pod({"securityContext": {"runAsUser": 0}}), True, False),
    # Unmasked needs a user namespace (hostUsers: false), where baseline allows it and restricted does not.
    (
        "proc-mount-unmasked",
        pod({"hostUsers": False}, container={"securityContext": {"procMount": "Unmasked"}}),
        True,
        False,
    ),
    (
        "sysctl-safe",
        pod({"securityContext": {"sysctls": [{"name": "net.ipv4.tcp_syncookies", "value": "1"}]}}),
        True,
        True,
    ),
    ("sysctl-unsafe", pod({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}}), False, False),
    ("selinux-type", pod(container={"securityContext": {"seLinuxOptions": {"type": "spc_t"}}}), False, False),
    ("selinux-user", pod(container={"securityContext": {"seLinuxOptions": {"user": "root"}}}), False, False),
    (
        "selinux-container-t",
        pod(container={"securityContext": {"seLinuxOptions": {"type": "container_t"}}}),
        True,
        True,
    ),
    (
        "apparmor-unconfined",
        pod(container={"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}),
        False,
        False,
    ),
    (
        "apparmor-annotation",
        pod(annotations={"container.apparmor.security.beta.kubernetes.io/main": "unconfined"}),
        False,
        False,
    ),
    (
        "probe-host",
        pod(container={"livenessProbe": {"httpGet": {"host": "10.0.0.1", "port": 80, "path": "/"}}}),
        False,
        False,
    ),
    (
        "privileged-init-container",
        {
            "metadata": {},
            "spec": {
                "initContainers": [{"name": "init", "image": "busybox:1.36", "securityContext": {"privileged": True}}],
                "containers": [copy.deepcopy(RESTRICTED_CONTAINER)],
            },
        },
        False,
        False,
    ),
]
