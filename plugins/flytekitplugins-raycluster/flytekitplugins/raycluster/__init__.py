"""Flyte Ray tasks run as KubeRay RayJobs: a drop-in superset of flytekitplugins-ray.

>>> from flytekitplugins.raycluster import RayJobConfig, HeadNodeConfig, WorkerNodeConfig, ComputeTemplate
>>> GPU_A100 = ComputeTemplate(name="a100", cpu=8, memory="64Gi", gpu=1, node_selector={"gpu": "a100"})
>>> cfg = RayJobConfig(
...     head_node_config=HeadNodeConfig(ray_start_params={"log-color": "false"}),
...     worker_node_config=[WorkerNodeConfig("gpu", replicas=1, max_replicas=4, compute_template=GPU_A100)],
...     enable_autoscaling=True,
... )
>>> cfg.worker_node_config[0].k8s_pod["podSpec"]["containers"][0]["resources"]["limits"]
{'cpu': '8', 'memory': '64Gi', 'nvidia.com/gpu': '1'}

Importing this package does not import ray, kubernetes or jsonschema.
"""

from flytekitplugins.kubejobs.compute import ComputeTemplate

from .task import RayFunctionTask
from .task_configs import (
    AutoscalerOptionsConfig,
    DeletionRule,
    DeletionStrategy,
    HeadNodeConfig,
    RayJobConfig,
    SubmissionMode,
    UpscalingMode,
    WorkerNodeConfig,
)

__all__ = [
    "AutoscalerOptionsConfig",
    "ComputeTemplate",
    "DeletionRule",
    "DeletionStrategy",
    "HeadNodeConfig",
    "RayFunctionTask",
    "RayJobConfig",
    "SubmissionMode",
    "UpscalingMode",
    "WorkerNodeConfig",
]
