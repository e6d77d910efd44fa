"""Which code builds the spec of each kind: a builder registers itself for its task type with ``@builds``.

The kinds table (``wire.kinds``) says what a kind is; its builder is the genuinely new code a kind brings.
``spec_builder`` fails with a ``BuildError`` naming the task type when a kind has no builder, and a test
checks every kind of the table has one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

from ..wire.kinds import KINDS, JobKind
from .errors import BuildError
from .plugins_config import BackendConfig

__all__ = ["BuildContext", "BuiltSpec", "SpecBuilder", "builds", "registered_task_types", "spec_builder"]


@dataclass
class BuildContext:
    template: Any
    metadata: Any
    config: BackendConfig
    name: str
    template_vars: Optional[dict[str, str]]
    kind: JobKind


@dataclass
class BuiltSpec:
    """A kind's ``spec``, and the labels and annotations the job object itself gets."""

    spec: dict[str, Any]
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)


SpecBuilder = Callable[[BuildContext], BuiltSpec]
_BUILDERS: dict[str, SpecBuilder] = {}


def builds(task_type: str) -> Callable[[SpecBuilder], SpecBuilder]:
    """Register the decorated function as the spec builder of ``task_type`` (a key of ``KINDS``)."""
    if task_type not in KINDS:
        raise ValueError(f"{task_type!r} is not in the kinds table (wire.kinds.KINDS): add its entry first")

    def register(fn: SpecBuilder) -> SpecBuilder:
        _BUILDERS[task_type] = fn
        return fn

    return register


def spec_builder(kind: JobKind) -> SpecBuilder:
    try:
        return _BUILDERS[kind.task_type]
    except KeyError:
        raise BuildError(f"no spec builder is registered for task type {kind.task_type!r}") from None


def registered_task_types() -> frozenset[str]:
    return frozenset(_BUILDERS)
