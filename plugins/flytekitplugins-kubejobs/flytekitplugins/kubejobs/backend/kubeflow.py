"""PyTorchJob, TFJob and MPIJob specs from task_type_version 0 and 1 customs (Flyte's kfoperators plugins); the
MPIJob as the Training Operator's v1 or the mpi-operator's v2beta1 (``mpi_operator``)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Optional

from flyteidl.plugins import mpi_pb2 as mpi_v0
from flyteidl.plugins import pytorch_pb2 as pytorch_v0
from flyteidl.plugins import tensorflow_pb2 as tensorflow_v0
from flyteidl.plugins.kubeflow import mpi_pb2, pytorch_pb2, tensorflow_pb2

from ..wire.kinds import MPIJOB_V2BETA1
from .builders import BuildContext, BuiltSpec, builds
from .computetemplates import group_gpu_name, lay_template, resolve_template, split_idl
from .decode import custom_dict, decode_custom
from .errors import BuildError
from .extension import apply_role_extension, apply_run_policy_extension, parse_extension
from .mpi_operator import v2beta1_spec
from .pods import build_pod, primary_container
from .resources import apply_platform_defaults, idl_to_k8s, merge_resources

__all__: list[str] = []  # the builders register themselves (``builders.builds``)

_RESTART = {0: "Never", 1: "OnFailure", 2: "Always"}
_CLEAN_POD = {0: "None", 1: "Running", 2: "All"}


@dataclass
class _Role:
    """One role's settings after choosing ``common`` or the deprecated fields."""

    replicas: int = 0
    image: str = ""
    resources: Any = None
    restart_policy: int = 0
    command: tuple[str, ...] = ()


def _role_settings(rs: Any) -> _Role:
    if rs is None:
        return _Role()
    source = rs.common if rs.HasField("common") else rs  # common wins wholesale (Flyte's rule)
    return _Role(
        replicas=source.replicas,
        image=source.image,
        resources=source.resources if source.HasField("resources") else None,
        restart_policy=int(source.restart_policy),
        command=tuple(getattr(rs, "command", ())),
    )


def _check_replicas(what: str, count: int) -> int:
    if count < 0:
        raise BuildError(f"{what} replicas must not be negative, got {count}")
    return count


def _replica_spec(ctx: BuildContext, role_name: str, role: Optional[_Role], ext: dict[str, Any]) -> dict[str, Any]:
    """``ToReplicaSpec`` (role None: v0, task settings only) or ``ToReplicaSpecWithOverrides``."""
    role_ext = ext.get("replicaSpecs", {}).get(role_name, {})
    template = None
    if "computeTemplate" in role_ext:
        template = resolve_template(ctx.config.compute_templates, role_name, role_ext["computeTemplate"])
        gpu_name = group_gpu_name(template, role_ext.get("gpuResourceName"), ctx.config.k8s.gpu_resource_name)
    else:
        gpu_name = role_ext.get("gpuResourceName") or ctx.config.k8s.gpu_resource_name
    field = f"{role_name}.resources"
    explicit = None
    if role is not None and role.resources is not None and (role.resources.requests or role.resources.limits):
        explicit = idl_to_k8s(field, role.resources, gpu_name)
    extra_resources = role_ext.get("resources")
    if template is not None:
        # As a ComputeTemplate object would have been serialized: the template's amounts under the role's own
        # (IDL names as role resources, the others as extension resources), its pod settings before the role's.
        merged = lay_template(role_name, template, merge_resources(explicit or {}, extra_resources or {}), gpu_name)
        explicit, extras = split_idl(merged, gpu_name)
        if not any(explicit.values()):
            explicit = None
        extra_resources = extras if any(extras.values()) else None
        role_ext = dict(role_ext)
        selector = {**template.node_selector, **role_ext.get("nodeSelector", {})}
        if selector:
            role_ext["nodeSelector"] = selector
        tolerations = [*copy.deepcopy(list(template.tolerations)), *role_ext.get("tolerations", [])]
        if tolerations:
            role_ext["tolerations"] = tolerations
    role_resources = None
    if explicit is not None:
        role_resources = apply_platform_defaults(field, explicit, ctx.config.k8s, gpu_name)
    pod = build_pod(
        ctx.template,
        ctx.metadata,
        ctx.config,
        container_name=ctx.name,
        role_resources=role_resources,
        extra_resources=extra_resources,
        gpu_name=gpu_name,
        template_vars=ctx.template_vars,
    )
    primary = primary_container(pod.spec, pod.primary)
    primary["name"] = ctx.kind.container  # OverridePrimaryContainerName: only the first match
    if role is not None:
        if role.image:
            primary["image"] = role.image
        if role.command:
            primary["args"] = list(role.command)  # Flyte puts the MPI role command into args
    apply_role_extension(pod.spec, primary, role_ext)
    k8s = ctx.config.k8s
    md = ctx.metadata
    return {
        "replicas": 0,
        "restartPolicy": _RESTART.get(role.restart_policy if role else 0, "Never"),
        "template": {
            "metadata": {
                "labels": {**k8s.default_labels, **pod.labels, **md.labels},
                "annotations": {**k8s.default_annotations, **pod.annotations, **md.annotations},
            },
            "spec": pod.spec,
        },
    }


def _v1_role(
    ctx: BuildContext, msg: Any, role_name: str, ext: dict[str, Any], master: bool = False
) -> tuple[int, dict[str, Any]]:
    field = ctx.kind.role(role_name).idl_field
    role = _role_settings(getattr(msg, field) if msg.HasField(field) else None)
    count = _check_replicas(role_name, role.replicas)
    spec = _replica_spec(ctx, role_name, role, ext)
    spec["replicas"] = 1 if master else count
    return count, spec


def _run_policy(msg: Any, ext: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg is not None and msg.HasField("run_policy"):
        rp = msg.run_policy
        out["cleanPodPolicy"] = _CLEAN_POD.get(int(rp.clean_pod_policy), "None")
        for key, value in (
            ("ttlSecondsAfterFinished", rp.ttl_seconds_after_finished),
            ("activeDeadlineSeconds", rp.active_deadline_seconds),
            ("backoffLimit", rp.backoff_limit),
        ):
            if value:
                out[key] = value
    apply_run_policy_extension(out, ext)
    return out


def _elastic(cfg: Any) -> dict[str, Any]:
    return {
        "minReplicas": cfg.min_replicas,
        "maxReplicas": cfg.max_replicas,
        "rdzvBackend": cfg.rdzv_backend,
        "nProcPerNode": cfg.nproc_per_node,
        "maxRestarts": cfg.max_restarts,
    }


def _copy(spec: dict[str, Any], replicas: int) -> dict[str, Any]:
    out = copy.deepcopy(spec)
    out["replicas"] = replicas
    return out


def _custom(ctx: BuildContext) -> tuple[dict[str, Any], int, dict[str, Any]]:
    """The custom, its task_type_version (one the table lists for the kind) and its checked extension."""
    version = ctx.template.task_type_version
    if version not in ctx.kind.task_type_versions:
        raise BuildError(
            f"[BadTaskSpecification] unsupported task template version [{version}] for task type "
            f"{ctx.template.type!r}: this backend reads versions "
            + " and ".join(str(v) for v in ctx.kind.task_type_versions)
        )
    custom = custom_dict(ctx.template)
    return custom, version, parse_extension(custom, ctx.kind)


@builds("pytorch")
def _pytorch(ctx: BuildContext) -> BuiltSpec:
    custom, version, ext = _custom(ctx)
    if version == 0:
        msg0 = decode_custom(custom, pytorch_v0.DistributedPyTorchTrainingTask(), "pytorch custom (v0)")
        workers = _check_replicas("Worker", msg0.workers)
        master = _copy(_replica_spec(ctx, "Master", None, ext), 1)
        worker = _copy(_replica_spec(ctx, "Worker", None, ext), workers)
        elastic = msg0.elastic_config if msg0.HasField("elastic_config") else None
        run_policy = _run_policy(None, ext)
    else:
        msg = decode_custom(custom, pytorch_pb2.DistributedPyTorchTrainingTask(), "pytorch custom")
        _, master = _v1_role(ctx, msg, "Master", ext, master=True)
        workers, worker = _v1_role(ctx, msg, "Worker", ext)
        env = worker["template"]["spec"]["containers"][0].setdefault("env", [])
        env.append({"name": "_F_WN", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
        if ctx.config.k8s.enable_distributed_error_aggregation:
            env.append({"name": "_F_DES", "value": "Earliest"})
        elastic = msg.elastic_config if msg.HasField("elastic_config") else None
        run_policy = _run_policy(msg, ext)
    replica_specs = {"Master": master}
    if workers > 0:
        replica_specs["Worker"] = worker
    spec: dict[str, Any] = {ctx.kind.replica_specs_key: replica_specs, "runPolicy": run_policy}
    if elastic is not None:
        if workers <= 0:  # deviation: Flyte emits an empty pytorchReplicaSpecs, which the webhook rejects
            raise BuildError("an elastic PyTorch job needs at least one worker (workerReplicas.replicas > 0)")
        spec["elasticPolicy"] = _elastic(elastic)
        del replica_specs["Master"]
    return BuiltSpec(spec)


@builds("tensorflow")
def _tensorflow(ctx: BuildContext) -> BuiltSpec:
    custom, version, ext = _custom(ctx)
    specs: dict[str, Any] = {}
    if version == 0:
        msg0 = decode_custom(custom, tensorflow_v0.DistributedTensorflowTrainingTask(), "tensorflow custom (v0)")
        counts = {
            "Chief": msg0.chief_replicas,
            "Worker": msg0.workers,
            "PS": msg0.ps_replicas,
            "Evaluator": msg0.evaluator_replicas,
        }
        for role_name, count in counts.items():
            if _check_replicas(role_name, count) > 0:
                specs[role_name] = _copy(_replica_spec(ctx, role_name, None, ext), count)
        run_policy = _run_policy(None, ext)
    else:
        msg = decode_custom(custom, tensorflow_pb2.DistributedTensorflowTrainingTask(), "tensorflow custom")
        for entry in ctx.kind.roles:
            role = _role_settings(getattr(msg, entry.idl_field) if msg.HasField(entry.idl_field) else None)
            if _check_replicas(entry.name, role.replicas) <= 0:
                continue  # Flyte skips roles without replicas
            specs[entry.name] = _replica_spec(ctx, entry.name, role, ext)
            specs[entry.name]["replicas"] = role.replicas
        run_policy = _run_policy(msg, ext)
    if "Worker" not in specs:
        raise BuildError("number of workers must be greater than 0")
    return BuiltSpec({ctx.kind.replica_specs_key: specs, "runPolicy": run_policy})


def _check_slots(slots: int) -> int:
    if slots < 0:
        raise BuildError(f"mpi custom: slots must not be negative, got {slots}")
    return slots


@builds("mpi")
def _mpi(ctx: BuildContext) -> BuiltSpec:
    custom, version, ext = _custom(ctx)
    if version == 0:
        msg0 = decode_custom(custom, mpi_v0.DistributedMPITrainingTask(), "mpi custom (v0)")
        launchers = max(msg0.num_launcher_replicas, 1)
        workers = _check_replicas("Worker", msg0.num_workers)
        launcher = _copy(_replica_spec(ctx, "Launcher", None, ext), launchers)
        worker = _copy(_replica_spec(ctx, "Worker", None, ext), workers)
        # deviation: an empty command gives [] (Go's strings.Split gives [""])
        args = [a for a in ctx.template.config.get("worker_spec_command", "").split(" ") if a]
        for c in worker["template"]["spec"]["containers"]:
            if c.get("name") == ctx.kind.container:
                c["args"], c["command"] = list(args), []
        slots = _check_slots(msg0.slots) or 1  # deviation: proto3 0 means unset; the operator needs >= 1
        run_policy = _run_policy(None, ext)
        worker_command = bool(args)
    else:
        msg = decode_custom(custom, mpi_pb2.DistributedMPITrainingTask(), "mpi custom")
        _, launcher = _v1_role(ctx, msg, "Launcher", ext, master=True)
        workers, worker = _v1_role(ctx, msg, "Worker", ext)
        # deviation: Flyte ignores slots and always writes 1; the slots the mpirun line uses must match
        slots = _check_slots(msg.slots) or 1
        run_policy = _run_policy(msg, ext)
        worker_command = msg.HasField("worker_replicas") and bool(msg.worker_replicas.command)
    if workers <= 0:
        raise BuildError("number of workers must be greater than 0")
    spec = {
        "slotsPerWorker": slots,
        "runPolicy": run_policy,
        ctx.kind.replica_specs_key: {"Launcher": launcher, "Worker": worker},
    }
    if ctx.kind is MPIJOB_V2BETA1:
        return BuiltSpec(v2beta1_spec(spec, ext.get("mpiJob", {}), worker_command))
    return BuiltSpec(spec)
