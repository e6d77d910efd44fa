"""The Training Operator replica roles: Worker, Master, PS, Chief, Evaluator, Launcher.

Every role is a :class:`flytekitplugins.kubejobs.roles.ReplicaRole` (image, requests, limits, replicas,
restart_policy, then keyword-only extensions). One ``Worker`` serves PyTorch, TfJob and MPIJob; its
MPI-only ``command`` is keyword-only. ``Master`` and ``Launcher`` keep their official positional order
(``Master`` has no ``replicas`` there: a master is always one replica; ``Launcher`` takes ``command`` first).

>>> Worker(replicas=2, command="python train.py --epochs 3").command
('python', 'train.py', '--epochs', '3')
>>> Master(None, None, None, "always").restart_policy
<RestartPolicy.ALWAYS: 2>
>>> Launcher(["mpirun", "-np", "2"], "reg/launcher:1").image
'reg/launcher:1'
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional, TypedDict, Union, Unpack

from flytekit import ImageSpec, Resources
from flytekitplugins.kubejobs.compute import ComputeTemplate
from flytekitplugins.kubejobs.policies import RestartPolicy
from flytekitplugins.kubejobs.roles import ReplicaRole

__all__ = ["Worker", "Master", "PS", "Chief", "Evaluator", "Launcher", "RoleExtensions"]

Command = Union[str, Sequence[str]]


class RoleExtensions(TypedDict, total=False):
    """The keyword-only extension fields of every role (see :class:`ReplicaRole`), for the roles whose
    constructor keeps an official positional order of its own (``Master``, ``Launcher``)."""

    compute_template: Optional[Union[ComputeTemplate, str]]
    node_selector: Optional[Mapping[str, str]]
    tolerations: Optional[Sequence[Any]]
    affinity: Optional[Any]
    env: Optional[Union[Mapping[str, str], Sequence[Any]]]
    volumes: Optional[Sequence[Any]]
    volume_mounts: Optional[Sequence[Any]]


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
    """The MPIJob launcher: always one replica. ``command`` replaces the launcher's container args.

    Positional order as in flytekitplugins-kfmpi (command, image, requests, limits, replicas,
    restart_policy): the launcher exists only in MPI jobs, so its official order is kept in full.
    """

    command: Optional[Command] = field(default=None, kw_only=True)

    operator_role = "Launcher"
    fixed_replicas = 1

    def __init__(
        self,
        command: Optional[Command] = None,
        image: Optional[Union[str, ImageSpec]] = None,
        requests: Optional[Resources] = None,
        limits: Optional[Resources] = None,
        replicas: Optional[int] = None,
        restart_policy: Optional[RestartPolicy] = None,
        **extensions: Unpack[RoleExtensions],
    ) -> None:
        object.__setattr__(self, "command", command)  # read by __post_init__, which the base __init__ runs
        ReplicaRole.__init__(
            self,
            image,
            requests,
            limits,
            replicas,
            restart_policy,
            **extensions,
        )

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
        image: Optional[Union[str, ImageSpec]] = None,
        requests: Optional[Resources] = None,
        limits: Optional[Resources] = None,
        restart_policy: Optional[RestartPolicy] = None,
        *,
        replicas: Optional[int] = None,
        **extensions: Unpack[RoleExtensions],
    ) -> None:
        ReplicaRole.__init__(
            self,
            image,
            requests,
            limits,
            replicas,
            restart_policy,
            **extensions,
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
