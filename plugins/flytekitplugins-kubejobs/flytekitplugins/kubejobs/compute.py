"""Compute templates: named, reusable resource profiles (after KubeRay's apiserver ``ComputeTemplate``).

Define one once and use it on any Ray head/worker group or Training Operator role::

    GPU_A100 = ComputeTemplate(name="a100", cpu=8, memory="64Gi", gpu=1,
                               node_selector={"gpu": "a100"},
                               tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}])

Precedence (one rule everywhere, see ``resolve_requirements``): a pod template's container resources
are the base, the compute template is laid over them (requests = limits = the template's amounts),
and explicit ``requests`` / ``limits`` win over both, resource by resource. Node selectors merge
(template keys win over the pod template's); tolerations are appended. Nothing is dropped.

A request above its limit after merging is a ``ValueError`` naming the resource: nothing is clamped.

>>> t = ComputeTemplate(name="small", cpu=2, memory="4Gi")
>>> resolve_requirements("Worker", t, Resources(cpu="1"), None).requests
{'cpu': '1', 'memory': '4Gi'}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Optional, Union

from flytekit import Resources

from .k8sobjects import to_k8s_list
from .resources import merge_quantities, resources_to_k8s
from .wire.compute import TemplateSpec, check_template_name, normalize_template
from .wire.extension import DEFAULT_GPU_RESOURCE_NAME
from .wire.fields import check_str
from .wire.quantity import parse_quantity

__all__ = ["ComputeTemplate", "Requirements", "resolve_requirements"]

Quantity = Union[str, int, float]


@dataclass(frozen=True)
class ComputeTemplate:
    """A named resource profile: cpu, memory, gpus of a given accelerator, extended resources,
    tolerations and a node selector."""

    name: str
    cpu: Optional[Quantity] = None
    memory: Optional[Quantity] = None
    gpu: int = 0
    gpu_resource_name: str = DEFAULT_GPU_RESOURCE_NAME
    extended_resources: Mapping[str, Quantity] = field(default_factory=dict)
    tolerations: Sequence[Any] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_str("ComputeTemplate.name", self.name)
        where = f"ComputeTemplate({self.name!r})"
        tolerations = to_k8s_list(f"{where}.tolerations", self.tolerations)  # client models become dicts first
        # THE template checks (wire.compute), shared with the templates stored in the cluster by name.
        normalized = normalize_template(
            where,
            cpu=self.cpu,
            memory=self.memory,
            gpu=self.gpu,
            gpu_resource_name=self.gpu_resource_name,
            extended_resources=self.extended_resources,
            tolerations=tolerations,
            node_selector=self.node_selector,
        )
        for name, value in normalized.items():
            object.__setattr__(self, name, value)

    def to_spec(self) -> TemplateSpec:
        """The same template in the stored form (``to_configmap`` gives the ConfigMap ``kubejobs templates`` writes);
        the name must then be a DNS-1123 label."""
        check_template_name("ComputeTemplate.name", self.name)
        return self._spec()

    def _spec(self) -> TemplateSpec:
        # __post_init__ normalized every value (quantities and extended resources are str)
        return TemplateSpec(
            name=self.name,
            cpu=None if self.cpu is None else str(self.cpu),
            memory=None if self.memory is None else str(self.memory),
            gpu=self.gpu,
            gpu_resource_name=self.gpu_resource_name,
            extended_resources=dict(self.extended_resources),  # type: ignore[arg-type]  # normalized to str
            tolerations=tuple(dict(t) for t in self.tolerations),
            node_selector=dict(self.node_selector),
        )

    def amounts(self) -> dict[str, str]:
        """``{kubernetes resource name: quantity}`` this template asks for (as both request and limit)."""
        return self._spec().amounts()


class Requirements(NamedTuple):
    """Kubernetes container resources, ``{name: quantity}`` each."""

    requests: dict[str, str]
    limits: dict[str, str]


def resolve_requirements(
    field: str,
    template: Optional[ComputeTemplate],
    requests: Optional[Resources],
    limits: Optional[Resources],
    base: Optional[Requirements] = None,
) -> Requirements:
    """Apply the precedence rule: ``base`` (a pod template's container) < ``template`` < explicit
    requests/limits, resource by resource. Explicit GPUs use the template's accelerator name.
    ``field`` names the owner (``"Worker"``) in errors.
    """
    gpu_name = template.gpu_resource_name if template else DEFAULT_GPU_RESOURCE_NAME
    from_template = template.amounts() if template else {}
    explicit_requests = resources_to_k8s(requests, gpu_name)
    explicit_limits = resources_to_k8s(limits, gpu_name)
    base = base or Requirements({}, {})
    merged = Requirements(
        requests=merge_quantities(base.requests, from_template, explicit_requests),
        limits=merge_quantities(base.limits, from_template, explicit_limits),
    )
    for name, request in merged.requests.items():
        limit = merged.limits.get(name)
        if limit is not None and parse_quantity(request) > parse_quantity(limit):
            raise ValueError(f"{field}: the {name} request {request!r} is above its limit {limit!r}")
    return merged
