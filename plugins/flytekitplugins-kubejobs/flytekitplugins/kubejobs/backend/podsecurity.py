"""Kubernetes Pod Security Standards, checked on the objects the backend builds before they are created.

A job arrives with the caller's pod spec: host namespaces, privileged containers, ``hostPath: /`` and any
capability are one field away. The connector checks every pod template of an object against the level its
configuration names (``privileged``, ``baseline``, ``restricted``; default ``baseline``) and refuses the task
with a message naming the field, instead of leaving the decision to the operator's pods failing admission
one by one later. The rules are those of the Pod Security admission at its latest policy version
(k8s.io/pod-security-admission v0.37), written against the wire-shaped dicts the backend builds; the
cluster's own Pod Security admission should still be enforced on the job namespaces (see the kubejobs
README, security section).

>>> job = {"spec": {"template": {"spec": {"hostNetwork": True, "containers": [{"name": "main"}]}}}}
>>> [str(v) for v in pod_security_violations(job, "baseline")]
['spec.template.spec.hostNetwork: host namespaces (hostNetwork=true) is not allowed at level baseline']
>>> pod_security_violations(job, "privileged")
[]
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["LEVELS", "PodSecurityViolation", "check_level", "pod_security_violations"]

LEVELS = ("privileged", "baseline", "restricted")

# Capabilities a baseline container may add (the container runtimes' default set).
_BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)
_SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_wmem",
        "net.ipv4.tcp_slow_start_after_idle",
        "net.ipv4.tcp_notsent_lowat",
    }
)
_SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
# Volume sources a restricted pod may use.
_RESTRICTED_VOLUMES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "image",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)
_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
_APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


@dataclass(frozen=True)
class PodSecurityViolation:
    """One field of one pod template that the level forbids."""

    path: str
    rule: str
    level: str

    def __str__(self) -> str:
        return f"{self.path}: {self.rule} is not allowed at level {self.level}"


def check_level(field: str, value: object) -> str:
    """``value`` if it names a Pod Security Standards level, else a ValueError naming ``field``."""
    if value not in LEVELS:
        raise ValueError(f"{field} must be one of {', '.join(LEVELS)}, got {value!r}")
    return str(value)


def pod_security_violations(obj: Mapping[str, Any], level: str) -> list[PodSecurityViolation]:
    """Every violation of ``level`` in the pod templates found anywhere in ``obj`` (a job object as the
    backend builds it, or a pod template or pod), in document order."""
    check_level("level", level)
    if level == "privileged":
        return []
    out: dict[str, PodSecurityViolation] = {}
    for path, metadata, spec in _pod_templates(obj, ""):
        found = list(_baseline(spec, metadata))
        if level == "restricted":
            found += _restricted(spec)  # a restricted rule on the same field replaces the baseline one
        for field, rule in found:
            out[f"{path}{field}"] = PodSecurityViolation(f"{path}{field}", rule, level)
    return list(out.values())


def _pod_templates(node: object, path: str) -> Iterator[tuple[str, Mapping[str, Any], Mapping[str, Any]]]:
    """(path of the pod spec, its metadata, the pod spec) for every mapping with a ``spec`` that has
    ``containers``: the shape of a pod template in every job kind, whatever the field holding it."""
    if isinstance(node, Mapping):
        spec = node.get("spec")
        if isinstance(spec, Mapping) and isinstance(spec.get("containers"), list):
            metadata = node.get("metadata")
            yield f"{path}spec.", metadata if isinstance(metadata, Mapping) else {}, spec
        for key, value in node.items():
            yield from _pod_templates(value, f"{path}{key}.")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _pod_templates(value, f"{path[:-1]}[{i}].")


def _containers(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for key in _CONTAINER_LISTS:
        for i, container in enumerate(spec.get(key) or []):
            if isinstance(container, Mapping):
                yield f"{key}[{i}].", container


def _context(holder: Mapping[str, Any]) -> Mapping[str, Any]:
    ctx = holder.get("securityContext")
    return ctx if isinstance(ctx, Mapping) else {}


def _sub(holder: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = holder.get(key)
    return value if isinstance(value, Mapping) else {}


def _in_user_namespace(spec: Mapping[str, Any]) -> bool:
    return spec.get("hostUsers") is False


def _baseline(spec: Mapping[str, Any], metadata: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key) is True:
            yield key, f"host namespaces ({key}=true)"
    pod_ctx = _context(spec)
    if _sub(pod_ctx, "windowsOptions").get("hostProcess") is True:
        yield "securityContext.windowsOptions.hostProcess", "a Windows host process"
    yield from _profiles("securityContext.", pod_ctx)
    for i, sysctl in enumerate(pod_ctx.get("sysctls") or []):
        name = sysctl.get("name") if isinstance(sysctl, Mapping) else None
        if name not in _SAFE_SYSCTLS:
            yield f"securityContext.sysctls[{i}].name", f"the sysctl {name!r}"
    for i, volume in enumerate(spec.get("volumes") or []):
        if isinstance(volume, Mapping) and "hostPath" in volume:
            yield f"volumes[{i}].hostPath", f"a hostPath volume ({volume.get('name')!r})"
    annotations = _sub(metadata, "annotations")
    for key, value in annotations.items():
        if key.startswith(_APPARMOR_ANNOTATION) and not (
            value in ("", "runtime/default") or str(value).startswith("localhost/")
        ):
            yield f"metadata.annotations[{key!r}]", f"the AppArmor profile {value!r}"
    for prefix, container in _containers(spec):
        ctx = _context(container)
        if _sub(ctx, "windowsOptions").get("hostProcess") is True:
            yield f"{prefix}securityContext.windowsOptions.hostProcess", "a Windows host process"
        if ctx.get("privileged") is True:
            yield f"{prefix}securityContext.privileged", "a privileged container"
        added = sorted(set(_sub(ctx, "capabilities").get("add") or []) - _BASELINE_CAPABILITIES)
        if added:
            yield f"{prefix}securityContext.capabilities.add", f"adding the capabilities {added}"
        if ctx.get("procMount") not in (None, "Default") and not _in_user_namespace(spec):
            yield f"{prefix}securityContext.procMount", f"procMount {ctx.get('procMount')!r}"
        yield from _profiles(f"{prefix}securityContext.", ctx)
        for j, port in enumerate(container.get("ports") or []):
            if isinstance(port, Mapping) and port.get("hostPort"):
                yield f"{prefix}ports[{j}].hostPort", f"the host port {port.get('hostPort')}"
        yield from _host_probes(prefix, container)


def _profiles(prefix: str, ctx: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """The seccomp, AppArmor and SELinux settings of a pod or container security context."""
    seccomp = _sub(ctx, "seccompProfile").get("type")
    if seccomp is not None and seccomp not in ("RuntimeDefault", "Localhost"):
        yield f"{prefix}seccompProfile.type", f"the seccomp profile {seccomp!r}"
    apparmor = _sub(ctx, "appArmorProfile").get("type")
    if apparmor is not None and apparmor not in ("RuntimeDefault", "Localhost"):
        yield f"{prefix}appArmorProfile.type", f"the AppArmor profile {apparmor!r}"
    selinux = _sub(ctx, "seLinuxOptions")
    if selinux.get("type", "") not in _SELINUX_TYPES:
        yield f"{prefix}seLinuxOptions.type", f"the SELinux type {selinux.get('type')!r}"
    for key in ("user", "role"):
        if selinux.get(key):
            yield f"{prefix}seLinuxOptions.{key}", f"setting the SELinux {key}"


def _host_probes(prefix: str, container: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """Probes and lifecycle hooks must not aim at another host (they run from the node)."""
    handlers = [(f"{probe}.", _sub(container, probe)) for probe in ("livenessProbe", "readinessProbe", "startupProbe")]
    lifecycle = _sub(container, "lifecycle")
    handlers += [(f"lifecycle.{hook}.", _sub(lifecycle, hook)) for hook in ("postStart", "preStop")]
    for path, handler in handlers:
        for kind in ("httpGet", "tcpSocket"):
            host = _sub(handler, kind).get("host")
            if host:
                yield f"{prefix}{path}{kind}.host", f"a probe or lifecycle host ({host!r})"


def _restricted(spec: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for i, volume in enumerate(spec.get("volumes") or []):
        if isinstance(volume, Mapping) and "hostPath" not in volume:  # hostPath: a baseline violation already
            sources = sorted(set(volume) - {"name"})
            if not set(sources) <= _RESTRICTED_VOLUMES or not sources:
                yield f"volumes[{i}]", f"the volume type {sources or ['unknown']} ({volume.get('name')!r})"
    windows = _sub(spec, "os").get("name") == "windows"
    user_namespace = _in_user_namespace(spec)
    pod_ctx = _context(spec)
    pod_non_root = pod_ctx.get("runAsNonRoot")
    pod_seccomp = _sub(pod_ctx, "seccompProfile").get("type")
    if not user_namespace:
        if pod_non_root is False:
            yield "securityContext.runAsNonRoot", "runAsNonRoot=false"
        if pod_ctx.get("runAsUser") == 0:
            yield "securityContext.runAsUser", "runAsUser=0"
    for prefix, container in _containers(spec):
        ctx = _context(container)
        if ctx.get("procMount") not in (None, "Default") and user_namespace:
            yield f"{prefix}securityContext.procMount", f"procMount {ctx.get('procMount')!r}"
        if not user_namespace:
            non_root = ctx.get("runAsNonRoot")
            if non_root is False or (non_root is None and pod_non_root is not True):
                yield f"{prefix}securityContext.runAsNonRoot", "running as root (runAsNonRoot is not true)"
            if ctx.get("runAsUser") == 0:
                yield f"{prefix}securityContext.runAsUser", "runAsUser=0"
        if windows:
            continue
        if ctx.get("allowPrivilegeEscalation") is not False:
            yield f"{prefix}securityContext.allowPrivilegeEscalation", "privilege escalation (it is not false)"
        if _sub(ctx, "seccompProfile").get("type") is None and pod_seccomp is None:
            yield f"{prefix}securityContext.seccompProfile.type", "no seccomp profile (RuntimeDefault or Localhost)"
        capabilities = _sub(ctx, "capabilities")
        if "ALL" not in (capabilities.get("drop") or []):
            yield f"{prefix}securityContext.capabilities.drop", 'keeping capabilities (drop must include "ALL")'
        added = sorted(set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"})
        if added:
            yield f"{prefix}securityContext.capabilities.add", f"adding the capabilities {added}"
