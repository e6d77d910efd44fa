"""The Elastic launcher: ``nproc_per_node`` worker processes of one node through torch's ``elastic_launch``.

One launcher for every place an Elastic task runs: a PyTorchJob pod (the operator's ``PET_*`` variables describe
the rendezvous), a local single-node run (torch's agent in the calling process, as ``torchrun`` does: one node
meeting at ``localhost:0``), and each node process of a local multi-node world (:mod:`.plan` gives it ``PET_*``
variables pointing at a c10d rendezvous on a free local port).

Workers start as the config's ``start_method`` says (``spawn``: a fresh interpreter that imports the user's
module from the path the parent imported it from; ``fork``: a copy of the caller). Rank 0's return value, decks
and output metadata come back; on other nodes the task raises ``IgnoreOutputs``, as flytekit's elastic task does.
A worker failure is raised with its rank; a ``FlyteRecoverableException`` in a worker stays recoverable (a file
next to torch's error file says so, since torch hands exceptions over as text).

Locally, in addition: each worker labels its lines ``[rank-N]``, prints its traceback once, and the error names the
user's file and line; the agent polls every 0.1 s (the config's ``monitor_interval`` is tuned for pods); Ctrl-C
stops the workers quietly and exits with code 130.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple, Optional

import flytekit
from flytekit.core.context_manager import FlyteContextManager, OutputMetadata
from flytekit.exceptions.user import FlyteRecoverableException, FlyteUserRuntimeException
from flytekit.extend import IgnoreOutputs
from flytekit.loggers import logger

from ..serialize import RDZV_BACKEND
from .child import dumps, end_quietly_on_sigint, prefix_own_output, user_frame
from .environment import restored_environ
from .errors import LocalWorldError, RecoverableLocalWorldError
from .launch import import_path, interrupted
from .plan import nnodes_of

__all__ = ["LOCAL_MONITOR_INTERVAL", "TORCH_MISSING", "run_elastic"]

TORCH_MISSING = "Elastic needs torch: pip install 'flytekitplugins-kfoperators[elastic]'"
#: Seconds between the agent's checks of its workers in a local run: torchrun's default. The config's interval
#: (5 s by default) is tuned for pods and would add up to that much latency to every local run.
LOCAL_MONITOR_INTERVAL = 0.1
#: Written by a failing worker next to torch's error file: what failed, where in the user's code, retryable or not.
FAILURE_FILE = "kubejobs_failure.json"
_AGENT_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT")


class WorkerResult(NamedTuple):
    return_value: Any
    decks: list[Any]
    om: Optional[OutputMetadata] = None


def _record_failure(error: BaseException) -> None:
    error_file = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if error_file:
        failure = {
            "summary": f"{type(error).__name__}: {error}",
            "where": user_frame(error),
            "recoverable": isinstance(error, FlyteRecoverableException),
        }
        Path(error_file).parent.joinpath(FAILURE_FILE).write_text(json.dumps(failure))


def _call(fn: Callable[..., Any], kwargs: dict[str, Any], local: bool) -> WorkerResult:
    stop_labelling: Callable[[], None] = lambda: None  # noqa: E731
    if local:
        end_quietly_on_sigint()
        stop_labelling = prefix_own_output(f"rank-{os.environ.get('RANK', '0')}")
    try:
        value = fn(**kwargs)
        tracker = FlyteContextManager.current_context().output_metadata_tracker
        om = tracker.get(value) if tracker else None
        return WorkerResult(value, list(flytekit.current_context().decks), om)
    except BaseException as e:
        _record_failure(e)
        if local:  # the one traceback the user sees, under this rank's label
            sys.stderr.write(traceback.format_exc())
        raise
    finally:
        stop_labelling()


def spawned_worker(
    payload: bytes,
    sys_path: list[str],
    raw_output_prefix: str,
    checkpoint_dest: Optional[str],
    checkpoint_src: Optional[str],
    local: bool,
) -> WorkerResult:
    """Entry point of a spawned worker: import the user's code as the parent did, rebuild a flytekit context,
    run the function."""
    import cloudpickle
    from flytekit.bin.entrypoint import setup_execution

    for entry in reversed(sys_path):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    with setup_execution(
        raw_output_data_prefix=raw_output_prefix, checkpoint_path=checkpoint_dest, prev_checkpoint=checkpoint_src
    ):
        fn, kwargs = cloudpickle.loads(payload)  # the function and its inputs: they may need the user's modules
        return _call(fn, kwargs, local)


def _spawn_args(fn: Callable[..., Any], kwargs: dict[str, Any], local: bool) -> tuple[Any, ...]:
    ctx = flytekit.current_context()
    try:
        dest, src = ctx.checkpoint._checkpoint_dest, ctx.checkpoint._checkpoint_src
    except NotImplementedError:  # no checkpointing in this execution
        dest = src = None
    return dumps((fn, kwargs)), import_path(fn), ctx.raw_output_prefix, dest, src, local


@contextmanager
def _own_signal_handlers() -> Iterator[None]:
    """torch's agent installs process-wide handlers for these signals; put the caller's back afterwards."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {name: signal.getsignal(getattr(signal, name)) for name in _AGENT_SIGNALS if hasattr(signal, name)}
    try:
        yield
    finally:
        for name, handler in saved.items():
            if handler is not None:
                signal.signal(getattr(signal, name), handler)


@contextmanager
def _agent_logs_quiet(local: bool) -> Iterator[None]:
    """Locally, torch's agent keeps its warnings (shutting down, closing process N) to itself: the launcher reports
    what happened once. Errors still show."""
    import logging

    # torch gives each of its modules a logger with its own level: every one of them, not just the parent.
    names = [n for n in logging.root.manager.loggerDict if n.startswith("torch.distributed.elastic")]
    loggers = [logging.getLogger(n) for n in names] if local else []
    saved = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(max(lg.level, logging.ERROR))
    try:
        yield
    finally:
        for lg, level in zip(loggers, saved, strict=True):
            lg.setLevel(level)


def _local_failure(error: Any) -> Exception:
    """The error of a local run for torch's ``ChildFailedError``: the rank that failed first, its exception and
    the user's line (its traceback was printed once, by the rank itself)."""
    rank, failure = error.get_first_failure()
    path = Path(failure.error_file).parent / FAILURE_FILE
    details = json.loads(path.read_text()) if path.exists() else {}
    cause = details.get("summary") or f"exited with code {failure.exitcode} without reporting an error"
    where = f"\n  at {details['where']}" if details.get("where") else ""
    message = f"local Elastic world: rank {rank} failed: {cause}{where}"
    fields: dict[str, Any] = {
        "role": "rank",
        "index": rank,
        "exit_code": failure.exitcode,
        "stderr_tail": failure.message or "",
        "timestamp": failure.timestamp,
    }
    if details.get("recoverable"):
        return RecoverableLocalWorldError(message, **fields)
    # as the official plugin raises a failed worker's error (callers catch FlyteUserRuntimeException)
    failed: Exception = FlyteUserRuntimeException(LocalWorldError(message, **fields), timestamp=failure.timestamp)
    return failed


def _pod_failure(error: Any) -> Exception:
    rank, failure = error.get_first_failure()
    message = f"Elastic worker rank {rank} failed (exit code {failure.exitcode}):\n{error.format_msg()}"
    path = Path(failure.error_file).parent / FAILURE_FILE
    exception: Exception
    if path.exists() and json.loads(path.read_text()).get("recoverable"):
        exception = FlyteRecoverableException(message, timestamp=failure.timestamp)
    else:
        exception = FlyteUserRuntimeException(RuntimeError(message), timestamp=failure.timestamp)
    return exception


def run_elastic(
    cfg: Any, fn: Callable[..., Any], kwargs: Mapping[str, Any], *, node_env: Mapping[str, str], local: bool
) -> Any:
    """Launch the workers of this node and return rank 0's result (``IgnoreOutputs`` on other nodes).

    ``node_env`` holds the node's ``PET_*`` rendezvous variables (a pod's or a local node process's environment);
    a local run without them is a single node. ``local`` selects the local behaviour described above.
    """
    nproc = int(cfg.nproc_per_node)
    # Like torchrun: one thread per process unless the user chose. Children inherit it; the parent's environment
    # (which torch writes to: KMP_INIT_AT_FORK on import, TORCHELASTIC_* in the launcher) is restored afterwards,
    # and so are the signal handlers torch's agent installs.
    threads = {"OMP_NUM_THREADS": "1"} if "OMP_NUM_THREADS" not in os.environ and nproc > 1 else {}
    with restored_environ(threads), _own_signal_handlers():
        return _launch(cfg, fn, dict(kwargs), node_env, local)


def _launch(cfg: Any, fn: Callable[..., Any], kwargs: dict[str, Any], node_env: Mapping[str, str], local: bool) -> Any:
    try:
        from torch.distributed.elastic.multiprocessing.api import SignalException
        from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
        from torch.distributed.launcher.api import LaunchConfig, elastic_launch
    except ImportError as e:
        raise ImportError(TORCH_MISSING) from e

    alone = local and "PET_RDZV_ENDPOINT" not in node_env
    min_nodes, max_nodes = (1, 1) if alone else nnodes_of(cfg)
    nproc = int(cfg.nproc_per_node)
    config = LaunchConfig(
        run_id=flytekit.current_context().execution_id.name or "local",
        min_nodes=min_nodes,
        max_nodes=max_nodes,
        nproc_per_node=nproc,
        rdzv_backend=RDZV_BACKEND,
        rdzv_configs=dict(cfg.rdzv_configs),
        rdzv_endpoint="localhost:0" if alone else node_env.get("PET_RDZV_ENDPOINT", "localhost:0"),
        max_restarts=int(cfg.max_restarts),
        monitor_interval=min(cfg.monitor_interval, LOCAL_MONITOR_INTERVAL) if local else cfg.monitor_interval,
        start_method=cfg.start_method,
    )
    if cfg.start_method == "spawn":
        entrypoint: Callable[..., Any] = spawned_worker
        args = _spawn_args(fn, kwargs, local)
    else:

        def entrypoint() -> WorkerResult:
            return _call(fn, kwargs, local)

        args = ()
    try:
        with _agent_logs_quiet(local):
            results = elastic_launch(config=config, entrypoint=entrypoint)(*args)
    except ChildFailedError as e:
        raise (_local_failure(e) if local else _pod_failure(e)) from None
    except SignalException as e:
        if local and e.sigval == signal.SIGINT:
            if alone:
                raise interrupted(f"the {nproc} worker processes of the local Elastic run") from None
            raise KeyboardInterrupt from None
        if local:
            raise
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
