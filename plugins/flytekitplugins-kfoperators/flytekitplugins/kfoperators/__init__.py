"""Flyte tasks for the Kubeflow Training Operator: PyTorchJob (``PyTorch``, ``Elastic``), TFJob (``TfJob``)
and MPIJob (``MPIJob``, ``HorovodJob``).

A drop-in superset of flytekitplugins-kfpytorch, -kftensorflow and -kfmpi: change the import, keep the
config. One ``RunPolicy``/``RestartPolicy``/``CleanPodPolicy``/``Worker`` serves all three job kinds.

>>> from flytekit import Resources
>>> cfg = PyTorch(worker=Worker(replicas=4, requests=Resources(gpu="1")),
...               run_policy=RunPolicy(clean_pod_policy=CleanPodPolicy.ALL, backoff_limit=3))
>>> cfg.worker.replicas, cfg.run_policy.clean_pod_policy.k8s_name
(4, 'All')
"""

from flytekitplugins.kubejobs.compute import ComputeTemplate
from flytekitplugins.kubejobs.policies import CleanPodPolicy, KueueQueue, RestartPolicy, RunPolicy, SchedulingPolicy

from .roles import PS, Chief, Evaluator, Launcher, Master, Worker
from .task import (
    ElasticFunctionTask,
    HorovodFunctionTask,
    MPIFunctionTask,
    PyTorchFunctionTask,
    TensorflowFunctionTask,
)
from .task_configs import Elastic, HorovodJob, MPIJob, MPIOperatorOptions, PyTorch, TfJob

__all__ = [
    "PyTorch",
    "Elastic",
    "Master",
    "Worker",
    "TfJob",
    "PS",
    "Chief",
    "Evaluator",
    "MPIJob",
    "HorovodJob",
    "MPIOperatorOptions",
    "Launcher",
    "RunPolicy",
    "CleanPodPolicy",
    "RestartPolicy",
    "SchedulingPolicy",
    "KueueQueue",
    "ComputeTemplate",
    "PyTorchFunctionTask",
    "ElasticFunctionTask",
    "TensorflowFunctionTask",
    "MPIFunctionTask",
    "HorovodFunctionTask",
]
