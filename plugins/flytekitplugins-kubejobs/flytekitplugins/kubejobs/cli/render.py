"""What ``kubejobs render`` builds: a task imported and serialized as ``pyflyte register`` would, for a
fixed example execution, and the re-encoding of a kubeflow custom as the ``task_type_version`` 0 message
an old client sends. flytekit and flyteidl are imported inside the functions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from .errors import fail

__all__ = [
    "EXAMPLE_EXECUTION",
    "EXAMPLE_TEMPLATE_VARS",
    "check_renderable",
    "example_metadata",
    "load_task",
    "serialize",
    "to_version_0",
]

#: The example execution ``render`` builds for (fixed, so the output is reproducible).
EXAMPLE_EXECUTION: dict[str, Any] = {
    "project": "flytesnacks",
    "domain": "development",
    "name": "a8f2c61d94b7e03f5c1d",
    "node_id": "n0",
    "retry_attempt": 0,
    "version": "v1",
}
_DATA = "s3://my-s3-bucket/metadata/propeller/flytesnacks-development-a8f2c61d94b7e03f5c1d/n0/data"
#: Values for Flyte's argument placeholders (``{{.input}}`` ...), as propeller would fill them.
EXAMPLE_TEMPLATE_VARS = {
    "input": f"{_DATA}/inputs.pb",
    "outputPrefix": f"{_DATA}/0",
    "rawOutputDataPrefix": "s3://my-s3-bucket/data/a8/a8f2c61d94b7e03f5c1d-n0-0",
    "checkpointOutputPrefix": "s3://my-s3-bucket/data/a8/a8f2c61d94b7e03f5c1d-n0-0/_flytecheckpoints",
    "prevCheckpointPrefix": '""',
}


def import_file(file: Path) -> Any:
    """Import ``file`` as ``pyflyte`` does (module path from the first ancestor without ``__init__.py``)."""
    import importlib

    from flytekit.tools.module_loader import add_sys_path
    from flytekit.tools.script_mode import _find_project_root

    root = Path(_find_project_root(str(file.resolve())))
    module_name = ".".join(file.resolve().relative_to(root).with_suffix("").parts)
    with add_sys_path(str(root)):
        return importlib.import_module(module_name)


def load_task(file: Path, task_name: str) -> Any:
    """The task ``task_name`` of ``file``, imported with :func:`import_file`."""
    from flytekit.core.base_task import PythonTask

    task = getattr(import_file(file), task_name, None)
    if task is None:
        fail(f"{file} has no task named {task_name!r}")
    if not isinstance(task, PythonTask):
        fail(f"{file}:{task_name} is a {type(task).__name__}, not a flytekit task")
    return task


def serialize(task: Any, image: Optional[str]) -> Any:
    """The task's ``TaskTemplate`` protobuf, as ``pyflyte register`` sends it."""
    from collections import OrderedDict

    from flytekit.configuration import ImageConfig, SerializationSettings
    from flytekit.tools.translator import get_serializable

    settings = SerializationSettings(
        image_config=ImageConfig.auto(img_name=image) if image else ImageConfig.auto_default_image(),
        project=EXAMPLE_EXECUTION["project"],
        domain=EXAMPLE_EXECUTION["domain"],
        version=EXAMPLE_EXECUTION["version"],
    )
    spec = get_serializable(OrderedDict(), settings, task)
    return spec.template.to_flyte_idl()


def check_renderable(task_name: str, template: Any, type_version: Optional[str]) -> None:
    """Fail with a sentence when ``render`` has no job object to build for ``template`` (or not in the
    ``--version`` asked for), instead of the backend's list of task types."""
    from ..kubeflow_v0 import VERSION_0_TASK_TYPES

    if template.type == "python-task":
        fail(
            f"{task_name} is a plain 'python-task': it runs as one pod, not as a job, so there is no job object "
            "to render (a single-node Elastic task is one; give nnodes > 1 for a PyTorchJob)"
        )
    if type_version is not None and template.type not in VERSION_0_TASK_TYPES:
        fail(
            f"--version applies to the kubeflow task types ({', '.join(VERSION_0_TASK_TYPES)}), which have a version 0 "
            f"and a version 1 encoding; {task_name} is a {template.type!r} task with one encoding: leave --version out"
        )


def to_version_0(template: Any) -> list[str]:
    """Re-encode a kubeflow ``task_type_version`` 1 custom in place as the version 0 message an old client
    sends (``kubeflow_v0``); returns the custom keys version 0 cannot carry.
    """
    from google.protobuf import json_format

    from ..kubeflow_v0 import version_0_custom

    try:
        custom, dropped = version_0_custom(template.type, json_format.MessageToDict(template.custom))
    except ValueError as e:
        fail(f"--version 0: {e}")
    template.custom.Clear()
    template.custom.update(custom)
    template.task_type_version = 0
    return dropped


def example_metadata(template: Any, namespace: str) -> Any:
    from flyteidl.admin.agent_pb2 import TaskExecutionMetadata
    from flyteidl.core import identifier_pb2

    meta = TaskExecutionMetadata(namespace=namespace)
    task_exec = meta.task_execution_id
    task_exec.task_id.CopyFrom(template.id)
    task_exec.task_id.resource_type = identifier_pb2.TASK
    node = task_exec.node_execution_id
    node.node_id = str(EXAMPLE_EXECUTION["node_id"])
    node.execution_id.project = str(EXAMPLE_EXECUTION["project"])
    node.execution_id.domain = str(EXAMPLE_EXECUTION["domain"])
    node.execution_id.name = str(EXAMPLE_EXECUTION["name"])
    task_exec.retry_attempt = int(EXAMPLE_EXECUTION["retry_attempt"])
    return meta
