"""Running an Elastic task: ``nproc_per_node`` worker processes through torch's ``elastic_launch``.

In a PyTorchJob pod the operator's ``PET_*`` variables describe the rendezvous; locally there is no
other node, so one node of ``nproc_per_node`` processes meets at ``localhost:0``. Rank 0's return value
(and its decks) come back; a worker failure is raised with its rank, and a
``FlyteRecoverableException`` in a worker stays recoverable (a marker file next to torch's error file
says so, because torch hands exceptions over as text).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, Optional

import flytekit
from flytekit.core.context_manager import FlyteContextManager, OutputMetadata
from flytekit.exceptions.user import FlyteRecoverableException, FlyteUserRuntimeException
from flytekit.extend import IgnoreOutputs
from flytekit.loggers import logger

from .config import Elastic
from .local import restored_environ
from .serialize import RDZV_BACKEND

__all__ = ["run_elastic"]

RECOVERABLE_MARKER = "recoverable_error"
TORCH_MISSING = "Elastic needs torch: pip install 'flytekitplugins-kfoperators[elastic]'"


class WorkerResult(NamedTuple):
    return_value: Any
    decks: list[Any]
    om: Optional[OutputMetadata] = None


def _mark_recoverable(error: BaseException) -> None:
    error_file = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if isinstance(error, FlyteRecoverableException) and error_file:
        Path(error_file).parent.joinpath(RECOVERABLE_MARKER).touch()


def _call(fn: Callable[..., Any], kwargs: dict[str, Any]) -> WorkerResult:
    try:
        value = fn(**kwargs)
    except BaseException as e:
        _mark_recoverable(e)
        raise
    tracker = FlyteContextManager.current_context().output_metadata_tracker
    om = tracker.get(value) if tracker else None
    return WorkerResult(value, list(flytekit.current_context().decks), om)


def spawned_worker(
    fn_bytes: bytes, raw_output_prefix: str, checkpoint_dest: Optional[str], checkpoint_src: Optional[str], kwargs: Any
) -> WorkerResult:
    """Entry point of a spawned worker: rebuild a flytekit context, unpickle the task function, run it."""
    import cloudpickle
    from flytekit.bin.entrypoint import setup_execution

    with setup_execution(
        raw_output_data_prefix=raw_output_prefix, checkpoint_path=checkpoint_dest, prev_checkpoint=checkpoint_src
    ):
        return _call(cloudpickle.loads(fn_bytes), kwargs)


def _spawn_args(fn: Callable[..., Any], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    import cloudpickle

    ctx = flytekit.current_context()
    try:
        dest, src = ctx.checkpoint._checkpoint_dest, ctx.checkpoint._checkpoint_src
    except NotImplementedError:  # no checkpointing in this execution
        dest = src = None
    return cloudpickle.dumps(fn), ctx.raw_output_prefix, dest, src, kwargs


def run_elastic(cfg: Elastic, fn: Callable[..., Any], kwargs: dict[str, Any], *, local: bool) -> Any:
    """Launch the workers of this node and return rank 0's result (``IgnoreOutputs`` on other nodes)."""
    try:
        from torch.distributed.elastic.multiprocessing.api import SignalException
        from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
        from torch.distributed.launcher.api import LaunchConfig, elastic_launch
    except ImportError as e:
        raise ImportError(TORCH_MISSING) from e

    from .world_elastic import LOCAL_MONITOR_INTERVAL  # the local world's polling: the same reasons

    min_nodes, max_nodes = (1, 1) if local else cfg.nodes
    if local and cfg.nodes != (1, 1):
        logger.warning(f"Elastic(nnodes={cfg.nnodes!r}) runs locally as one node of {cfg.nproc_per_node} processes")
    config = LaunchConfig(
        run_id=flytekit.current_context().execution_id.name or "local",
        min_nodes=min_nodes,
        max_nodes=max_nodes,
        nproc_per_node=cfg.nproc_per_node,
        rdzv_backend=RDZV_BACKEND,
        rdzv_configs=dict(cfg.rdzv_configs),
        rdzv_endpoint="localhost:0" if local else os.environ.get("PET_RDZV_ENDPOINT", "localhost:0"),
        max_restarts=cfg.max_restarts,
        monitor_interval=min(cfg.monitor_interval, LOCAL_MONITOR_INTERVAL) if local else cfg.monitor_interval,
        start_method=cfg.start_method,
    )
    if cfg.start_method == "spawn":
        entrypoint: Callable[..., Any] = spawned_worker
        args = _spawn_args(fn, kwargs)
    else:

        def entrypoint() -> WorkerResult:
            return _call(fn, kwargs)

        args = ()
    # Like torchrun: one thread per process unless the user chose. Children inherit it; the parent's
    # environment (which torch's launcher also writes to) is restored when the launch returns.
    env = {"OMP_NUM_THREADS": "1"} if "OMP_NUM_THREADS" not in os.environ and cfg.nproc_per_node > 1 else {}
    try:
        with restored_environ(env):
            results = elastic_launch(config=config, entrypoint=entrypoint)(*args)
    except ChildFailedError as e:
        rank, failure = e.get_first_failure()
        message = f"Elastic worker rank {rank} failed (exit code {failure.exitcode}):\n{e.format_msg()}"  # type: ignore[no-untyped-call]
        if Path(failure.error_file).parent.joinpath(RECOVERABLE_MARKER).exists():
            raise FlyteRecoverableException(message, timestamp=failure.timestamp) from None
        raise FlyteUserRuntimeException(RuntimeError(message), timestamp=failure.timestamp) from None
    except SignalException as e:
        logger.exception(f"Elastic launch agent terminating: {e}")
        raise IgnoreOutputs() from e
    if 0 not in results:
        raise IgnoreOutputs()
    first: WorkerResult = results[0]
    ctx = flytekit.current_context()
    for deck in first.decks:
        if not isinstance(deck, flytekit.deck.deck.TimeLineDeck):
            ctx.decks.append(deck)
    if first.om:
        FlyteContextManager.current_context().output_metadata_tracker.add(first.return_value, first.om)
    return first.return_value
