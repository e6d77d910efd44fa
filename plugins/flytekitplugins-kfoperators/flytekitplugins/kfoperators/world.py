"""Local distributed runs: the switch that turns a local task call into the job's real topology.

A PyTorch, Elastic, TfJob, MPIJob or HorovodJob task run locally (``pyflyte run`` without ``--remote``, or
calling the task in Python) normally calls the function once, in-process: a world of one. Setting the
local world runs every role of the job as a local process that sees the environment the operator gives it
on a cluster (see :mod:`.world_plan`), streams their logs with ``[role-index]`` prefixes and returns the
output of the process a cluster takes it from (master / chief / rank 0).

The switch, environment variable ``KUBEJOBS_LOCAL_WORLD`` or the configs' ``local_world`` field (the
environment variable wins when set):

- unset, ``1``: one process, in-process (today's behaviour);
- ``full``: the whole topology, refused beyond ``os.cpu_count() * 2`` processes;
- an int ``N > 1``: the whole topology, refused if it needs more than ``N`` processes.

A topology too big for the cap is a ``ValueError`` (never a silently smaller world):

>>> check_local_world("PyTorch.local_world", "full")
'full'
>>> check_local_world("PyTorch.local_world", 0)
Traceback (most recent call last):
...
ValueError: PyTorch.local_world must be 'full' or an int >= 1, got 0
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from .config import FULL, LOCAL_WORLD_ENV, check_local_world
from .world_launch import LocalWorldError, RecoverableLocalWorldError

__all__ = [
    "FULL",
    "LOCAL_WORLD_ENV",
    "LocalWorldError",
    "RecoverableLocalWorldError",
    "check_local_world",
    "is_local_execution",
    "local_world_cap",
    "local_world_size",
    "machine_cap",
    "run_local_world",
]


def machine_cap() -> int:
    """The most processes ``full`` starts: two per CPU core."""
    return (os.cpu_count() or 1) * 2


def local_world_cap(config: object) -> int:
    """The largest local world the switch allows for ``config``: 1 means in-process."""
    env_value = os.environ.get(LOCAL_WORLD_ENV)
    if env_value is not None and env_value.strip():
        setting = check_local_world(LOCAL_WORLD_ENV, env_value)
    else:
        setting = check_local_world(f"{type(config).__name__}.local_world", getattr(config, "local_world", None))
    if setting is None:
        return 1
    return machine_cap() if setting == FULL else int(setting)


def is_local_execution() -> bool:
    """True outside a Flyte pod: ``pyflyte run`` without ``--remote``, or a plain call of the task."""
    from flytekit import FlyteContextManager

    state = FlyteContextManager.current_context().execution_state
    return bool(state is not None and state.mode is not None and state.is_local_execution())


def local_world_size(config: object) -> int:
    """How many processes the local run of a task with ``config`` uses: 1 (in-process) unless this is a
    local execution and the switch asks for more. Raises ``ValueError`` when the job does not fit the cap."""
    from .world_plan import kind_of, world_size_of

    if kind_of(config) is None or not is_local_execution():
        return 1
    cap = local_world_cap(config)
    if cap <= 1:
        return 1
    size = world_size_of(config)
    if size > cap:
        source = LOCAL_WORLD_ENV if os.environ.get(LOCAL_WORLD_ENV, "").strip() else "local_world"
        raise ValueError(
            f"{type(config).__name__} needs {size} local processes but {source} allows {cap} "
            f"(machine cap: {machine_cap()}); use fewer replicas for the local run, raise the cap with "
            f"{LOCAL_WORLD_ENV}=<N>, or set {LOCAL_WORLD_ENV}=1 to run the task once, in-process"
        )
    return size


class ElasticNode:
    """What one elastic node runs (see :mod:`.world_elastic`): in a node process it reads the ``PET_*``
    rendezvous variables its member was started with; with ``single=True`` it is the only node and runs in
    the calling process. Picklable: it crosses into the node process."""

    def __init__(self, config: Any, fn: Callable[..., Any], *, single: bool = False) -> None:
        self.config, self.fn, self.single = config, fn, single

    def __call__(self, **kwargs: Any) -> Any:
        from .world_elastic import run_elastic_node

        return run_elastic_node(self.config, self.fn, kwargs, {} if self.single else os.environ)


def run_local_world(config: Any, fn: Callable[..., Any], kwargs: Mapping[str, Any]) -> Any:
    """Run the task function ``fn(**kwargs)`` as the job's local world; return what a cluster would.

    Call it only when :func:`local_world_size` is above 1. Raises :class:`LocalWorldError` (or the
    retryable :class:`RecoverableLocalWorldError`) naming the failed role and index.
    """
    from .world_launch import launch
    from .world_plan import kind_of, nnodes_of, plan_for

    if kind_of(config) != "elastic":
        return launch(plan_for(config), fn, kwargs)
    if nnodes_of(config) == (1, 1):
        # One node: no node process to add; torch's agent in this process starts and stops the workers
        # (as torchrun's does), so the workers cost what torchrun's cost.
        return ElasticNode(config, fn, single=True)(**kwargs)
    return launch(plan_for(config), ElasticNode(config, fn), kwargs)
