"""The Ray task type: ``@task(task_config=RayJobConfig(...))`` builds a :class:`RayFunctionTask`.

It serializes as task type ``ray`` with a ``flyteidl.plugins.RayJob`` custom (any stock Flyte backend with
the Ray plugin runs it as a KubeRay RayJob), and starts or attaches to Ray before the function runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

from flytekit.configuration import SerializationSettings
from flytekit.core.context_manager import ExecutionParameters, FlyteContextManager
from flytekit.core.python_function_task import PythonFunctionTask
from flytekit.extend import TaskPlugins
from flytekitplugins.kubejobs.resources import check_task_resources

from .task_configs import AutoscalerOptionsConfig, HeadNodeConfig, RayJobConfig, WorkerNodeConfig

# The configs too, as flytekitplugins-ray's ``task`` module exports them (``from ....ray.task import ...``).
__all__ = [
    "RAY_TASK_TYPE",
    "RayFunctionTask",
    "RayJobConfig",
    "HeadNodeConfig",
    "WorkerNodeConfig",
    "AutoscalerOptionsConfig",
]

RAY_TASK_TYPE = "ray"


class RayFunctionTask(PythonFunctionTask[RayJobConfig]):  # type: ignore[misc]
    """A Python function run as the driver of a Ray job."""

    _RAY_TASK_TYPE = RAY_TASK_TYPE  # as in flytekitplugins-ray: a subclass may override the task type

    def __init__(self, task_config: RayJobConfig, task_function: Callable[..., Any], **kwargs: Any) -> None:
        if not isinstance(task_config, RayJobConfig):
            raise TypeError(f"task_config must be a RayJobConfig, got {task_config!r}")
        super().__init__(task_config=task_config, task_type=self._RAY_TASK_TYPE, task_function=task_function, **kwargs)
        check_task_resources(self.name, self.resources.requests, self.resources.limits)

    # .local and .serialize are imported when used: `import flytekitplugins.raycluster` stays small.
    def pre_execute(self, user_params: Optional[ExecutionParameters]) -> Optional[ExecutionParameters]:
        from flytekitplugins.kubejobs.codepath import code_root

        from .local import attach_to_job_cluster, ensure_local_ray

        cfg: RayJobConfig = self.task_config
        state = FlyteContextManager.current_context().execution_state
        if state is None or state.is_local_execution():
            root = code_root(self.task_function)
            ensure_local_ray(cfg.address, cfg.runtime_env, code_roots=() if root is None else (root,))
        else:
            attach_to_job_cluster(cfg.address, cfg.runtime_env)
        return user_params

    def get_custom(self, settings: SerializationSettings) -> Optional[dict[str, Any]]:
        from flytekitplugins.kubejobs.extension import warn_extension_once

        from .serialize import ray_job_custom, ray_job_extension

        extension = ray_job_extension(self.task_config)
        if extension is not None:  # stock backends ignore the key: say so once, pointing at the task
            warn_extension_once(self._RAY_TASK_TYPE, extension, defined_at=self.task_function)
        return ray_job_custom(self.task_config)


TaskPlugins.register_pythontask_plugin(RayJobConfig, RayFunctionTask)
