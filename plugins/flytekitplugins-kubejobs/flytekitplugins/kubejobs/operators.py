"""The one table of the Kubernetes job kinds this project builds, and the Flyte task types behind them.

>>> OPERATORS["pytorch"].kind, OPERATORS["ray"].plural
('PyTorchJob', 'rayjobs')
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["JobKind", "OPERATORS"]


@dataclass(frozen=True)
class JobKind:
    task_type: str
    group: str
    version: str
    kind: str
    plural: str
    #: Longest object name the operator accepts (it derives service and pod names from it).
    max_name_length: int

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


OPERATORS: dict[str, JobKind] = {
    k.task_type: k
    for k in (
        JobKind("pytorch", "kubeflow.org", "v1", "PyTorchJob", "pytorchjobs", 63),
        JobKind("tensorflow", "kubeflow.org", "v1", "TFJob", "tfjobs", 63),
        JobKind("mpi", "kubeflow.org", "v1", "MPIJob", "mpijobs", 63),
        # KubeRay appends "-raycluster-xxxxx" and pod suffixes; its webhook caps RayJob names at 47.
        JobKind("ray", "ray.io", "v1", "RayJob", "rayjobs", 47),
    )
}
