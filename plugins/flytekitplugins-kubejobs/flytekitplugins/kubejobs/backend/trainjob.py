"""Kubeflow Trainer v2 ``TrainJob`` (``trainer.kubeflow.org/v1alpha1``) from the same ``pytorch`` and ``mpi``
customs the v1 kinds are built from (the wire stays as it is).

The pod is built by the v1 path (``kubeflow._replica_spec``: Flyte's pod, role resources, role extension), then
split into what a TrainJob can carry: ``trainer{image, command, args, env, numNodes, numProcPerNode,
resourcesPerNode}`` and one ``runtimePatches`` entry (pod metadata, scheduling, volumes, service account,
security contexts, the trainer container's volume mounts). Every setting with no TrainJob meaning is a
``BuildError`` naming it; the mapping table is in the package README ("TrainJob (Kubeflow Trainer v2)").
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any, Optional

from flyteidl.plugins import mpi_pb2 as mpi_v0
from flyteidl.plugins import pytorch_pb2 as pytorch_v0
from flyteidl.plugins.kubeflow import mpi_pb2, pytorch_pb2

from ..wire.kinds import KINDS, TRAINJOB
from ..wire.quantity import canonical_quantity
from .builders import BuildContext
from .decode import custom_dict, decode_custom
from .errors import BuildError
from .extension import parse_extension
from .kubeflow import _replica_spec, _role_settings  # the v1 role pod, reused as is
from .kueue import apply_queue, task_queue
from .naming import execution_name_parts, object_name
from .plugins_config import BackendConfig
from .trainjob_config import TRAINER_GROUP, TrainJobConfig

__all__ = ["API_VERSION", "KIND", "MAX_NAME_LENGTH", "TRAINER_PORT", "build_trainjob"]

API_VERSION = TRAINJOB.api_version
KIND = TRAINJOB.kind
#: JobSet's webhook wants ``<name>-<replicatedJob>-<jobIndex>-<podIndex>-xxxxx`` to be a DNS-1035 label (63):
#: 40 leaves room for ``-launcher-0-99999-xxxxx``.
MAX_NAME_LENGTH = TRAINJOB.max_name_length
#: ``constants.ContainerTrainerPort``: the port the torch plugin exposes on the trainer container.
TRAINER_PORT = 29500
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_CONTAINER = TRAINJOB.container  # the trainer container (and replicated job) of every upstream runtime
_COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
_TORCH_RESERVED = frozenset({"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"})
_MPI_RESERVED = frozenset(
    {
        "OMPI_MCA_orte_default_hostfile",
        "OMPI_MCA_plm_rsh_args",
        "OMPI_MCA_orte_keep_fqdn_hostnames",
        "OMPI_MCA_orte_set_default_slots",
    }
)
#: The v1 operator's rendezvous variables for a non-elastic PyTorchJob, which this backend sets itself.
_TORCH_V1_ENV = frozenset({"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"})
_POD_PATCH_KEYS = (
    "serviceAccountName",
    "volumes",
    "imagePullSecrets",
    "securityContext",
    "nodeSelector",
    "affinity",
    "tolerations",
    "schedulingGates",
)
_CONTAINER_KEYS = frozenset(
    {
        "name",
        "image",
        "command",
        "args",
        "env",
        "resources",
        "volumeMounts",
        "securityContext",
        "terminationMessagePolicy",
    }
)


def _refuse(what: str, why: str = "") -> BuildError:
    return BuildError(f"{what} has no TrainJob meaning{': ' + why if why else ''} (use the kubeflow.org/v1 target)")


def _dedupe_env(env: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per name (trainer.env is a list-map on name): the last one wins, as in a pod."""
    last = {e["name"]: i for i, e in enumerate(env)}
    return [e for i, e in enumerate(env) if last[e["name"]] == i]


def _split_pod(
    replica: Mapping[str, Any], role: str, config: TrainJobConfig, *, trainer_container: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the primary container, the runtime patch of this replicated job) of a v1 replica spec."""
    template = replica["template"]
    spec = dict(template["spec"])
    containers = spec.pop("containers")
    if len(containers) != 1:
        names = [c.get("name") for c in containers]
        raise _refuse(
            f"{role}: extra containers {names[1:]}", "a runtime patch can only patch the runtime's containers"
        )
    primary = containers[0]
    restart = spec.pop("restartPolicy", "Never")
    if restart != "Never":
        raise _refuse(f"{role}: restartPolicy {restart!r}", "the runtime's Job template decides")
    if not spec.get("affinity"):
        spec.pop("affinity", None)
    pod: dict[str, Any] = {}
    allowed = _POD_PATCH_KEYS + (("terminationGracePeriodSeconds",) if config.release.patches_termination_grace else ())
    for key in list(spec):
        if key not in allowed:
            raise _refuse(
                f"{role}: pod setting {key!r}={spec[key]!r}",
                f"Trainer v2.{config.release.minor} runtimePatches lack it",
            )
        if spec[key] not in (None, "", [], {}):
            pod[key] = spec[key]
    for key in primary:
        if key not in _CONTAINER_KEYS:
            raise _refuse(f"{role}: container setting {key!r}={primary[key]!r}")
    if primary.get("terminationMessagePolicy", "FallbackToLogsOnError") != "FallbackToLogsOnError":
        raise _refuse(f"{role}: terminationMessagePolicy {primary['terminationMessagePolicy']!r}")
    patch_container: dict[str, Any] = {}
    mounts = primary.get("volumeMounts") or []
    names = [m.get("name") for m in mounts]
    if len(set(names)) != len(names):
        raise _refuse(f"{role}: two volumeMounts of one volume {names}", "runtime patches key mounts by volume name")
    if mounts:
        patch_container["volumeMounts"] = mounts
    if primary.get("securityContext"):
        patch_container["securityContext"] = primary["securityContext"]
    if not trainer_container and primary.get("env"):
        patch_container["env"] = primary["env"]
    if patch_container:
        pod["containers"] = [{"name": _CONTAINER, **patch_container}]
    meta = {k: v for k, v in template.get("metadata", {}).items() if v}
    patch: dict[str, Any] = {"template": {"spec": {"template": {}}}}
    if meta:
        patch["template"]["spec"]["template"]["metadata"] = meta
    if pod:
        patch["template"]["spec"]["template"]["spec"] = pod
    return primary, patch


def _check_role_matches(role_name: str, role: Any, ext: Mapping[str, Any], node_role: str, node: Any) -> None:
    """A role that runs from the node template (PyTorch Master) may only repeat the node role's settings."""
    rs = ext.get("replicaSpecs", {})
    if role.image and role.image != node.image:
        raise BuildError(
            f"{role_name}.image {role.image!r} differs from {node_role}.image {node.image!r}: "
            "a TrainJob runs every node from one template"
        )
    if (
        role.resources is not None
        and (role.resources.requests or role.resources.limits)
        and role.resources != node.resources
    ):
        raise BuildError(f"{role_name} resources differ from {node_role}'s: a TrainJob has one resourcesPerNode")
    if rs.get(role_name) and rs.get(role_name) != rs.get(node_role):
        raise BuildError(
            f"kubejobs.replicaSpecs.{role_name} differs from {node_role}'s: "
            "a TrainJob runs every node from one template"
        )


def _check_restart(role_name: str, role: Any) -> None:
    if role is not None and role.restart_policy:
        raise _refuse(
            f"{role_name}.restart_policy {role.restart_policy}", "pods restart as the runtime's Job template says"
        )


def _run_policy(msg: Any, ext: Mapping[str, Any], spec: dict[str, Any]) -> None:
    if msg is not None and msg.HasField("run_policy"):
        rp = msg.run_policy
        if rp.clean_pod_policy:
            raise _refuse(f"runPolicy.cleanPodPolicy {rp.clean_pod_policy}", "JobSet keeps finished pods")
        if rp.ttl_seconds_after_finished:
            raise _refuse("runPolicy.ttlSecondsAfterFinished", "the runtime's JobSet ttlSecondsAfterFinished applies")
        if rp.backoff_limit:
            raise _refuse("runPolicy.backoffLimit", "retries are the runtime's JobSet failurePolicy.maxRestarts")
        if rp.active_deadline_seconds:
            spec["activeDeadlineSeconds"] = rp.active_deadline_seconds
    run = ext.get("runPolicy", {})
    if "backoffLimit" in run:
        raise _refuse("kubejobs.runPolicy.backoffLimit", "retries are the runtime's JobSet failurePolicy.maxRestarts")
    if "schedulingPolicy" in run:
        raise _refuse("kubejobs.runPolicy.schedulingPolicy", "gang scheduling is the runtime's podGroupPolicy")
    if "suspend" in run:
        spec["suspend"] = run["suspend"]


def _reserved(env: list[dict[str, Any]], names: frozenset[str], why: str) -> None:
    taken = sorted({e["name"] for e in env} & names)
    if taken:
        raise BuildError(f"env {taken} must not be set on a TrainJob: {why}")


def _trainer(primary: Mapping[str, Any], num_nodes: int) -> dict[str, Any]:
    trainer: dict[str, Any] = {"image": primary["image"], "numNodes": num_nodes}
    for key in ("command", "args"):
        if primary.get(key):
            trainer[key] = list(primary[key])
    env = _dedupe_env(list(primary.get("env") or []))
    if env:
        trainer["env"] = env
    if primary.get("resources"):
        trainer["resourcesPerNode"] = primary["resources"]
    return trainer


def _pytorch(ctx: BuildContext, tj: TrainJobConfig, custom: dict[str, Any], version: int) -> dict[str, Any]:
    ext = parse_extension(custom, ctx.kind)
    if version == 0:
        msg0 = decode_custom(custom, pytorch_v0.DistributedPyTorchTrainingTask(), "pytorch custom (v0)")
        workers, msg, elastic = msg0.workers, None, msg0.elastic_config if msg0.HasField("elastic_config") else None
        worker = _replica_spec(ctx, "Worker", None, ext)
    else:
        msg = decode_custom(custom, pytorch_pb2.DistributedPyTorchTrainingTask(), "pytorch custom")
        master = _role_settings(msg.master_replicas if msg.HasField("master_replicas") else None)
        node_role = _role_settings(msg.worker_replicas if msg.HasField("worker_replicas") else None)
        _check_restart("Master", master)
        _check_restart("Worker", node_role)
        _check_role_matches("Master", master, ext, "Worker", node_role)
        workers, elastic = node_role.replicas, msg.elastic_config if msg.HasField("elastic_config") else None
        worker = _replica_spec(ctx, "Worker", node_role, ext)
        env = worker["template"]["spec"]["containers"][0].setdefault("env", [])
        env.append({"name": "_F_WN", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
        if ctx.config.k8s.enable_distributed_error_aggregation:
            env.append({"name": "_F_DES", "value": "Earliest"})
    if workers < 0:
        raise BuildError(f"Worker replicas must not be negative, got {workers}")
    primary, patch = _split_pod(worker, "Worker", tj, trainer_container=True)
    _reserved(primary.get("env") or [], _TORCH_RESERVED, "the Trainer's torch plugin sets them")
    added: list[dict[str, Any]]
    master_addr = f"{ctx.name}-{_CONTAINER}-0-0.{ctx.name}"  # JobSet hostname of node 0 in the headless service
    if elastic is not None:
        if workers <= 0:
            raise BuildError("an elastic PyTorch job needs at least one worker (workerReplicas.replicas > 0)")
        if elastic.rdzv_backend not in ("", "c10d"):
            raise _refuse(
                f"elasticConfig.rdzvBackend {elastic.rdzv_backend!r}", "the nodes meet through c10d at node 0"
            )
        nodes, runtime = workers, tj.elastic or tj.pytorch
        added = [{"name": "PET_RDZV_ENDPOINT", "value": f"{master_addr}:{TRAINER_PORT}"}]
        nproc = elastic.nproc_per_node or 1
    else:
        nodes, runtime, nproc = 1 + workers, tj.pytorch, 1
        _reserved(primary.get("env") or [], _TORCH_V1_ENV, "the backend sets the v1 operator's rendezvous variables")
        added = [
            {"name": "MASTER_ADDR", "value": master_addr},
            {"name": "MASTER_PORT", "value": str(TRAINER_PORT)},
            {"name": "WORLD_SIZE", "value": str(nodes)},
            {"name": "RANK", "valueFrom": {"fieldRef": {"fieldPath": _COMPLETION_INDEX}}},
        ]
    if runtime is None:
        raise BuildError("plugins.trainjob.runtimes.pytorch is not set: no TrainingRuntime to run PyTorch tasks")
    primary["env"] = [*(primary.get("env") or []), *added]
    trainer = _trainer(primary, nodes)
    trainer["numProcPerNode"] = nproc
    spec: dict[str, Any] = {"runtimeRef": runtime.to_wire(), "trainer": trainer}
    _run_policy(msg, ext, spec)
    return _with_patches(spec, tj, {_CONTAINER: patch})


def _mpi(ctx: BuildContext, tj: TrainJobConfig, custom: dict[str, Any], version: int) -> dict[str, Any]:
    ext = parse_extension(custom, ctx.kind)
    if "env" in ext.get("replicaSpecs", {}).get("Worker", {}):
        raise _refuse("kubejobs.replicaSpecs.Worker.env", "node env comes from trainer.env only; set it on the task")
    if version == 0:
        msg0 = decode_custom(custom, mpi_v0.DistributedMPITrainingTask(), "mpi custom (v0)")
        if msg0.num_launcher_replicas > 1:
            raise BuildError(f"a TrainJob has one launcher, got num_launcher_replicas={msg0.num_launcher_replicas}")
        workers, slots, msg = msg0.num_workers, msg0.slots, None
        launcher = _replica_spec(ctx, "Launcher", None, ext)
        worker = _replica_spec(ctx, "Worker", None, ext)
    else:
        msg = decode_custom(custom, mpi_pb2.DistributedMPITrainingTask(), "mpi custom")
        launcher_role = _role_settings(msg.launcher_replicas if msg.HasField("launcher_replicas") else None)
        worker_role = _role_settings(msg.worker_replicas if msg.HasField("worker_replicas") else None)
        _check_restart("Launcher", launcher_role)
        _check_restart("Worker", worker_role)
        if worker_role.image or worker_role.command:
            raise _refuse("Worker.image / Worker.command", "the nodes run the MPI runtime's image and sshd")
        launcher_resources = launcher_role.resources
        explicit = launcher_resources is not None and (launcher_resources.requests or launcher_resources.limits)
        if explicit and launcher_resources != worker_role.resources:
            raise BuildError("Launcher resources differ from Worker's: a TrainJob has one resourcesPerNode")
        workers, slots = worker_role.replicas, msg.slots
        launcher = _replica_spec(ctx, "Launcher", launcher_role, ext)
        worker = _replica_spec(ctx, "Worker", worker_role, ext)
    if workers <= 0:
        raise BuildError("number of workers must be greater than 0")
    if slots < 0:
        raise BuildError(f"mpi custom: slots must not be negative, got {slots}")
    if tj.mpi is None:
        raise BuildError(
            "plugins.trainjob.runtimes.mpi is not set: upstream ships no plain MPI runtime (deepspeed-distributed and "
            "mlx-distributed run their own image on the nodes); name a runtime whose node image runs this task"
        )
    primary, launcher_patch = _split_pod(launcher, "Launcher", tj, trainer_container=True)
    node_primary, node_patch = _split_pod(worker, "Worker", tj, trainer_container=True)
    _reserved(primary.get("env") or [], _MPI_RESERVED, "the Trainer's MPI plugin sets them")
    trainer = _trainer(primary, workers)
    trainer["numProcPerNode"] = slots or 1
    if node_primary.get("resources"):
        trainer["resourcesPerNode"] = node_primary["resources"]  # the nodes do the work
    spec: dict[str, Any] = {"runtimeRef": tj.mpi.to_wire(), "trainer": trainer}
    _run_policy(msg, ext, spec)
    return _with_patches(spec, tj, {"launcher": launcher_patch, _CONTAINER: node_patch})


def _as_go_writes(trainer: dict[str, Any]) -> dict[str, Any]:
    """``spec.trainer`` as Go's types write it back: Kueue resumes an admitted TrainJob with a full update
    through them, and the CRD keeps ``spec.trainer`` immutable (``self == oldSelf`` on the raw values), so a
    quantity like ``1000m`` (written back ``1``) or an env ``value: ""`` (dropped, ``omitempty``) would make
    Kueue's update fail and the job never start. Same meaning, the spelling the round trip keeps."""
    out = dict(trainer)
    if "env" in out:
        out["env"] = [
            {k: v for k, v in e.items() if not (k == "value" and v == "")} if isinstance(e, dict) else e
            for e in out["env"]
        ]
    resources = out.get("resourcesPerNode")
    if isinstance(resources, dict):
        out["resourcesPerNode"] = {
            key: {name: canonical_quantity(str(q), f"resourcesPerNode.{key}.{name}") for name, q in amounts.items()}
            if key in ("requests", "limits") and isinstance(amounts, dict)
            else amounts
            for key, amounts in resources.items()
        }
    return out


def _with_patches(spec: dict[str, Any], tj: TrainJobConfig, patches: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    jobs = [{"name": name, **patch} for name, patch in patches.items() if patch["template"]["spec"]["template"]]
    if jobs:
        spec["runtimePatches"] = [
            {"manager": tj.manager, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": jobs}}}}
        ]
    return spec


def check_trainjob(obj: Mapping[str, Any], tj: TrainJobConfig) -> list[str]:
    """The CRD's CEL rules and webhook rules that need no old object or cluster state, as messages."""
    problems = []
    name = obj["metadata"]["name"]
    if len(name) > 63 or not _DNS1035.match(name):
        problems.append(f"metadata.name {name!r} must be an RFC 1035 label of at most 63 characters")
    spec = obj["spec"]
    trainer = spec.get("trainer", {})
    for key in ("command", "args"):
        for i, item in enumerate(trainer.get(key) or []):
            if len(item) > tj.release.max_arg_length:
                problems.append(f"spec.trainer.{key}[{i}] is longer than {tj.release.max_arg_length} characters")
    longest = max((p["name"] for p in _replicated_jobs(spec)), key=len, default=_CONTAINER)
    pod_name = f"{name}-{longest}-0-{max(trainer.get('numNodes', 1) - 1, 0)}-xxxxx"
    if len(pod_name) > 63:
        problems.append(f"JobSet pod names like {pod_name!r} would be longer than 63 characters")
    if spec.get("activeDeadlineSeconds", 1) < 1:
        problems.append("spec.activeDeadlineSeconds must be at least 1")
    for job in _replicated_jobs(spec):
        for c in job.get("template", {}).get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            if c.get("env") and c["name"] == _CONTAINER:
                problems.append(f"runtimePatches {job['name']}: env of the {_CONTAINER} container goes in trainer.env")
    return problems


def _replicated_jobs(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [
        job
        for patch in spec.get("runtimePatches", [])
        for job in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    ]


def build_trainjob(
    template: Any,
    metadata: Any,
    config: Optional[BackendConfig] = None,
    trainjob: Optional[TrainJobConfig] = None,
    *,
    template_vars: Optional[Mapping[str, str]] = None,
    validate: bool = True,
) -> dict[str, Any]:
    """The TrainJob for a ``pytorch`` (PyTorch, Elastic) or ``mpi`` (MPIJob, HorovodJob) task.

    ``tensorflow`` is a ``BuildError``: upstream has no TensorFlow runtime (kubeflow/trainer#2699). With
    ``validate``, the object is checked against ``config.crd_dir``'s TrainJob schema when it has one, and
    always against the offline CEL/webhook rules of ``check_trainjob``.
    """
    config = config or BackendConfig()
    tj = trainjob or TrainJobConfig()
    if template.type == "tensorflow":
        raise BuildError(
            "a tensorflow task cannot run as a TrainJob: Kubeflow Trainer v2 has no TensorFlow runtime "
            "(kubeflow/trainer#2699); keep tensorflow on the kubeflow.org/v1 TFJob target"
        )
    builders = {"pytorch": _pytorch, "mpi": _mpi}
    if template.type not in builders:
        raise BuildError(f"task type {template.type!r} cannot run as a TrainJob (only {sorted(builders)})")
    if template.task_type_version not in (0, 1):
        raise BuildError(
            f"[BadTaskSpecification] unsupported task template version [{template.task_type_version}] for task type "
            f"{template.type!r}: this backend reads versions 0 and 1"
        )
    for key, value in (template_vars or {}).items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"template_vars must map str to str, got {key!r}: {value!r}")
    name = object_name(execution_name_parts(metadata.task_execution_id), MAX_NAME_LENGTH)
    # The v1 kind of the same task type (roles, extension sections), its trainer container named as the runtimes do.
    kind = dataclasses.replace(KINDS[template.type], container=_CONTAINER)
    ctx = BuildContext(template, metadata, config, name, dict(template_vars) if template_vars else None, kind)
    spec = builders[template.type](ctx, tj, custom_dict(template), template.task_type_version)
    spec["trainer"] = _as_go_writes(spec["trainer"])
    k8s = config.k8s
    task_meta = template.metadata.metadata
    object_meta: dict[str, Any] = {
        "name": name,
        "labels": {**k8s.default_labels, **task_meta.labels, **metadata.labels},
        "annotations": {**k8s.default_annotations, **task_meta.annotations, **metadata.annotations},
    }
    if metadata.namespace:
        object_meta["namespace"] = metadata.namespace
    obj = {"apiVersion": API_VERSION, "kind": KIND, "metadata": object_meta, "spec": spec}
    apply_queue(obj, template.type, task_queue(template, kind), config.kueue)
    if validate:
        problems = check_trainjob(obj, tj)
        schemas = config.schemas()
        schema_key = (TRAINER_GROUP, "v1alpha1", KIND)
        if schemas is not None and schema_key in schemas:
            from ..schema.structural import schema_problems

            problems += [str(p) for p in schema_problems(schemas.validator(schema_key), obj)]
        if problems:
            raise BuildError(f"the built TrainJob {name!r} is invalid: " + "; ".join(problems))
    return obj
