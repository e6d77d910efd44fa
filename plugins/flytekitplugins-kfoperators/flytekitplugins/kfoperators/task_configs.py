"""Job configs: PyTorch, Elastic, TfJob, MPIJob, HorovodJob (``@task(task_config=...)``).

Same constructor names, fields and defaults as flytekitplugins-kfpytorch / -kftensorflow / -kfmpi 1.16
(except ``increase_shared_mem``, see the README's Decisions), validated at construction.

>>> cfg = TfJob(worker=Worker(replicas=2), num_ps_replicas=None)
>>> cfg.chief.replicas, cfg.worker.replicas
(None, 2)
>>> Elastic(nnodes="2:4", nproc_per_node=8).nodes
(2, 4)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Optional, TypeVar, Union

from flytekitplugins.kubejobs.policies import RunPolicy
from flytekitplugins.kubejobs.roles import ReplicaRole
from flytekitplugins.kubejobs.schema.rules_kubeflow import LAUNCHER_CREATION_POLICIES, MPI_IMPLEMENTATIONS
from flytekitplugins.kubejobs.userwarnings import KubejobsDeprecationWarning, warn_user
from flytekitplugins.kubejobs.wire.extension import MpiJobExtension
from flytekitplugins.kubejobs.wire.fields import (
    INT32_MAX,
    check_int,
    check_optional_bool,
    check_optional_int,
    check_optional_str,
)

from .roles import PS, Chief, Evaluator, Launcher, Master, Worker

__all__ = ["PyTorch", "Elastic", "TfJob", "MPIJob", "HorovodJob"]

R = TypeVar("R", bound=ReplicaRole)

_START_METHODS = ("spawn", "fork")
_HOROVOD_LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _check_role(owner: str, name: str, value: object, role_type: type[R], *, mpi: bool = False) -> R:
    if not isinstance(value, role_type):
        raise TypeError(
            f"{owner}.{name} must be a flytekitplugins.kfoperators.{role_type.__name__}, got {value!r} "
            f"({type(value).__module__}.{type(value).__name__})"
        )
    if not mpi and getattr(value, "command", None) is not None:
        raise ValueError(f"{owner}.{name}.command is only used by MPIJob/HorovodJob, got {value.command!r}")  # type: ignore[attr-defined]
    return value


def _check_run_policy(owner: str, value: object) -> None:
    if value is not None and not isinstance(value, RunPolicy):
        raise TypeError(f"{owner}.run_policy must be a flytekitplugins.kfoperators.RunPolicy, got {value!r}")


def _merge_count(owner: str, old_name: str, old: object, role_field: str, role: R) -> R:
    """Apply a deprecated replica count: it warns, fills an unset/zero per-role count, and loses to a
    non-zero per-role count (with a warning) instead of being refused."""
    if old is None:
        return role
    count = check_int(f"{owner}.{old_name}", old)
    warn_user(
        f"{owner}.{old_name} is deprecated: use {owner}({role_field}={type(role).__name__}(replicas={count}))",
        KubejobsDeprecationWarning,
    )
    if role.replicas:
        if count and count != role.replicas:
            warn_user(
                f"{owner}: both {old_name}={count} and {role_field}.replicas={role.replicas} are set; "
                f"{role_field}.replicas={role.replicas} is used",
                UserWarning,
            )
        return role
    return dataclasses.replace(role, replicas=count)


def _check_shared_mem(owner: str, value: object) -> None:
    if check_optional_bool(f"{owner}.increase_shared_mem", value):
        warn_user(
            f"{owner}.increase_shared_mem is deprecated: {owner} tasks mount /dev/shm by default "
            f"({owner}(..., increase_shared_mem=False) opts out); use @task(shared_memory=True) or a size",
            KubejobsDeprecationWarning,
        )


def parse_nnodes(value: object) -> tuple[int, int]:
    """``(min_nodes, max_nodes)`` of an Elastic ``nnodes``: an int, ``"N"`` or ``"min:max"``."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"Elastic.nnodes must be an int or a 'min:max' str, got {value!r} ({type(value).__name__})")
    if isinstance(value, int):
        check_int("Elastic.nnodes", value, minimum=1)
        return value, value
    parts = value.strip().split(":")
    if len(parts) > 2 or not all(p.strip().isdigit() for p in parts):
        raise ValueError(f"Elastic.nnodes must be an int or 'min:max' with 1 <= min <= max, got {value!r}")
    low, high = int(parts[0]), int(parts[-1])
    if not 1 <= low <= high <= INT32_MAX:
        raise ValueError(f"Elastic.nnodes must be an int or 'min:max' with 1 <= min <= max, got {value!r}")
    return low, high


LOCAL_WORLD_ENV = "KUBEJOBS_LOCAL_WORLD"
FULL = "full"
#: The ``local_world`` switch (see :mod:`.world`); checked here so configs need no runtime import.
LocalWorldSetting = Union[int, str]


def check_local_world(field: str, value: object) -> Optional[LocalWorldSetting]:
    """Validate a ``local_world`` setting: ``None``, ``"full"``, ``"one"`` (the world of one, as the
    ``KUBEJOBS_LOCAL_WORLD=one`` opt-out) or an int >= 1 (digits in a str are accepted)."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip().lower()
        if text == FULL:
            return FULL
        if text == "one":
            return 1
        if text.isdigit():
            value = int(text)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    if isinstance(value, (int, str)) and not isinstance(value, bool):
        raise ValueError(f"{field} must be 'full', 'one' or an int >= 1, got {value!r}")
    raise TypeError(f"{field} must be 'full', 'one' or an int >= 1, got {value!r} ({type(value).__name__})")


@dataclass(frozen=True)
class _JobConfig:
    """The base of every job config: the keyword-only ``local_world`` switch, then the config's own checks.

    ``local_world`` asks a local run for a multi-process world (see :mod:`.world`); it is never serialized.
    """

    _: KW_ONLY
    local_world: Optional[Union[int, str]] = None

    def __post_init__(self) -> None:
        if self.local_world is not None:
            name = f"{type(self).__name__}.local_world"
            object.__setattr__(self, "local_world", check_local_world(name, self.local_world))
        self._validate()

    def _validate(self) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class PyTorch(_JobConfig):
    """A PyTorchJob: one master and ``worker.replicas`` workers (0 makes a master-only job).

    ``num_workers`` is deprecated (use ``worker=Worker(replicas=N)``). The task mounts ``/dev/shm`` unless
    ``increase_shared_mem=False`` or ``@task(shared_memory=...)`` (see :mod:`.shm`); ``increase_shared_mem=True``
    is deprecated (it means the default).
    """

    master: Master = field(default_factory=Master)
    worker: Worker = field(default_factory=Worker)
    run_policy: Optional[RunPolicy] = None
    num_workers: Optional[int] = None
    increase_shared_mem: Optional[bool] = None

    def _validate(self) -> None:
        _check_role("PyTorch", "master", self.master, Master)
        worker = _check_role("PyTorch", "worker", self.worker, Worker)
        _check_run_policy("PyTorch", self.run_policy)
        worker = _merge_count("PyTorch", "num_workers", self.num_workers, "worker", worker)
        if worker.replicas is None:
            raise ValueError(
                "PyTorch.worker.replicas must be set, got None: use PyTorch(worker=Worker(replicas=N)) "
                "(0 for a master-only job)"
            )
        object.__setattr__(self, "worker", worker)
        _check_shared_mem("PyTorch", self.increase_shared_mem)


@dataclass(frozen=True)
class Elastic(_JobConfig):
    """torchrun-style elastic training: ``nproc_per_node`` processes on each of ``nnodes`` nodes.

    A single node (``nnodes`` 1, ``"1"`` or ``"1:1"``) runs as a plain ``python-task`` pod; more nodes
    run as a PyTorchJob with an elastic policy. ``rdzv_configs`` and ``start_method`` are used at run time.
    """

    nnodes: Union[int, str] = 1
    nproc_per_node: int = 1
    start_method: str = "spawn"
    monitor_interval: Union[int, float] = 5
    max_restarts: int = 0
    rdzv_configs: dict[str, Any] = field(default_factory=lambda: {"timeout": 900, "join_timeout": 900})
    increase_shared_mem: Optional[bool] = None
    run_policy: Optional[RunPolicy] = None

    def _validate(self) -> None:
        parse_nnodes(self.nnodes)
        if isinstance(self.nproc_per_node, str):
            raise TypeError(
                f"Elastic.nproc_per_node must be an int >= 1, got {self.nproc_per_node!r}: the task's "
                "IDL carries a number ('auto' is not supported; give the process count)"
            )
        check_int("Elastic.nproc_per_node", self.nproc_per_node, minimum=1)
        if self.start_method not in _START_METHODS:
            raise ValueError(
                f"Elastic.start_method must be one of {', '.join(_START_METHODS)}, got {self.start_method!r}"
            )
        interval = self.monitor_interval
        if isinstance(interval, bool) or not isinstance(interval, (int, float)):
            raise TypeError(f"Elastic.monitor_interval must be a number of seconds, got {interval!r}")
        if not 0 < interval < float("inf"):
            raise ValueError(f"Elastic.monitor_interval must be > 0 seconds, got {interval!r}")
        check_int("Elastic.max_restarts", self.max_restarts)
        if not isinstance(self.rdzv_configs, Mapping) or not all(isinstance(k, str) for k in self.rdzv_configs):
            raise TypeError(f"Elastic.rdzv_configs must be a dict with str keys, got {self.rdzv_configs!r}")
        for key, value in self.rdzv_configs.items():
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"Elastic.rdzv_configs[{key!r}] must be a finite number, got {value!r}")
        object.__setattr__(self, "rdzv_configs", dict(self.rdzv_configs))  # never share the caller's dict
        _check_run_policy("Elastic", self.run_policy)
        _check_shared_mem("Elastic", self.increase_shared_mem)

    @property
    def nodes(self) -> tuple[int, int]:
        """``(min_nodes, max_nodes)``."""
        return parse_nnodes(self.nnodes)

    @property
    def single_node(self) -> bool:
        return self.nodes == (1, 1)


@dataclass(frozen=True)
class TfJob(_JobConfig):
    """A TFJob. Only workers are required (at least one); chief, ps and evaluator default to 0.

    ``num_workers``, ``num_ps_replicas``, ``num_chief_replicas`` and ``num_evaluator_replicas`` are
    deprecated (use the role's ``replicas``).
    """

    chief: Chief = field(default_factory=Chief)
    ps: PS = field(default_factory=PS)
    worker: Worker = field(default_factory=Worker)
    evaluator: Evaluator = field(default_factory=Evaluator)
    run_policy: Optional[RunPolicy] = None
    num_workers: Optional[int] = None
    num_ps_replicas: Optional[int] = None
    num_chief_replicas: Optional[int] = None
    num_evaluator_replicas: Optional[int] = None

    def _validate(self) -> None:
        set_ = object.__setattr__
        merged: list[tuple[str, str, type[ReplicaRole]]] = [
            ("chief", "num_chief_replicas", Chief),
            ("ps", "num_ps_replicas", PS),
            ("worker", "num_workers", Worker),
            ("evaluator", "num_evaluator_replicas", Evaluator),
        ]
        for role_field, old_name, role_type in merged:
            role = _check_role("TfJob", role_field, getattr(self, role_field), role_type)
            set_(self, role_field, _merge_count("TfJob", old_name, getattr(self, old_name), role_field, role))
        _check_run_policy("TfJob", self.run_policy)
        if not self.worker.replicas:
            raise ValueError(f"TfJob.worker.replicas must be at least 1, got {self.worker.replicas!r}")
        if (self.chief.replicas or 0) > 1:
            raise ValueError(f"TfJob.chief.replicas must be 0 or 1 (one chief at most), got {self.chief.replicas!r}")


@dataclass(frozen=True)
class MPIOperatorOptions:
    """What the mpi-operator's MPIJob v2beta1 has beyond the v1 MPIJob (a backend with ``plugins.mpi.operator:
    v2beta1``); a backend building the Training Operator's v1 MPIJob refuses a task that sets any.

    >>> MPIOperatorOptions(launcher_creation_policy="WaitForWorkersReady").to_extension()
    {'launcherCreationPolicy': 'WaitForWorkersReady'}
    """

    #: ``"AtStartup"`` (the operator's default) or ``"WaitForWorkersReady"``: start the launcher once every
    #: worker is Ready, so mpirun does not fail reaching a worker that is still starting.
    launcher_creation_policy: Optional[str] = None
    #: Where the workers' image reads the SSH keys (default ``/root/.ssh``; non-root images use their home).
    ssh_auth_mount_path: Optional[str] = None
    #: ``"OpenMPI"`` (default), ``"Intel"`` or ``"MPICH"``: the hostfile and environment the operator writes.
    mpi_implementation: Optional[str] = None
    #: The launcher also runs worker processes (and counts in the hostfile).
    run_launcher_as_worker: Optional[bool] = None

    def __post_init__(self) -> None:
        for attr, allowed in (
            ("launcher_creation_policy", LAUNCHER_CREATION_POLICIES),
            ("mpi_implementation", MPI_IMPLEMENTATIONS),
        ):
            value = getattr(self, attr)
            if value is not None and value not in allowed:
                raise ValueError(f"MPIOperatorOptions.{attr} must be one of {list(allowed)}, got {value!r}")
        path = check_optional_str("MPIOperatorOptions.ssh_auth_mount_path", self.ssh_auth_mount_path)
        if path is not None and not path.startswith("/"):
            raise ValueError(f"MPIOperatorOptions.ssh_auth_mount_path must be an absolute path, got {path!r}")
        check_optional_bool("MPIOperatorOptions.run_launcher_as_worker", self.run_launcher_as_worker)

    def to_extension(self) -> MpiJobExtension:
        """The ``kubejobs.mpiJob`` section (the MPIJob v2beta1 field names)."""
        out: MpiJobExtension = {}
        for attr, key in (
            ("launcher_creation_policy", "launcherCreationPolicy"),
            ("ssh_auth_mount_path", "sshAuthMountPath"),
            ("mpi_implementation", "mpiImplementation"),
            ("run_launcher_as_worker", "runLauncherAsWorker"),
        ):
            if getattr(self, attr) is not None:
                out[key] = getattr(self, attr)  # type: ignore[literal-required]  # the keys above
        return out


def _validate_mpi(cfg: Union[MPIJob, HorovodJob], owner: str) -> None:
    launcher = _check_role(owner, "launcher", cfg.launcher, Launcher, mpi=True)
    worker = _check_role(owner, "worker", cfg.worker, Worker, mpi=True)
    if cfg.num_launcher_replicas is not None:
        check_int(f"{owner}.num_launcher_replicas", cfg.num_launcher_replicas)
        if cfg.num_launcher_replicas != 1:
            raise ValueError(
                f"{owner}.num_launcher_replicas must be 1 (an MPIJob has one launcher), "
                f"got {cfg.num_launcher_replicas!r}"
            )
        launcher = _merge_count(owner, "num_launcher_replicas", cfg.num_launcher_replicas, "launcher", launcher)
    worker = _merge_count(owner, "num_workers", cfg.num_workers, "worker", worker)
    if not worker.replicas:
        raise ValueError(f"{owner}.worker.replicas must be at least 1, got {worker.replicas!r}")
    object.__setattr__(cfg, "launcher", launcher)
    object.__setattr__(cfg, "worker", worker)
    if cfg.mpi_operator is not None and not isinstance(cfg.mpi_operator, MPIOperatorOptions):
        raise TypeError(f"{owner}.mpi_operator must be an MPIOperatorOptions, got {cfg.mpi_operator!r}")
    _check_run_policy(owner, cfg.run_policy)
    check_int(f"{owner}.slots", cfg.slots, minimum=1)
    processes = worker.replicas * cfg.slots
    if processes > INT32_MAX:
        raise ValueError(
            f"{owner}: mpirun -np worker.replicas*slots = {worker.replicas}*{cfg.slots} = {processes} "
            f"is above {INT32_MAX}"
        )


@dataclass(frozen=True)
class MPIJob(_JobConfig):
    """An MPIJob: one launcher running ``mpirun -np worker.replicas*slots`` over the workers.

    ``num_workers`` and ``num_launcher_replicas`` are deprecated.
    """

    launcher: Launcher = field(default_factory=Launcher)
    worker: Worker = field(default_factory=Worker)
    run_policy: Optional[RunPolicy] = None
    slots: int = 1
    num_launcher_replicas: Optional[int] = None
    num_workers: Optional[int] = None
    _: KW_ONLY
    #: Settings of the mpi-operator's MPIJob v2beta1 (see ``MPIOperatorOptions``).
    mpi_operator: Optional[MPIOperatorOptions] = None

    def _validate(self) -> None:
        _validate_mpi(self, "MPIJob")


@dataclass(frozen=True)
class HorovodJob(_JobConfig):
    """An MPIJob launched with ``horovodrun`` (elastic Horovod with host discovery)."""

    worker: Worker = field(default_factory=Worker)
    launcher: Launcher = field(default_factory=Launcher)
    run_policy: Optional[RunPolicy] = None
    slots: int = 1
    verbose: Optional[bool] = False
    log_level: Optional[str] = "INFO"
    discovery_script_path: Optional[str] = "/etc/mpi/discover_hosts.sh"
    elastic_timeout: Optional[int] = 1200
    num_launcher_replicas: Optional[int] = None
    num_workers: Optional[int] = None
    _: KW_ONLY
    #: Settings of the mpi-operator's MPIJob v2beta1 (see ``MPIOperatorOptions``).
    mpi_operator: Optional[MPIOperatorOptions] = None

    def _validate(self) -> None:
        _validate_mpi(self, "HorovodJob")
        check_optional_bool("HorovodJob.verbose", self.verbose)
        check_optional_str("HorovodJob.log_level", self.log_level)
        if self.log_level is not None:
            level = self.log_level.strip().upper()
            if level not in _HOROVOD_LOG_LEVELS:
                raise ValueError(
                    f"HorovodJob.log_level must be one of {', '.join(_HOROVOD_LOG_LEVELS)}, got {self.log_level!r}"
                )
            object.__setattr__(self, "log_level", level)
        check_optional_str("HorovodJob.discovery_script_path", self.discovery_script_path)
        check_optional_int("HorovodJob.elastic_timeout", self.elastic_timeout, minimum=1)
