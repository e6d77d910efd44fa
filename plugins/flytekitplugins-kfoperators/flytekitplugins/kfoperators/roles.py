"""The Training Operator replica roles: Worker, Master, PS, Chief, Evaluator, Launcher.

Every role is a :class:`flytekitplugins.kubejobs.roles.ReplicaRole` (image, requests, limits, replicas,
restart_policy, then keyword-only extensions). One ``Worker`` serves PyTorch, TfJob and MPIJob; its
MPI-only ``command`` is keyword-only. ``Master`` keeps the official positional order (it has no
``replicas`` there: a master is always one replica).

>>> Worker(replicas=2, command="python train.py --epochs 3").command
('python', 'train.py', '--epochs', '3')
>>> Master(None, None, None, "always").restart_policy
<RestartPolicy.ALWAYS: 2>
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, Union

from flytekit import Resources
from flytekitplugins.kubejobs.compute import ComputeTemplate
from flytekitplugins.kubejobs.policies import RestartPolicy
from flytekitplugins.kubejobs.roles import ReplicaRole

__all__ = ["Worker", "Master", "PS", "Chief", "Evaluator", "Launcher", "check_command"]

Command = Union[str, Sequence[str]]


def check_command(field_name: str, value: object) -> Optional[tuple[str, ...]]:
    """A container args list: a str is split like a shell would (never into characters)."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            parts = shlex.split(value)
        except ValueError as e:
            raise ValueError(f"{field_name} is not a valid shell command line: {value!r} ({e})") from e
    elif isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        parts = list(value)
        for i, part in enumerate(parts):
            if not isinstance(part, str):
                raise TypeError(f"{field_name}[{i}] must be a str, got {part!r} ({type(part).__name__})")
    else:
        raise TypeError(f"{field_name} must be a list of str or a command line str, got {value!r}")
    if not parts:
        raise ValueError(f"{field_name} must not be empty, got {value!r}")
    return tuple(parts)


@dataclass(frozen=True)
class Worker(ReplicaRole):
    """Worker replicas (PyTorchJob, TFJob, MPIJob). ``command`` (MPI only) replaces the worker's container args."""

    command: Optional[Command] = field(default=None, kw_only=True)

    operator_role = "Worker"

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "command", check_command("Worker.command", self.command))


@dataclass(frozen=True)
class Launcher(ReplicaRole):
    """The MPIJob launcher: always one replica. ``command`` replaces the launcher's container args."""

    command: Optional[Command] = field(default=None, kw_only=True)

    operator_role = "Launcher"
    fixed_replicas = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "command", check_command("Launcher.command", self.command))


class Master(ReplicaRole):
    """The PyTorchJob master: always one replica. Positional order as in flytekitplugins-kfpytorch
    (image, requests, limits, restart_policy); ``replicas`` is keyword-only and can only be 1."""

    operator_role = "Master"
    fixed_replicas = 1

    def __init__(
        self,
        image: Optional[str] = None,
        requests: Optional[Resources] = None,
        limits: Optional[Resources] = None,
        restart_policy: Optional[RestartPolicy] = None,
        *,
        replicas: Optional[int] = None,
        compute_template: Optional[ComputeTemplate] = None,
        node_selector: Optional[Mapping[str, str]] = None,
        tolerations: Optional[Sequence[Any]] = None,
        affinity: Optional[Any] = None,
        env: Optional[Union[Mapping[str, str], Sequence[Any]]] = None,
        volumes: Optional[Sequence[Any]] = None,
        volume_mounts: Optional[Sequence[Any]] = None,
    ) -> None:
        ReplicaRole.__init__(
            self,
            image,
            requests,
            limits,
            replicas,
            restart_policy,
            compute_template=compute_template,
            node_selector=node_selector,
            tolerations=tolerations,
            affinity=affinity,
            env=env,
            volumes=volumes,
            volume_mounts=volume_mounts,
        )


@dataclass(frozen=True)
class PS(ReplicaRole):
    """TFJob parameter servers (0 when not given)."""

    operator_role = "PS"


@dataclass(frozen=True)
class Chief(ReplicaRole):
    """The TFJob chief: 0 or 1 replica (the operator allows at most one)."""

    operator_role = "Chief"


@dataclass(frozen=True)
class Evaluator(ReplicaRole):
    """TFJob evaluators. ``replicas`` defaults to 0, as in flytekitplugins-kftensorflow."""

    replicas: Optional[int] = 0

    operator_role = "Evaluator"
