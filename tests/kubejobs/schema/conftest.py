"""Minimal valid objects of each kind, written by hand from the CRD documentation (crd-validation.md,
ray-sdk-and-kuberay.md §5.2), and the schema set read from the shared CRD directory."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest


def _container(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "ghcr.io/example/train:1.0", **extra}


def _template(*containers: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"containers": list(containers)}}


RESOURCES = {
    "requests": {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": "1"},
    "limits": {"cpu": 2, "memory": "2Gi", "nvidia.com/gpu": 1},
}

OBJECTS: dict[str, dict[str, Any]] = {
    # 1 Master + 2 Workers, container `pytorch`, GPU requests = limits (crd-validation.md's passing example).
    "pytorch": {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {
            "name": "train",
            "namespace": "flytesnacks-development",
            "labels": {"app.kubernetes.io/name": "x"},
        },
        "spec": {
            "runPolicy": {"cleanPodPolicy": "None", "backoffLimit": 0},
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "restartPolicy": "OnFailure",
                    "template": _template(
                        _container(
                            "pytorch",
                            resources=RESOURCES,
                            ports=[{"name": "pytorchjob-port", "containerPort": 23456}],
                            env=[{"name": "A", "value": "1"}],
                        )
                    ),
                },
                "Worker": {
                    "replicas": 2,
                    "restartPolicy": "OnFailure",
                    "template": _template(_container("pytorch", resources=RESOURCES)),
                },
            },
        },
    },
    "elastic": {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "elastic"},
        "spec": {
            "elasticPolicy": {"rdzvBackend": "c10d", "minReplicas": 1, "maxReplicas": 3, "maxRestarts": 3},
            "nprocPerNode": "auto",
            "pytorchReplicaSpecs": {"Worker": {"replicas": 2, "template": _template(_container("pytorch"))}},
        },
    },
    "tensorflow": {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "tf-train"},
        "spec": {
            "tfReplicaSpecs": {
                "Chief": {"replicas": 1, "template": _template(_container("tensorflow"))},
                "PS": {"replicas": 1, "template": _template(_container("tensorflow"))},
                "Worker": {"replicas": 2, "restartPolicy": "ExitCode", "template": _template(_container("tensorflow"))},
                "Evaluator": {"replicas": 1, "template": _template(_container("tensorflow"))},
            },
        },
    },
    "mpi": {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MPIJob",
        "metadata": {"name": "mpi-train"},
        "spec": {
            "slotsPerWorker": 1,
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "template": _template(_container("mpi", command=["mpirun", "python", "t.py"])),
                },
                "Worker": {"replicas": 2, "template": _template(_container("mpi"))},
            },
        },
    },
    # Flyte-shaped RayJob: head + one worker group, Ray containers first, min/max written out.
    "ray": {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "ray-job"},
        "spec": {
            "entrypoint": "python main.py",
            "runtimeEnvYAML": "pip:\n- numpy\n",
            "shutdownAfterJobFinishes": True,
            "ttlSecondsAfterFinished": 3600,
            "rayClusterSpec": {
                "rayVersion": "2.60.0",
                "enableInTreeAutoscaling": False,
                "headGroupSpec": {
                    "rayStartParams": {"dashboard-host": "0.0.0.0"},
                    "template": _template(
                        _container("ray-head", ports=[{"containerPort": 6379}, {"containerPort": 8265}]),
                        _container("fluentbit"),
                    ),
                },
                "workerGroupSpecs": [
                    {
                        "groupName": "workers",
                        "replicas": 2,
                        "minReplicas": 1,
                        "maxReplicas": 4,
                        "rayStartParams": {},
                        "template": _template(_container("ray-worker", resources=RESOURCES)),
                    }
                ],
            },
        },
    },
    "raycluster": {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "cluster"},
        "spec": {"headGroupSpec": {"rayStartParams": {}, "template": _template(_container("ray-head"))}},
    },
}


@pytest.fixture(scope="session")
def valid_json() -> dict[str, str]:
    """The valid objects as JSON text (for hypothesis tests, which cannot use function-scoped fixtures)."""
    return {key: json.dumps(obj) for key, obj in OBJECTS.items()}


@pytest.fixture
def make() -> Callable[[str], dict[str, Any]]:
    """A fresh deep copy of a valid object of the given kind key."""

    def build(key: str) -> dict[str, Any]:
        return copy.deepcopy(OBJECTS[key])

    return build
