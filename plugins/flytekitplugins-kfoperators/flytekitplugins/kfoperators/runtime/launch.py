"""The generic local-world launcher: start one child process per member, stream their logs with a
``[role-index]`` prefix, stop everything on the first failure or Ctrl-C, return one member's result.

It knows nothing about PyTorch, TensorFlow or MPI: :mod:`.plan` turns a job config into a
:class:`~.plan.WorldPlan` (members and their environments), and :mod:`.child` is what each child runs.

>>> from .plan import Member, WorldPlan
>>> plan = WorldPlan("Demo", (Member("worker", 0, {}), Member("worker", 1, {})), output_from="worker-0")
>>> [m.name for m in plan.members], plan.size
(['worker-0', 'worker-1'], 2)
"""

from __future__ import annotations

import collections
import contextlib
import os
import pickle
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any, Optional

from flytekitplugins.kubejobs.codepath import code_root

from .child import PAYLOAD_FILE, RANK_ENV, adopt_decks, dumps, result_path
from .errors import LocalWorldError, RecoverableLocalWorldError
from .plan import Member, WorldPlan

__all__ = [
    "CHILD_MODULE",
    "PEER_GRACE_SECONDS",
    "import_path",
    "interrupted",
    "launch",
    "read_outcome",
    "write_payload",
]

CHILD_MODULE = "flytekitplugins.kfoperators.runtime.child_main"
#: Seconds between SIGTERM and SIGKILL when the world is stopped.
GRACE_SECONDS = 5.0
#: Seconds the other members get to end by themselves once the output member has returned: they usually finish
#: the same work a moment later, and their last lines belong to the user.
PEER_GRACE_SECONDS = 10.0
_TAIL_LINES = 30
_RANK_LABEL = re.compile(r"\[([a-z]+-\d+)\] ")
_MPIRUN_HELP = (
    "mpirun was not found on PATH; local MPIJob/HorovodJob worlds need OpenMPI. Install it with "
    "`sudo apt-get install openmpi-bin` (Debian/Ubuntu; `make system-deps` in this repository), "
    "`brew install open-mpi` (macOS) or `conda install -c conda-forge openmpi`, or run with "
    "KUBEJOBS_LOCAL_WORLD=1 to call the task once, in-process."
)


def mpirun_or_explain() -> str:
    path = shutil.which("mpirun")
    if path is None:
        raise RuntimeError(_MPIRUN_HELP)
    return path


class _Process:
    """One started child (a member, or mpirun for all members) and its log readers."""

    def __init__(self, name: str, popen: subprocess.Popen[bytes], plan: WorldPlan, tails: dict[str, Any]) -> None:
        self.name, self.popen, self.plan, self.tails = name, popen, plan, tails
        self.stopped = False
        self.readers = [
            threading.Thread(target=self._pump, args=(popen.stdout, sys.stdout, False), daemon=True),
            threading.Thread(target=self._pump, args=(popen.stderr, sys.stderr, True), daemon=True),
        ]
        for reader in self.readers:
            reader.start()

    def _pump(self, source: Optional[IO[bytes]], sink: IO[str], is_stderr: bool) -> None:
        assert source is not None
        for raw in iter(source.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            owner, own_text, label = self.name, line, self.name
            labelled = _RANK_LABEL.match(line) if self.plan.ranks_label_lines else None
            if labelled:  # a rank labelled its own line: mpirun has no name of its own to add
                own_text = line[labelled.end() :]
                label = labelled.group(1) if self.plan.mpirun else f"{self.name}/{labelled.group(1)}"
                owner = labelled.group(1) if self.plan.mpirun else self.name
            text = f"[{label}] {own_text}"
            if is_stderr:
                self.tails.setdefault(owner, collections.deque(maxlen=_TAIL_LINES)).append(own_text)
            sink.write(text + "\n")
            sink.flush()
        source.close()


def import_path(target: Any) -> list[str]:
    """``sys.path`` for a fresh interpreter that imports ``target``'s module as this process did: the module's
    root first (``pyflyte run`` had it on the path only while loading the file), then this process's path, with
    "" (the working directory) made explicit, since a child's own ``sys.path[0]`` is the child's location."""
    roots = (code_root(obj) for obj in (target, getattr(target, "fn", None)))
    return [*(root for root in roots if root is not None), *(p or os.getcwd() for p in sys.path)]


def write_payload(
    workdir: Path, target: Any, kwargs: Mapping[str, Any], env: Optional[Mapping[str, str]] = None
) -> None:
    """What every child of ``workdir`` runs: ``target(**kwargs)``; ``env`` entries a child sets for itself
    when absent (for children started by someone else: torch's agent passes only its own environment)."""
    from flytekit import FlyteContextManager

    raw_output_prefix = FlyteContextManager.current_context().file_access.raw_output_prefix
    payload = {
        "env": dict(env or {}),
        "target": dumps((target, dict(kwargs))),
        "sys_path": import_path(target),
        "raw_output_prefix": raw_output_prefix,
    }
    (workdir / PAYLOAD_FILE).write_bytes(pickle.dumps(payload))


def _start(plan: WorldPlan, workdir: Path, tails: dict[str, Any]) -> list[_Process]:
    child = [sys.executable, "-m", CHILD_MODULE, str(workdir)]
    base_env = dict(os.environ)  # a copy: the parent's environment is never touched
    specs: list[tuple[str, list[str], dict[str, str]]]
    if plan.mpirun:
        mpirun = mpirun_or_explain()
        role = plan.members[0].role
        argv = [
            mpirun,
            "--oversubscribe",
            "--allow-run-as-root",
            "-np",
            str(plan.size),
            *child,
            role,
            f"env:{RANK_ENV}",
        ]
        specs = [("mpirun", argv, {**base_env, **plan.common_env})]
    else:
        specs = [
            (m.name, [*child, m.role, str(m.index)], {**base_env, **plan.common_env, **m.env}) for m in plan.members
        ]
    processes: list[_Process] = []
    try:
        for name, argv, env in specs:
            popen = subprocess.Popen(
                argv,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: stopping it also stops what it started
            )
            processes.append(_Process(name, popen, plan, tails))
    except BaseException:
        _stop(processes)
        raise
    return processes


def _stop(processes: list[_Process]) -> None:
    """SIGTERM every process group still alive, SIGKILL what remains after the grace period. Once only per
    process: a group id is never signalled after its processes were reaped (the id could be reused)."""
    processes = [proc for proc in processes if not proc.stopped]
    for proc in processes:
        if proc.popen.poll() is None:
            _signal_group(proc.popen.pid, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_SECONDS
    for proc in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
    for proc in processes:
        # Also reaps grandchildren left in the group after their leader exited.
        _signal_group(proc.popen.pid, signal.SIGKILL)
        proc.popen.wait()
        proc.stopped = True
        for reader in proc.readers:
            reader.join(timeout=GRACE_SECONDS)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def read_outcome(workdir: Path, member: Member) -> Optional[tuple[Any, ...]]:
    path = result_path(workdir, member.role, member.index)
    if not path.exists():
        return None
    import cloudpickle

    outcome: tuple[Any, ...] = cloudpickle.loads(path.read_bytes())
    return outcome


def _failure(
    plan: WorldPlan, workdir: Path, first_failed: str, codes: dict[str, int], tails: dict[str, Any]
) -> Exception:
    """The error for the member that failed first: an exception's own timestamp beats exit order, since a
    peer of the culprit often fails too (a closed connection) before we stop it."""
    outcomes = {m.name: read_outcome(workdir, m) for m in plan.members}
    errors = {name: o for name, o in outcomes.items() if o is not None and o[0] == "error"}
    if errors:
        name = min(errors, key=lambda n: errors[n][5])
    elif first_failed in outcomes:
        name = first_failed
    else:  # mpirun itself failed: blame the first rank that has no result
        name = next((n for n, o in outcomes.items() if o is None), first_failed)
    member = next((m for m in plan.members if m.name == name), None)
    role, index = (member.role, member.index) if member else (name, 0)
    code = codes.get(name, codes.get("mpirun"))
    tail = "\n".join(tails.get(name, ()))
    outcome = errors.get(name)
    cause = outcome[2] if outcome else f"exited with code {code} without reporting a result"
    rank = f", RANK={member.env['RANK']}" if member and "RANK" in member.env else ""
    # The member printed its traceback (live, under its prefix): the message names it and the user's line.
    where = f"\n  at {outcome[6]}" if outcome and len(outcome) > 6 and outcome[6] else ""
    message = f"local {plan.kind} world: {role} {index} ({name}{rank}) failed: {cause}{where}"
    kwargs: dict[str, Any] = {"role": role, "index": index, "exit_code": code, "stderr_tail": tail}
    kwargs["timestamp"] = float(outcome[5]) if outcome else None  # when the member raised (time.time())
    error: Exception
    if outcome and outcome[4]:
        error = RecoverableLocalWorldError(message, **kwargs)
    else:
        error = LocalWorldError(message, **kwargs)
    if outcome and isinstance(outcome[1], BaseException):
        error.__cause__ = outcome[1]
    return error


def launch(plan: WorldPlan, target: Any, kwargs: Mapping[str, Any]) -> Any:
    """Run ``target(**kwargs)`` in every member of ``plan``; return the designated member's value.

    Raises :class:`LocalWorldError` (or :class:`RecoverableLocalWorldError`) naming the member that failed
    first; on any exit (success, failure, KeyboardInterrupt) every started process group is gone.
    """
    workdir = Path(tempfile.mkdtemp(prefix="kubejobs-world-"))
    tails: dict[str, Any] = {}
    processes: list[_Process] = []
    try:
        write_payload(workdir, target, kwargs)
        processes = _start(plan, workdir, tails)
        with ctrl_c_interrupts():
            failed = _wait(plan, workdir, processes)
        _stop(processes)
        if failed is not None:
            raise _failure(plan, workdir, failed, {p.name: p.popen.returncode for p in processes}, tails)
        return _result(plan, workdir)
    except KeyboardInterrupt:
        _stop(processes)
        raise interrupted(f"the {plan.size} processes of the local {plan.kind} world") from None
    finally:
        _stop(processes)  # no-op after a normal stop
        shutil.rmtree(workdir, ignore_errors=True)


@contextlib.contextmanager
def ctrl_c_interrupts() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt in the block (flytekit's own SIGINT handler exits with code 1 without a
    word); the caller's handler is back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, saved)


def interrupted(stopped: str) -> SystemExit:
    """Ctrl-C: one line saying what was stopped, and the shell's exit code for SIGINT (128 + 2). A SystemExit,
    because a KeyboardInterrupt becomes click's "Aborted!" and exit code 1 under ``pyflyte run``."""
    sys.stdout.flush()
    sys.stderr.write(f"\ninterrupted: stopped {stopped}\n")
    sys.stderr.flush()
    return SystemExit(130)


def _wait(plan: WorldPlan, workdir: Path, processes: list[_Process]) -> Optional[str]:
    """Wait until the world is done; the name of the member that failed first, or None."""
    exits: queue.Queue[tuple[str, int]] = queue.Queue()
    for proc in processes:
        threading.Thread(target=lambda p=proc: exits.put((p.name, p.popen.wait())), daemon=True).start()
    persistent = {m.name for m in plan.members if m.runs_until_stopped}
    ended: set[str] = set()
    peers_deadline: Optional[float] = None  # set once the output is back
    while len(ended) < len(processes):
        try:
            name, code = exits.get(timeout=0.5)  # a timeout so Ctrl-C reaches this thread promptly
        except queue.Empty:
            if peers_deadline is not None and time.monotonic() > peers_deadline:
                return None
            continue
        ended.add(name)
        # Under mpirun the launcher's exit status is the job's, as for an MPIJob.
        if peers_deadline is None and not plan.mpirun and _output_returned(plan, workdir):
            peers_deadline = time.monotonic() + PEER_GRACE_SECONDS
            _stop([p for p in processes if p.name in persistent])
            ended |= persistent
        elif peers_deadline is None and code != 0:
            return name
        if peers_deadline is not None and code != 0 and name not in persistent:
            sys.stderr.write(f"[{name}] exited with code {code} after {plan.output_from} returned: ignored\n")
    return None


def _output_returned(plan: WorldPlan, workdir: Path) -> bool:
    member = next((m for m in plan.members if m.name == plan.output_from), None)
    outcome = read_outcome(workdir, member) if member is not None else None
    return outcome is not None and outcome[0] == "ok"


def _result(plan: WorldPlan, workdir: Path) -> Any:
    outcomes = [(m, read_outcome(workdir, m)) for m in plan.members]
    if plan.output_from is not None:
        for member, outcome in outcomes:
            if member.name == plan.output_from and outcome is not None and outcome[0] == "ok":
                return adopt_decks(outcome)
        raise LocalWorldError(
            f"local {plan.kind} world: {plan.output_from} exited cleanly but reported no result",
            role=plan.output_from,
            index=0,
            exit_code=0,
            stderr_tail="",
        )
    values = [outcome for _, outcome in outcomes if outcome is not None and outcome[0] == "ok"]
    if len(values) != 1:
        raise LocalWorldError(
            f"local {plan.kind} world: expected exactly one member to return the output, got {len(values)}",
            role=plan.members[0].role,
            index=0,
            exit_code=0,
            stderr_tail="",
        )
    return adopt_decks(values[0])
