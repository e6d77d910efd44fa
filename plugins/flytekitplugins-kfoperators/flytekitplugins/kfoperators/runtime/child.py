"""The child side of a local world: one process of a local distributed run.

The parent (:mod:`.launch`) writes the cloudpickled target and its keyword arguments to
``<workdir>/payload.pkl`` and starts ``python -m flytekitplugins.kfoperators.runtime.child_main <workdir> <role>
<index>``, either directly or under ``mpirun`` (then ``<index>`` is ``env:<VAR>``: the rank comes from
``OMPI_COMM_WORLD_RANK``). The child rebuilds a minimal flytekit execution
context (as a pod's ``pyflyte-execute`` would), runs the target and writes its outcome, pickled, to
``<workdir>/result-<role>-<index>.pkl``:

- ``("ok", value, decks)``: the target returned ``value`` (``decks``: the flytekit decks it made);
- ``("ignore", None)``: the target raised flytekit's ``IgnoreOutputs`` (a non-zero elastic node);
- ``("error", exception or None, summary, traceback text, recoverable, unix time, the user's frame)``.

A watchdog thread ends the child's whole process group when its parent disappears, so a killed
parent leaves no orphans behind. Ctrl-C is the launcher's to handle: a child that gets SIGINT (a terminal sends
it to the whole foreground group) ends quietly, without a traceback of its own.

Code travels with its file and line: functions cloudpickle copies by value (a script's ``__main__``, a nested
function) keep their ``co_filename`` (:func:`dumps`), so a traceback in a child points at the user's file.
"""

from __future__ import annotations

import atexit
import collections
import io
import marshal
import os
import pickle
import signal
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar, NoReturn

__all__ = [
    "PAYLOAD_FILE",
    "RANK_ENV",
    "adopt_decks",
    "dumps",
    "end_quietly_on_sigint",
    "exit_now",
    "main",
    "prefix_own_output",
    "result_path",
    "run_target",
    "user_frame",
]

PAYLOAD_FILE = "payload.pkl"
#: Where an MPI rank finds its index (OpenMPI's per-rank environment).
RANK_ENV = "OMPI_COMM_WORLD_RANK"
_WATCH_SECONDS = 0.5


def _code_reducer(code: types.CodeType) -> tuple[Any, ...]:
    # cloudpickle renames copied code "<dynamic-code>"; marshal keeps every field (file, lines) and the child runs
    # the same interpreter.
    return marshal.loads, (marshal.dumps(code),)


def dumps(obj: Any) -> bytes:
    """``cloudpickle.dumps``, except that code copied by value keeps its file name and line numbers."""
    import cloudpickle

    class Pickler(cloudpickle.Pickler):  # type: ignore[misc]
        # Read by pickle when the pickler is created: a class attribute, not one set on the instance.
        dispatch_table: ClassVar[Mapping[Any, Any]] = collections.ChainMap(
            {types.CodeType: _code_reducer}, cloudpickle.Pickler.dispatch_table
        )

    buffer = io.BytesIO()
    Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


def end_quietly_on_sigint() -> None:
    """Make SIGINT end this process at once with exit code 130 and no traceback: the launcher reports Ctrl-C once."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, lambda *_: os._exit(130))


def result_path(workdir: Path, role: str, index: int) -> Path:
    return workdir / f"result-{role}-{index}.pkl"


def _watch_parent(parent_pid: int) -> None:
    # Re-parenting means our parent died without cleaning up: take our process group down with us.
    while True:
        time.sleep(_WATCH_SECONDS)
        if os.getppid() != parent_pid:
            try:
                os.killpg(os.getpgrp(), signal.SIGKILL)
            finally:
                os._exit(137)


def prefix_own_output(prefix: str) -> Callable[[], None]:
    """Route this process's fd 1 and 2 (Python and C output alike) through threads that prefix
    every line with ``[prefix] `` before writing it to the original streams. Returns ``stop``, which
    puts the original streams back and waits for the last lines to be copied."""
    restore: list[tuple[int, int]] = []
    threads: list[threading.Thread] = []
    for fd in (1, 2):
        original = os.dup(fd)
        read_end, write_end = os.pipe()
        os.dup2(write_end, fd)
        os.close(write_end)
        thread = threading.Thread(target=_copy_prefixed, args=(read_end, original, prefix), daemon=True)
        thread.start()
        restore.append((fd, original))
        threads.append(thread)

    def stop() -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, original in restore:
            os.dup2(original, fd)  # closes the pipe's last write end we hold: the copier sees EOF
        for thread in threads:
            thread.join(timeout=5)

    return stop


def _copy_prefixed(read_end: int, original: int, prefix: str) -> None:
    with os.fdopen(read_end, "rb", buffering=0) as source:
        for line in iter(source.readline, b""):
            os.write(original, f"[{prefix}] ".encode() + line)


def user_frame(exc: BaseException) -> str:
    """Where the user's code raised ``exc``: the innermost frame outside installed packages (flytekit, torch,
    this plugin), as a traceback line (``File "/src/train.py", line 31, in train``); "" when there is none."""
    frames = traceback.extract_tb(exc.__traceback__)
    installed = ("site-packages", "dist-packages")
    own = [f for f in frames if not any(part in installed for part in Path(f.filename).parts)]
    frame = own[-1] if own else None
    return f'File "{frame.filename}", line {frame.lineno}, in {frame.name}' if frame else ""


def _outcome_of(exc: BaseException) -> tuple[Any, ...]:
    from flytekit.exceptions.user import FlyteRecoverableException

    summary = f"{type(exc).__name__}: {exc}"
    text = "".join(traceback.format_exception(exc))
    recoverable = isinstance(exc, FlyteRecoverableException)
    import cloudpickle

    try:
        pickled: Any = cloudpickle.loads(dumps(exc))
    except Exception:  # an exception that does not survive pickling still gets reported by its text
        pickled = None
    return ("error", pickled, summary, text, recoverable, time.time(), user_frame(exc))


def run_target(target: Any, kwargs: dict[str, Any], raw_output_prefix: str) -> tuple[Any, ...]:
    """Run ``target(**kwargs)`` in a fresh flytekit task-execution context; return the outcome tuple."""
    import flytekit
    from flytekit.bin.entrypoint import setup_execution
    from flytekit.core.base_task import IgnoreOutputs
    from flytekit.deck.deck import TimeLineDeck

    try:
        with setup_execution(raw_output_data_prefix=raw_output_prefix):
            value = target(**kwargs)
            decks = [d for d in flytekit.current_context().decks if not isinstance(d, TimeLineDeck)]
        return ("ok", value, decks)
    except IgnoreOutputs:
        return ("ignore", None)
    except Exception as exc:
        return _outcome_of(exc)


def adopt_decks(outcome: tuple[Any, ...]) -> Any:
    """The value of an ``"ok"`` outcome, its decks added to the current flytekit context (as flytekit's
    elastic task does with rank 0's)."""
    import flytekit

    decks = flytekit.current_context().decks
    decks.extend(d for d in outcome[2] if d not in decks)
    return outcome[1]


def _write(path: Path, outcome: tuple[Any, ...]) -> None:
    try:
        data = dumps(outcome)
    except Exception as exc:
        if outcome[0] == "ok" and outcome[2]:  # decks that do not pickle: keep the value, say so
            sys.stderr.write(f"the task's decks cannot be sent to the parent and are dropped: {exc}\n")
            return _write(path, (*outcome[:2], []))
        # the return value itself cannot be pickled: report that as the failure
        data = dumps(_outcome_of(TypeError(f"the task's return value cannot be pickled: {exc}")))
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)  # atomic: the parent never reads half a result


def main(argv: list[str]) -> int:
    workdir, role, index_arg = Path(argv[0]), argv[1], argv[2]
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    end_quietly_on_sigint()
    stop_prefixing: Callable[[], None] = lambda: None  # noqa: E731
    if index_arg.startswith("env:"):
        index = int(os.environ[index_arg[4:]])
        # Started by mpirun, whose outputs merge: each rank labels its own lines.
        stop_prefixing = prefix_own_output(f"{role}-{index}")
    else:
        index = int(index_arg)
    with open(workdir / PAYLOAD_FILE, "rb") as f:
        payload = pickle.load(f)
    for name, value in payload.get("env", {}).items():
        os.environ.setdefault(name, value)  # this child's own environment, before the target imports torch
    for entry in reversed(payload["sys_path"]):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    import cloudpickle

    try:
        target, kwargs = cloudpickle.loads(payload["target"])
    except Exception as exc:  # e.g. the function's module does not import here: report it like any failure
        outcome = _outcome_of(exc)
    else:
        outcome = run_target(target, kwargs, payload["raw_output_prefix"])
    if outcome[0] == "error":
        sys.stderr.write(outcome[3])
    _write(result_path(workdir, role, index), outcome)
    stop_prefixing()
    sys.stdout.flush()
    sys.stderr.flush()
    return 1 if outcome[0] == "error" else 0


def exit_now(code: int) -> NoReturn:
    """End this child once its outcome is written: run the exit handlers, flush, then skip the interpreter's
    teardown, as multiprocessing's children do. With torch and flytekit loaded that teardown takes about a
    second, and whoever waits for this process (torch's agent, mpirun, the launcher) would wait for it."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
