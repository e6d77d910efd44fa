"""The generic local-world launcher: start one child process per member, stream their logs with a
``[role-index]`` prefix, stop everything on the first failure or Ctrl-C, return one member's result.

It knows nothing about PyTorch, TensorFlow or MPI: :mod:`.world_plan` turns a job config into a
:class:`WorldPlan` (members and their environments), and :mod:`.world_child` is what each child runs.

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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Optional

from flytekit.exceptions.user import FlyteRecoverableException
from flytekitplugins.kubejobs.codepath import code_root

from .world_child import PAYLOAD_FILE, RANK_ENV, adopt_decks, result_path

__all__ = [
    "CHILD_MODULE",
    "LocalWorldError",
    "Member",
    "RecoverableLocalWorldError",
    "WorldPlan",
    "launch",
    "read_outcome",
    "write_payload",
]

CHILD_MODULE = "flytekitplugins.kfoperators.world_main"
#: Seconds between SIGTERM and SIGKILL when the world is stopped.
GRACE_SECONDS = 5.0
_TAIL_LINES = 30
_RANK_LABEL = re.compile(r"\[([a-z]+-\d+)\] ")
_MPIRUN_HELP = (
    "mpirun was not found on PATH; local MPIJob/HorovodJob worlds need OpenMPI. Install it with "
    "`sudo apt-get install openmpi-bin` (Debian/Ubuntu; `make system-deps` in this repository), "
    "`brew install open-mpi` (macOS) or `conda install -c conda-forge openmpi`, or run with "
    "KUBEJOBS_LOCAL_WORLD=1 to call the task once, in-process."
)


@dataclass(frozen=True)
class Member:
    """One process of the world: its role, index within the role and the environment the operator
    would give its pod (added on top of the parent's environment)."""

    role: str
    index: int
    env: Mapping[str, str]

    @property
    def name(self) -> str:
        return f"{self.role}-{self.index}"


@dataclass(frozen=True)
class WorldPlan:
    """What to start. ``output_from`` names the member whose return value is the task's output; ``None``
    means "the one member that returned a value" (the others raise ``IgnoreOutputs``, as elastic nodes do).
    With ``mpirun``, one ``mpirun -np <len(members)>`` process starts every member; ``common_env`` is given
    to it (mpirun passes its environment on to the ranks).

    As the operator decides (a PyTorchJob succeeds with its master, a TFJob with its chief), the world is done
    once ``output_from`` has returned its value: the other members are stopped (parameter servers never exit
    by themselves), and a member failing after that point (e.g. losing the store rank 0 hosted) is ignored.
    Under mpirun, mpirun's exit status decides, as the launcher's does for an MPIJob.

    ``ranks_label_lines``: the ranks the members start (MPI ranks, elastic workers) label their own lines
    ``[rank-N]``; the launcher shows one prefix for them (``[rank-N]`` under mpirun, ``[worker-0/rank-N]``
    for a rank of an elastic node) instead of adding its own in front of theirs."""

    kind: str
    members: tuple[Member, ...]
    output_from: Optional[str]
    mpirun: bool = False
    common_env: Mapping[str, str] = field(default_factory=dict)
    ranks_label_lines: bool = False

    @property
    def size(self) -> int:
        return len(self.members)


class LocalWorldError(RuntimeError):
    """A member of a local world failed; names its role and index and carries its stderr tail."""

    def __init__(self, message: str, *, role: str, index: int, exit_code: Optional[int], stderr_tail: str) -> None:
        super().__init__(message)
        self.role, self.index, self.exit_code, self.stderr_tail = role, index, exit_code, stderr_tail


class RecoverableLocalWorldError(FlyteRecoverableException):  # type: ignore[misc]
    """The failed member raised a ``FlyteRecoverableException``: the task stays retryable."""

    def __init__(self, message: str, *, role: str, index: int, exit_code: Optional[int], stderr_tail: str) -> None:
        super().__init__(message)
        self.role, self.index, self.exit_code, self.stderr_tail = role, index, exit_code, stderr_tail


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


def _import_roots(target: Any) -> list[str]:
    """Directories from which the task function's module imports by name in a fresh interpreter."""
    roots = (code_root(obj) for obj in (target, getattr(target, "fn", None)))
    return [root for root in roots if root is not None]


def write_payload(
    workdir: Path, target: Any, kwargs: Mapping[str, Any], env: Optional[Mapping[str, str]] = None
) -> None:
    """What every child of ``workdir`` runs: ``target(**kwargs)``; ``env`` entries a child sets for itself
    when absent (for children started by someone else: torch's agent passes only its own environment)."""
    import cloudpickle
    from flytekit import FlyteContextManager

    raw_output_prefix = FlyteContextManager.current_context().file_access.raw_output_prefix
    payload = {
        "env": dict(env or {}),
        "target": cloudpickle.dumps((target, dict(kwargs))),
        # "" (the working directory) made explicit: the child's own sys.path[0] is the child's location.
        "sys_path": [*_import_roots(target), *(p or os.getcwd() for p in sys.path)],
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
    message = (
        f"local {plan.kind} world: {role} {index} ({name}{rank}) failed: {cause}\n"
        f"--- last stderr lines of {name} ---\n{tail}"
    )
    kwargs: dict[str, Any] = {"role": role, "index": index, "exit_code": code, "stderr_tail": tail}
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
        exits: queue.Queue[tuple[str, int]] = queue.Queue()
        for proc in processes:
            threading.Thread(target=lambda p=proc: exits.put((p.name, p.popen.wait())), daemon=True).start()
        codes: dict[str, int] = {}
        failed: Optional[str] = None
        while len(codes) < len(processes) and failed is None:
            try:
                name, code = exits.get(timeout=0.5)  # a timeout so Ctrl-C reaches this thread promptly
            except queue.Empty:
                continue
            codes[name] = code
            # Under mpirun the launcher's exit status is the job's, as for an MPIJob.
            if not plan.mpirun and _output_returned(plan, workdir):
                if code != 0:
                    sys.stderr.write(f"[{name}] exited with code {code} after {plan.output_from} returned: ignored\n")
                break
            if code != 0:
                failed = name
        _stop(processes)
        if failed is not None:
            raise _failure(plan, workdir, failed, codes, tails)
        return _result(plan, workdir)
    finally:
        _stop(processes)  # no-op after a normal stop; the one that matters on KeyboardInterrupt
        shutil.rmtree(workdir, ignore_errors=True)


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
