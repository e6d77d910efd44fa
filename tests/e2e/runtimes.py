"""The ClusterTrainingRuntimes the e2e tests make, as a cluster admin would (test-only code).

Their Jobs have ``backoffLimit: 0``, so one failed pod fails the TrainJob at once (upstream's runtimes keep the
Job default of 6 pod retries, about ten minutes of backoff); the MPI one is a plain OpenMPI runtime (upstream
ships only DeepSpeed's and MLX's).
"""

from __future__ import annotations

from typing import Any

TORCH_RUNTIME = "kubejobs-e2e-torch"
MPI_RUNTIME = "kubejobs-e2e-mpi"
_ANCESTOR = {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}


def _job(name: str, image: str, trainer: bool, **spec: Any) -> dict[str, Any]:
    pod = {"containers": [{"name": "node", "image": image}]}
    return {
        "name": name,
        "template": {
            "metadata": {"labels": _ANCESTOR} if trainer else {},
            "spec": {"backoffLimit": 0, "template": {"spec": pod}, **spec},
        },
    }


def _runtime(name: str, ml_policy: dict[str, Any], jobs: list[dict[str, Any]], **jobset: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name},
        "spec": {"mlPolicy": ml_policy, "template": {"spec": {"replicatedJobs": jobs, **jobset}}},
    }


def install(k8s: Any) -> None:
    """Create the two test runtimes (shared by the session's workers: one that exists already is kept)."""
    from kubernetes import client

    api = client.CustomObjectsApi(k8s)
    runtimes = [
        _runtime(TORCH_RUNTIME, {"numNodes": 1, "torch": {}}, [_job("node", "registry.example/torch:1", True)]),
        _runtime(
            MPI_RUNTIME,
            {
                "numNodes": 1,
                "mpi": {
                    "numProcPerNode": 1,
                    "mpiImplementation": "OpenMPI",
                    "sshAuthMountPath": "/root/.ssh",
                    "runLauncherAsNode": False,
                },
            },
            [
                _job("launcher", "registry.example/mpi:1", True, completions=1, parallelism=1),
                _job("node", "registry.example/mpi:1", False),
            ],
            successPolicy={"operator": "All", "targetReplicatedJobs": ["launcher"]},
            network={"publishNotReadyAddresses": True},
        ),
    ]
    for runtime in runtimes:
        try:
            api.create_cluster_custom_object("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", runtime)
        except client.ApiException as e:
            if e.status != 409:
                raise
