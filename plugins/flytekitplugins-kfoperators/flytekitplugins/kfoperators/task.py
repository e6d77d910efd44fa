"""flytekit task classes for the job configs, registered with ``TaskPlugins`` so ``@task(task_config=...)``
picks them. Task types ``pytorch``, ``tensorflow``, ``mpi`` (and ``python-task`` for a single-node
Elastic), ``task_type_version`` 1. The serialization code is imported on first use, keeping ``import`` cheap.

Local runs (``pyflyte run`` without ``--remote``, or calling the task) start the job's topology as local
processes when the machine can hold it, else (or with ``KUBEJOBS_LOCAL_WORLD=one``) call the function once,
in-process, with the operator's environment for a world of one: see :mod:`.runtime.world`. The runtime is
imported on the first run, not with this module.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, ClassVar, Optional, TypeVar, Union

from flytekit import PythonFunctionTask
from flytekit.configuration import SerializationSettings
from flytekit.extend import TaskPlugins
from flytekitplugins.kubejobs.extension import warn_extension_once
from flytekitplugins.kubejobs.k8sobjects import check_task_pod_template
from flytekitplugins.kubejobs.policies import CleanPodPolicy, RestartPolicy, RunPolicy
from flytekitplugins.kubejobs.resources import check_task_resources
from flytekitplugins.kubejobs.wire.extension import EXTENSION_KEY

from .roles import PS, Chief, Evaluator, Launcher, Master, Worker
from .task_configs import Elastic, HorovodJob, MPIJob, PyTorch, TfJob

__all__ = [
    "PyTorchFunctionTask",
    "ElasticFunctionTask",
    "PytorchElasticFunctionTask",
    "TensorflowFunctionTask",
    "MPIFunctionTask",
    "HorovodFunctionTask",
    # The configs, as the official plugins' ``task`` modules export them (``from ....task import PyTorch``).
    "PyTorch",
    "Elastic",
    "TfJob",
    "MPIJob",
    "HorovodJob",
    "Master",
    "Worker",
    "PS",
    "Chief",
    "Evaluator",
    "Launcher",
    "RunPolicy",
    "RestartPolicy",
    "CleanPodPolicy",
]

C = TypeVar("C", PyTorch, Elastic, TfJob, MPIJob, HorovodJob)


def _is_local_execution() -> bool:
    from .runtime.world import is_local_execution

    return is_local_execution()


def _add_shm_volume(task: PythonFunctionTask, config: Union[PyTorch, Elastic], roles: dict[str, Any]) -> None:
    """The official plugin's default /dev/shm volume (see :mod:`.shm`), on a copy of the pod template."""
    from .shm import check_role_mounts, wants_shm_volume, with_shm_volume

    if wants_shm_volume(config.increase_shared_mem, task.shared_memory):
        owner = type(config).__name__
        check_role_mounts(owner, roles)
        task.pod_template = with_shm_volume(owner, task.pod_template)


class _KubeflowTask(PythonFunctionTask[C]):  # type: ignore[misc]
    task_kind: ClassVar[str]
    config_type: ClassVar[type]

    def __init__(self, task_config: C, task_function: Callable[..., Any], **kwargs: Any) -> None:
        if not isinstance(task_config, self.config_type):
            raise TypeError(f"task_config must be a {self.config_type.__name__}, got {task_config!r}")
        kwargs.setdefault("task_type", self.task_kind)
        # task_type_version 1 selects the flyteidl.plugins.kubeflow messages in every backend.
        super().__init__(task_config, task_function, task_type_version=1, **kwargs)
        check_task_resources(self.name, self.resources.requests, self.resources.limits)
        check_task_pod_template(self.name, self.pod_template)

    def _custom(self) -> Optional[dict[str, Any]]:
        raise NotImplementedError

    def get_custom(self, settings: SerializationSettings) -> Optional[dict[str, Any]]:
        # Callers may ask more than once (flytekit's registration, pyflyte, tools); the config is frozen,
        # so the custom is built once per config and every later call gets a fresh copy of it.
        cached: Optional[tuple[object, Optional[str]]] = self.__dict__.get("_custom_cache")
        custom: Optional[dict[str, Any]]
        if cached is not None and cached[0] is self.task_config:
            custom = None if cached[1] is None else json.loads(cached[1])
        else:
            custom = self._custom()
            self._custom_cache = (self.task_config, None if custom is None else json.dumps(custom))
        if custom is not None and EXTENSION_KEY in custom:
            warn_extension_once(self.task_kind, custom[EXTENSION_KEY], self._task_function)
        return custom

    def execute(self, **kwargs: Any) -> Any:
        if not _is_local_execution():
            return super().execute(**kwargs)
        from .runtime.world import run_locally

        in_process = super().execute
        return run_locally(self.task_kind, self.task_config, self._task_function, kwargs, lambda: in_process(**kwargs))


class PyTorchFunctionTask(_KubeflowTask[PyTorch]):
    """A PyTorchJob task."""

    task_kind = "pytorch"
    config_type = PyTorch

    def __init__(self, task_config: PyTorch, task_function: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(task_config, task_function, **kwargs)
        _add_shm_volume(self, task_config, {"Master": task_config.master, "Worker": task_config.worker})

    def _custom(self) -> dict[str, Any]:
        from .serialize import pytorch_custom

        return pytorch_custom(self.task_config)


class ElasticFunctionTask(_KubeflowTask[Elastic]):
    """torch elastic training: a ``python-task`` pod for one node, a PyTorchJob for more."""

    task_kind = "pytorch"
    config_type = Elastic

    def __init__(self, task_config: Elastic, task_function: Callable[..., Any], **kwargs: Any) -> None:
        import importlib.util

        if isinstance(task_config, Elastic) and task_config.single_node:
            kwargs["task_type"] = "python-task"
        if importlib.util.find_spec("torch") is None:
            from .runtime.elastic import TORCH_MISSING

            raise ImportError(TORCH_MISSING)
        super().__init__(task_config, task_function, **kwargs)
        _add_shm_volume(self, task_config, {})

    def _custom(self) -> Optional[dict[str, Any]]:
        from .serialize import elastic_custom

        return elastic_custom(self.task_config)

    def execute(self, **kwargs: Any) -> Any:
        if _is_local_execution():
            return super().execute(**kwargs)  # the local rule, as for every kind
        import os

        from .runtime.elastic import run_elastic

        return run_elastic(self.task_config, self._task_function, kwargs, node_env=os.environ, local=False)


#: flytekitplugins-kfpytorch's name for the Elastic task class.
PytorchElasticFunctionTask = ElasticFunctionTask


class TensorflowFunctionTask(_KubeflowTask[TfJob]):
    """A TFJob task."""

    task_kind = "tensorflow"
    config_type = TfJob

    def _custom(self) -> dict[str, Any]:
        from .serialize import tensorflow_custom

        return tensorflow_custom(self.task_config)


class MPIFunctionTask(_KubeflowTask[MPIJob]):
    """An MPIJob task: the container runs ``mpirun -np workers*slots python <entrypoint> pyflyte-execute ...``."""

    task_kind = "mpi"
    config_type = MPIJob

    def _custom(self) -> dict[str, Any]:
        from .serialize import mpi_custom

        return mpi_custom(self.task_config)

    def get_command(self, settings: SerializationSettings) -> list[str]:
        from .serialize import mpirun_prefix

        base: list[str] = super().get_command(settings)
        return mpirun_prefix(self.task_config, settings.entrypoint_settings.path) + base


class HorovodFunctionTask(_KubeflowTask[HorovodJob]):
    """An MPIJob task whose container runs ``horovodrun ... pyflyte-execute ...``."""

    task_kind = "mpi"
    config_type = HorovodJob

    def _custom(self) -> dict[str, Any]:
        from .serialize import mpi_custom

        return mpi_custom(self.task_config)

    def get_command(self, settings: SerializationSettings) -> list[str]:
        from .serialize import horovodrun_prefix

        base: list[str] = super().get_command(settings)
        return horovodrun_prefix(self.task_config) + base


TaskPlugins.register_pythontask_plugin(PyTorch, PyTorchFunctionTask)
TaskPlugins.register_pythontask_plugin(Elastic, ElasticFunctionTask)
TaskPlugins.register_pythontask_plugin(TfJob, TensorflowFunctionTask)
TaskPlugins.register_pythontask_plugin(MPIJob, MPIFunctionTask)
TaskPlugins.register_pythontask_plugin(HorovodJob, HorovodFunctionTask)
