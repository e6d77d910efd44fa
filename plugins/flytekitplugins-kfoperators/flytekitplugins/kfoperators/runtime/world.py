"""Local runs: which world a task's local run uses, and running it.

A PyTorch, Elastic, TfJob, MPIJob or HorovodJob task run locally (``pyflyte run`` without ``--remote``, or calling
the task in Python) runs the job's real topology as local processes whenever this machine can hold it: every role
sees the environment the operator gives it on a cluster (see :mod:`.plan`), the logs stream with ``[role-index]``
prefixes and the task returns the output of the process a cluster takes it from (master / chief / rank 0).

One rule for every kind, set by the environment variable ``KUBEJOBS_LOCAL_WORLD`` or the configs' ``local_world``
field (the variable wins when set):

- unset: the whole topology when it fits this machine (at most :func:`machine_limit` processes: two per CPU,
  fewer when memory is short; MPI also needs ``mpirun``); else one line says why and the task runs as a world
  of one;
- ``one`` or ``1``: a world of one: the function is called once, in-process, with the environment of the member
  a cluster takes the output from (PyTorch master, TF chief, MPI rank 0, Elastic rank 0);
- ``full``: the whole topology, refused beyond ``os.cpu_count() * 2`` processes;
- an int ``N > 1``: the whole topology, refused if it needs more than ``N`` processes.

An explicit setting that the topology does not fit is a ``ValueError`` (never a silently smaller world):

>>> check_local_world("PyTorch.local_world", "full")
'full'
>>> check_local_world("PyTorch.local_world", 0)
Traceback (most recent call last):
...
ValueError: PyTorch.local_world must be 'full', 'one' or an int >= 1, got 0
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Optional

from ..task_configs import FULL, LOCAL_WORLD_ENV, LocalWorldSetting, check_local_world
from .errors import LocalWorldError, RecoverableLocalWorldError

__all__ = [
    "FULL",
    "LOCAL_WORLD_ENV",
    "ONE",
    "PROCESS_MEMORY",
    "LocalWorldError",
    "RecoverableLocalWorldError",
    "check_local_world",
    "is_local_execution",
    "local_world_cap",
    "local_world_size",
    "machine_cap",
    "machine_limit",
    "run_local_world",
    "run_locally",
]

#: ``KUBEJOBS_LOCAL_WORLD=one``: the documented opt-out, a world of one (same as ``1``).
ONE = "one"
#: Memory counted per local process (a Python process with flytekit and torch loaded uses 300-450 MB).
PROCESS_MEMORY = 512 * 2**20


def machine_cap() -> int:
    """The most processes ``full`` starts: two per CPU core."""
    return (os.cpu_count() or 1) * 2


def _available_memory() -> Optional[int]:
    """Bytes of memory available to new processes (Linux: ``MemAvailable``), None when unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def machine_limit() -> int:
    """The most processes a default local run starts: :func:`machine_cap`, lowered to what the available memory
    holds at :data:`PROCESS_MEMORY` each."""
    memory = _available_memory()
    by_memory = machine_cap() if memory is None else max(1, memory // PROCESS_MEMORY)
    return min(machine_cap(), by_memory)


def _setting(config: object) -> tuple[str, Optional[LocalWorldSetting]]:
    """Where the setting comes from and its value (None: unset)."""
    env_value = os.environ.get(LOCAL_WORLD_ENV)
    if env_value is not None and env_value.strip():
        if env_value.strip().lower() == ONE:
            return LOCAL_WORLD_ENV, 1
        return LOCAL_WORLD_ENV, check_local_world(LOCAL_WORLD_ENV, env_value)
    field = f"{type(config).__name__}.local_world"
    return "local_world", check_local_world(field, getattr(config, "local_world", None))


def local_world_cap(config: object) -> int:
    """The largest local world an explicit setting allows for ``config`` (1 means in-process); unset: the
    :func:`machine_limit`."""
    _, setting = _setting(config)
    if setting is None:
        return machine_limit()
    return machine_cap() if setting == FULL else int(setting)


def is_local_execution() -> bool:
    """True outside a Flyte pod: ``pyflyte run`` without ``--remote``, or a plain call of the task."""
    from flytekit import FlyteContextManager

    state = FlyteContextManager.current_context().execution_state
    return bool(state is not None and state.mode is not None and state.is_local_execution())


def _notice(text: str) -> None:
    sys.stderr.write(f"kubejobs: {text}\n")
    sys.stderr.flush()


def _real_world(config: object) -> bool:
    """Whether the local run of ``config`` starts the job's topology (else: a world of one, in-process).
    Raises ``ValueError`` when an explicit setting does not fit the topology."""
    from .plan import kind_of, world_size_of

    if kind_of(config) is None or not is_local_execution():
        return False
    source, setting = _setting(config)
    size, name = world_size_of(config), type(config).__name__
    if setting is not None:
        cap = local_world_cap(config)
        if cap <= 1:
            return False
        if size > cap:
            raise ValueError(
                f"{name} needs {size} local processes but {source} allows {cap} "
                f"(machine cap: {machine_cap()}); use fewer replicas for the local run, raise the cap with "
                f"{LOCAL_WORLD_ENV}=<N>, or set {LOCAL_WORLD_ENV}=one to run the task once, in-process"
            )
        return True
    limit = machine_limit()
    if size > limit:
        _notice(
            f"{name} needs {size} local processes, this machine holds {limit} ({os.cpu_count() or 1} CPUs, "
            f"{(_available_memory() or 0) / 2**30:.1f} GiB available): running it as a world of one, in-process "
            f"(set {LOCAL_WORLD_ENV}=<N> to start them anyway, {LOCAL_WORLD_ENV}=one to silence this)"
        )
        return False
    if kind_of(config) == "mpi" and shutil.which("mpirun") is None:
        _notice(
            f"mpirun was not found on PATH: running the {name} as a world of one, in-process (install OpenMPI, "
            f"e.g. `sudo apt-get install openmpi-bin`, for its {size} ranks; {LOCAL_WORLD_ENV}=one silences this)"
        )
        return False
    return True


def local_world_size(config: object) -> int:
    """How many processes the local run of a task with ``config`` uses: 1 (in-process) outside a local execution,
    for the opt-out and when the machine cannot hold the topology; else the cluster's process count. Raises
    ``ValueError`` when an explicit setting does not fit the topology."""
    from .plan import world_size_of

    return world_size_of(config) if _real_world(config) else 1


class ElasticNode:
    """What one elastic node process of a local world runs: the Elastic launcher with the ``PET_*`` rendezvous
    variables its member was started with. Picklable: it crosses into the node process."""

    def __init__(self, config: Any, fn: Callable[..., Any]) -> None:
        self.config, self.fn = config, fn

    def __call__(self, **kwargs: Any) -> Any:
        from .elastic import run_elastic

        return run_elastic(self.config, self.fn, kwargs, node_env=os.environ, local=True)


def run_local_world(config: Any, fn: Callable[..., Any], kwargs: Mapping[str, Any]) -> Any:
    """Run the task function ``fn(**kwargs)`` as the job's local world; return what a cluster would.

    Raises :class:`LocalWorldError` (or the retryable :class:`RecoverableLocalWorldError`) naming the failed role
    and index; Ctrl-C stops every process and exits with code 130.
    """
    from .launch import launch
    from .plan import kind_of, nnodes_of, plan_for

    if kind_of(config) != "elastic":
        return launch(plan_for(config), fn, kwargs)
    if nnodes_of(config) == (1, 1):
        # One node: no node process to add; torch's agent in this process starts and stops the workers
        # (as torchrun's does), so the workers cost what torchrun's cost.
        from .elastic import run_elastic

        return run_elastic(config, fn, kwargs, node_env={}, local=True)
    return launch(plan_for(config), ElasticNode(config, fn), kwargs)


def run_locally(
    task_type: str, config: Any, fn: Callable[..., Any], kwargs: Mapping[str, Any], in_process: Callable[[], Any]
) -> Any:
    """The local run of a job task: its real world (:func:`run_local_world`) or, as the rule decides, a world of
    one: ``in_process()`` with the environment of the member a cluster takes the output from."""
    from .environment import scoped_environ, world_of_one
    from .plan import kind_of, output_role

    if _real_world(config):
        return run_local_world(config, fn, kwargs)
    role = output_role(config) if kind_of(config) is not None else None
    with scoped_environ(world_of_one(task_type, role)):
        return in_process()
