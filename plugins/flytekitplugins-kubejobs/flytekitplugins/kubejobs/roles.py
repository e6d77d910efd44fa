"""The replica-role base class shared by every Training Operator role (worker, master, ps, chief,
evaluator, launcher).

The first five fields are the official plugins' (same names, order and defaults); the rest are
keyword-only extensions that travel under the ``kubejobs`` extension key of the custom.

>>> class Worker(ReplicaRole): pass
>>> Worker(replicas=2, restart_policy="on_failure").restart_policy
<RestartPolicy.FAILURE: 1>
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, ClassVar, Optional, Union

from flytekit import ImageSpec, Resources

from .compute import ComputeTemplate, Requirements, resolve_requirements
from .k8sobjects import env_to_k8s, to_k8s_dict, to_k8s_list
from .policies import RestartPolicy
from .resources import normalize_resources
from .wire.compute import check_template_name
from .wire.fields import check_int, check_optional_str, check_str_map
from .wire.k8ssyntax import (
    check_env_names,
    check_image,
    check_labels,
    check_tolerations,
    check_volume_mounts,
    check_volumes,
)

__all__ = ["ReplicaRole"]


@dataclass(frozen=True)
class ReplicaRole:
    """One replica group of a Training Operator job.

    ``requests`` / ``limits`` / ``compute_template`` combine by the rule in
    :func:`flytekitplugins.kubejobs.compute.resolve_requirements`. A ``compute_template`` given by name
    (``"a100x8"``) travels under the extension key and the connector applies the stored template with the
    same rule.
    """

    image: Optional[Union[str, ImageSpec]] = None
    requests: Optional[Resources] = None
    limits: Optional[Resources] = None
    replicas: Optional[int] = None
    restart_policy: Optional[RestartPolicy] = None
    _: KW_ONLY
    #: A ``ComputeTemplate`` object, or the name of a template stored in the cluster (resolved by the connector).
    compute_template: Optional[Union[ComputeTemplate, str]] = None
    node_selector: Optional[Mapping[str, str]] = None
    tolerations: Optional[Sequence[Any]] = None
    affinity: Optional[Any] = None
    env: Optional[Union[Mapping[str, str], Sequence[Any]]] = None
    volumes: Optional[Sequence[Any]] = None
    volume_mounts: Optional[Sequence[Any]] = None

    #: The role's key in the operator's ``replicaSpecs`` and in the extension ("Worker", "PS", ...).
    operator_role: ClassVar[str] = ""
    #: Replicas every instance must have (1 for master and launcher), or None.
    fixed_replicas: ClassVar[Optional[int]] = None

    def __post_init__(self) -> None:
        name = type(self).__name__
        set_ = object.__setattr__
        if not isinstance(self.image, ImageSpec) and check_optional_str(f"{name}.image", self.image) is not None:
            check_image(f"{name}.image", self.image)
        set_(self, "requests", normalize_resources(f"{name}.requests", self.requests))
        set_(self, "limits", normalize_resources(f"{name}.limits", self.limits))
        if self.replicas is not None:
            check_int(f"{name}.replicas", self.replicas)
            if self.fixed_replicas is not None and self.replicas != self.fixed_replicas:
                raise ValueError(f"{name}.replicas must be {self.fixed_replicas}, got {self.replicas!r}")
        if self.restart_policy is not None:
            set_(self, "restart_policy", RestartPolicy.coerce(f"{name}.restart_policy", self.restart_policy))
        template = self.compute_template
        if isinstance(template, str):
            check_template_name(f"{name}.compute_template", template)
        elif template is not None and not isinstance(template, ComputeTemplate):
            raise TypeError(f"{name}.compute_template must be a ComputeTemplate or a template name, got {template!r}")
        if self.node_selector is not None:
            labels = check_str_map(f"{name}.node_selector", self.node_selector)
            set_(self, "node_selector", check_labels(f"{name}.node_selector", labels))
        if self.tolerations is not None:
            set_(self, "tolerations", tuple(to_k8s_list(f"{name}.tolerations", self.tolerations)))
            check_tolerations(f"{name}.tolerations", self.tolerations)
        if self.affinity is not None:
            set_(self, "affinity", to_k8s_dict(f"{name}.affinity", self.affinity))
        if self.env is not None:
            env = env_to_k8s(f"{name}.env", self.env)
            check_env_names(f"{name}.env", env)
            set_(self, "env", tuple(env))
        if self.volumes is not None:
            set_(self, "volumes", tuple(to_k8s_list(f"{name}.volumes", self.volumes)))
            check_volumes(f"{name}.volumes", self.volumes)
        if self.volume_mounts is not None:
            set_(self, "volume_mounts", tuple(to_k8s_list(f"{name}.volume_mounts", self.volume_mounts)))
            check_volume_mounts(f"{name}.volume_mounts", self.volume_mounts)
        # Resolved once: fails now on a request above its limit rather than at pod admission, and
        # serialization (which reads it several times per role) does not redo it. Not a field, so it
        # stays out of eq/repr/replace; the role is frozen, so it cannot go stale.
        # A named template is resolved in the cluster: here only the role's own requests/limits are known.
        set_(self, "_requirements", resolve_requirements(name, self.template_object, self.requests, self.limits))

    @property
    def template_object(self) -> Optional[ComputeTemplate]:
        """``compute_template`` when it is an object (applied at serialization), else None."""
        return self.compute_template if isinstance(self.compute_template, ComputeTemplate) else None

    @property
    def template_name(self) -> Optional[str]:
        """``compute_template`` when it names a template stored in the cluster, else None."""
        return self.compute_template if isinstance(self.compute_template, str) else None

    def image_name(self) -> Optional[str]:
        """The role's image; an ``ImageSpec`` is built first (``ImageBuildEngine.build``, as flytekit does for a
        task's ``container_image`` at registration; a no-op while a task executes) and gives its image name."""
        if isinstance(self.image, ImageSpec):
            from flytekit.image_spec.image_spec import ImageBuildEngine

            ImageBuildEngine.build(self.image)
            return str(self.image.image_name())
        return self.image

    def requirements(self) -> Requirements:
        """The role's container resources after the compute-template precedence rule (fresh dicts)."""
        resolved: Requirements = self.__dict__["_requirements"]
        return Requirements(dict(resolved.requests), dict(resolved.limits))
