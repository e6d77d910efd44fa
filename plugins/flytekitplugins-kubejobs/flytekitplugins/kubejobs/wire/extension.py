"""The shape of the ``kubejobs`` extension key: settings the operators support but the flyteidl messages
cannot carry.

It sits next to the proto fields in a task's custom. Stock Flyte backends parse customs with unknown
fields allowed and ignore it; this project's backend honours every key in it or refuses the task, never
drops one. Its shape (version 1) is Kubernetes-wire-shaped so the backend copies values without
translating them::

    "kubejobs": {
      "version": 1,
      "replicaSpecs": {                      # keyed by the operator's role name
        "Worker": {
          "nodeSelector": {"pool": "spot"},
          "tolerations": [{...}], "affinity": {...},
          "env": [{"name": "A", "value": "1"}],
          "volumes": [{...}], "volumeMounts": [{...}],
          "gpuResourceName": "amd.com/gpu",  # the accelerator the IDL's GPU count means
          "resources": {"requests": {"example.com/fpga": "1"}, "limits": {...}},  # names the IDL lacks
          "computeTemplate": "a100x8"        # a compute template stored in the cluster, by name
        }
      },
      "rayGroups": {                         # Ray: per group, what its k8sPod cannot say
        "head": {"computeTemplate": "cpu-large"},
        "workers": {"gpu": {"computeTemplate": "a100x8",
                            # the group's own requests/limits (also in its k8sPod, merged with the pod
                            # template's): they win over the template; "gpu" is the template's accelerator
                            "explicitResources": {"requests": {"cpu": "4", "gpu": "1"}, "limits": {...}}},
                    "cpu": {"idleTimeoutSeconds": 120}}  # autoscaler v2: this group's idle timeout
      },
      "runPolicy": {"suspend": true, "backoffLimit": 0,
                    "schedulingPolicy": {"minAvailable": 3, "queue": "q", "priorityClass": "high"}},
      "queue": {"name": "team-a", "priorityClass": "high"},  # Kueue: LocalQueue, WorkloadPriorityClass
      "rayJob": {                            # RayJob spec fields flyteidl's RayJob lacks, KubeRay's names
        "submissionMode": "HTTPMode", "backoffLimit": 1, "activeDeadlineSeconds": 600,
        "preRunningDeadlineSeconds": 300, "suspend": true,
        "entrypointNumCpus": 1, "entrypointNumGpus": 0.5, "entrypointResources": "{\"custom\": 1}",
        "deletionStrategy": {"deletionRules": [{"policy": "DeleteCluster",
                                                "condition": {"jobStatus": "FAILED", "ttlSeconds": 60}}]},
        "submitterConfig": {"backoffLimit": 0},
        "submitterPodTemplate": {"spec": {"containers": [{"resources": {"limits": {"cpu": "500m"}}}]}},
        "clusterSelector": {"ray.io/cluster": "shared"},   # run on that RayCluster: no rayClusterSpec
        "rayClusterSpec": {"autoscalerOptions": {"version": "v2", "imagePullPolicy": "IfNotPresent"}}
      },
      "mpiJob": {                            # MPIJob v2beta1 (the mpi-operator) fields the v1 MPIJob lacks
        "launcherCreationPolicy": "WaitForWorkersReady", "sshAuthMountPath": "/home/mpiuser/.ssh",
        "mpiImplementation": "OpenMPI", "runLauncherAsWorker": false
      }
    }

Which sections a kind honours is ``JobKind.extension_sections`` (``wire.kinds``): the Training Operator
kinds take ``replicaSpecs``, ``runPolicy`` and ``queue``; a RayJob ``queue``, ``rayGroups`` and ``rayJob`` (its
groups carry pod settings in their ``k8s_pod``), so a Ray custom with ``replicaSpecs`` or ``runPolicy`` under the
key is refused; only the mpi-operator's MPIJob v2beta1 takes ``mpiJob`` (a v1 MPIJob refuses it). ``rayJob``
values are copied into the RayJob spec as written; ``submitterPodTemplate`` may hold only the submitter
container's ``resources`` and ``rayClusterSpec`` only the ``autoscalerOptions`` keys of ``RAY_AUTOSCALER_KEYS``
(what flyteidl's AutoscalerOptions lacks); the backend refuses anything else.

``computeTemplate`` names a template stored in the cluster (``wire.compute``): this project's connector
resolves it at create time with the precedence of ``ComputeTemplate`` objects (pod template < template <
explicit requests/limits; node selectors merge, template keys winning; tolerations appended). A stock backend
ignores the name, so the role runs without the template (serialization warns).

>>> sorted(ROLE_KEYS)[:3]
['affinity', 'computeTemplate', 'env']
"""

from __future__ import annotations

from typing import Any, TypedDict

__all__ = [
    "DEFAULT_GPU_RESOURCE_NAME",
    "EXTENSION_KEY",
    "EXTENSION_VERSION",
    "IDL_RESOURCE_NAMES",
    "MPI_JOB_KEYS",
    "QUEUE_KEYS",
    "RAY_AUTOSCALER_KEYS",
    "RAY_GROUP_KEYS",
    "RAY_JOB_KEYS",
    "ROLE_KEYS",
    "RUN_POLICY_KEYS",
    "SECTIONS",
    "Extension",
    "MpiJobExtension",
    "QueueExtension",
    "RayGroupExtension",
    "RayGroupsExtension",
    "RayJobExtension",
    "RoleExtension",
    "RunPolicyExtension",
]

#: The one key of a task custom that holds what the flyteidl messages cannot carry.
EXTENSION_KEY = "kubejobs"
#: The extension's ``version`` field: a backend refuses an extension of a version it does not know.
EXTENSION_VERSION = 1

#: The accelerator the IDL's GPU count means unless a compute template or the platform names another.
DEFAULT_GPU_RESOURCE_NAME = "nvidia.com/gpu"

# Resource names the IDL's Resources message carries besides its GPU count (CPU, MEMORY, EPHEMERAL_STORAGE);
# the GPU entry is whichever accelerator the role's compute template names.
IDL_RESOURCE_NAMES = frozenset({"cpu", "memory", "ephemeral-storage"})


class ResourceMaps(TypedDict, total=False):
    requests: dict[str, str]
    limits: dict[str, str]


class RoleExtension(TypedDict, total=False):
    nodeSelector: dict[str, str]
    tolerations: list[dict[str, Any]]
    affinity: dict[str, Any]
    env: list[dict[str, Any]]
    volumes: list[dict[str, Any]]
    volumeMounts: list[dict[str, Any]]
    gpuResourceName: str
    resources: ResourceMaps
    computeTemplate: str


class RunPolicyExtension(TypedDict, total=False):
    suspend: bool
    backoffLimit: int
    schedulingPolicy: dict[str, Any]


class QueueExtension(TypedDict, total=False):
    name: str
    priorityClass: str


class RayGroupExtension(TypedDict, total=False):
    computeTemplate: str
    explicitResources: ResourceMaps
    #: Worker groups only: KubeRay's ``workerGroupSpecs[].idleTimeoutSeconds`` (autoscaler v2).
    idleTimeoutSeconds: int


class RayGroupsExtension(TypedDict, total=False):
    head: RayGroupExtension
    workers: dict[str, RayGroupExtension]


class RayAutoscalerExtension(TypedDict, total=False):
    version: str
    imagePullPolicy: str


class RayClusterSpecExtension(TypedDict, total=False):
    autoscalerOptions: RayAutoscalerExtension


class RayJobExtension(TypedDict, total=False):
    submissionMode: str
    deletionStrategy: dict[str, Any]
    backoffLimit: int
    activeDeadlineSeconds: int
    preRunningDeadlineSeconds: int
    entrypointNumCpus: float
    entrypointNumGpus: float
    entrypointResources: str
    submitterPodTemplate: dict[str, Any]
    submitterConfig: dict[str, Any]
    suspend: bool
    clusterSelector: dict[str, str]
    rayClusterSpec: RayClusterSpecExtension


class MpiJobExtension(TypedDict, total=False):
    launcherCreationPolicy: str
    sshAuthMountPath: str
    mpiImplementation: str
    runLauncherAsWorker: bool


class Extension(TypedDict, total=False):
    version: int
    replicaSpecs: dict[str, RoleExtension]
    runPolicy: RunPolicyExtension
    queue: QueueExtension
    rayGroups: RayGroupsExtension
    rayJob: RayJobExtension
    mpiJob: MpiJobExtension


#: The keys each part may hold; the backend refuses any other.
ROLE_KEYS = frozenset(RoleExtension.__annotations__)
RUN_POLICY_KEYS = frozenset(RunPolicyExtension.__annotations__)
QUEUE_KEYS = frozenset(QueueExtension.__annotations__)
RAY_GROUP_KEYS = frozenset(RayGroupExtension.__annotations__)
RAY_JOB_KEYS = frozenset(RayJobExtension.__annotations__)
RAY_AUTOSCALER_KEYS = frozenset(RayAutoscalerExtension.__annotations__)
MPI_JOB_KEYS = frozenset(MpiJobExtension.__annotations__)
SECTIONS = frozenset(Extension.__annotations__) - {"version"}
