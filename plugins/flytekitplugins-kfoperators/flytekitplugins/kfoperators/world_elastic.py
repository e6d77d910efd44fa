"""One elastic node of a local world: torch's elastic launcher starting ``nproc_per_node`` workers.

A PyTorchJob pod with an ElasticPolicy runs the elastic agent with the ``PET_*`` variables the operator sets;
a local node does the same: with ``PET_RDZV_ENDPOINT`` (a free port on 127.0.0.1, set by :mod:`.world_plan`
for each node process) the nodes meet at a local c10d rendezvous (the first to bind the port hosts the store,
as when several agents share a host); without it the node is alone, on ``localhost:0``.

The workers are :mod:`.world_child` processes started by the agent the way torchrun starts a script (a
fresh interpreter, not a multiprocessing spawn that re-imports the caller's ``__main__``); each labels its
lines ``[rank-N]`` and reports its outcome through a file, so the first failing rank is named with its
traceback and a ``FlyteRecoverableException`` stays retryable. The node holding global rank 0 returns its
value; the other nodes raise ``IgnoreOutputs``, as flytekit's elastic task does on non-zero pods.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .local import restored_environ
from .world_child import adopt_decks, result_path
from .world_launch import CHILD_MODULE, LocalWorldError, Member, RecoverableLocalWorldError, read_outcome, write_payload

__all__ = ["LOCAL_MONITOR_INTERVAL", "run_elastic_node"]

#: Seconds between the agent's checks of its workers: torchrun's default. The config's interval (5 s by
#: default) is tuned for pods and would add up to that much latency to every local run.
LOCAL_MONITOR_INTERVAL = 0.1
_AGENT_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT")


@contextmanager
def _own_signal_handlers() -> Iterator[None]:
    """torch's agent installs process-wide handlers for these signals; put the caller's back afterwards."""
    if not _in_main_thread():
        yield
        return
    saved = {name: signal.getsignal(getattr(signal, name)) for name in _AGENT_SIGNALS if hasattr(signal, name)}
    try:
        yield
    finally:
        for name, handler in saved.items():
            if handler is not None:
                signal.signal(getattr(signal, name), handler)


def _in_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _failure(workdir: Path, failed_ranks: list[int]) -> Exception:
    errors = []
    for rank in failed_ranks:
        outcome = read_outcome(workdir, Member("rank", rank, {}))
        if outcome is not None and outcome[0] == "error":
            errors.append((outcome[5], rank, outcome))
    if not errors:
        rank = min(failed_ranks)
        return LocalWorldError(
            f"local Elastic world: rank {rank} exited without reporting a result",
            role="rank",
            index=rank,
            exit_code=None,
            stderr_tail="",
        )
    _, rank, outcome = min(errors)
    message = f"local Elastic world: rank {rank} failed: {outcome[2]}\n--- traceback of rank {rank} ---\n{outcome[3]}"
    kind = RecoverableLocalWorldError if outcome[4] else LocalWorldError
    error: Exception = kind(message, role="rank", index=rank, exit_code=1, stderr_tail=outcome[3])
    if isinstance(outcome[1], BaseException):
        error.__cause__ = outcome[1]
    return error


def run_elastic_node(
    config: Any, fn: Callable[..., Any], kwargs: Mapping[str, Any], env: Mapping[str, str] = os.environ
) -> Any:
    """Run this node's ``config.nproc_per_node`` workers of the Elastic task ``fn(**kwargs)``; ``env`` holds
    the node's ``PET_*`` variables (none: a single node)."""
    # torch writes to os.environ (KMP_INIT_AT_FORK on import, TORCHELASTIC_* in the launcher): undone after.
    with restored_environ(), _own_signal_handlers():
        return _run_node(config, fn, kwargs, env)


def _run_node(config: Any, fn: Callable[..., Any], kwargs: Mapping[str, Any], env: Mapping[str, str]) -> Any:
    from flytekit.core.base_task import IgnoreOutputs
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    nnodes = env.get("PET_NNODES", "1")
    low, _, high = nnodes.partition(":")
    nproc = int(config.nproc_per_node)
    launch_config = LaunchConfig(
        min_nodes=int(low),
        max_nodes=int(high or low),
        nproc_per_node=nproc,
        run_id=env.get("PET_RDZV_ID", "kubejobs-local"),
        rdzv_backend=env.get("PET_RDZV_BACKEND", "c10d"),
        rdzv_endpoint=env.get("PET_RDZV_ENDPOINT", "localhost:0"),
        rdzv_configs=dict(getattr(config, "rdzv_configs", None) or {}),
        max_restarts=int(getattr(config, "max_restarts", 0) or 0),
        monitor_interval=min(float(getattr(config, "monitor_interval", 5)), LOCAL_MONITOR_INTERVAL),
    )
    # Like torchrun: one OpenMP thread per worker unless the user chose (set in the workers only).
    threads = {"OMP_NUM_THREADS": "1"} if nproc > 1 and "OMP_NUM_THREADS" not in os.environ else {}
    workdir = Path(tempfile.mkdtemp(prefix="kubejobs-elastic-"))
    try:
        write_payload(workdir, fn, kwargs, threads)
        launch = elastic_launch(launch_config, sys.executable)
        try:
            results = launch("-m", CHILD_MODULE, str(workdir), "rank", "env:RANK")
        except ChildFailedError as e:
            raise _failure(workdir, sorted(e.failures)) from None
        except SignalException as e:
            if e.sigval == signal.SIGINT:
                raise KeyboardInterrupt from None
            raise
        if 0 not in results:
            raise IgnoreOutputs()
        import cloudpickle

        return adopt_decks(cloudpickle.loads(result_path(workdir, "rank", 0).read_bytes()))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
