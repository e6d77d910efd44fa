"""A PyTorch task with a pod template (a ``k8s_pod`` target), written with flytekit's official plugin.

Loaded by test_placeholders.py, and by ``pyflyte-execute`` in a subprocess (module ``pod_tasks``).
"""

from flytekit import PodTemplate, task
from flytekitplugins.kfpytorch import PyTorch
from kubernetes.client import V1Container, V1PodSpec

__all__ = ["scale"]


@task(
    task_config=PyTorch(num_workers=2, increase_shared_mem=False),
    pod_template=PodTemplate(
        primary_container_name="primary",
        pod_spec=V1PodSpec(containers=[V1Container(name="primary", env=[])]),
    ),
)
def scale(x: int, factor: float) -> float:
    return x * factor
