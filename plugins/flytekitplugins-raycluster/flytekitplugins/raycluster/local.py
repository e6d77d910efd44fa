"""Starting Ray before a Ray task's function runs: a local Ray for local runs, the job's cluster on Flyte.

Local runs (``pyflyte run`` without ``--remote``, or calling the task) get a real, CPU-only Ray with the
config's runtime_env applied. It is started once and reused by the following Ray tasks of the process; a
task with a different ``runtime_env``/``address`` restarts it (Ray fixes a job's runtime env at
``ray.init``). A Ray the caller started is reused as is. Ray is shut down at process exit.

The local Ray's workers import the task's module by name (a remote function's arguments and results, and the
classes they use, are pickled by reference), and ``pyflyte run dir/file.py`` puts ``dir`` on ``sys.path`` only
while it loads the file. So the module's code root (:func:`flytekitplugins.kubejobs.codepath.code_root`) goes
on the workers' ``sys.path`` the way Ray puts the driver script's directory and the working directory there:
in the job config's driver sys.path (``JobConfig(_py_driver_sys_path=...)``, Ray 2.60). Nothing is copied,
unlike a ``working_dir`` or ``py_modules`` runtime env (they package and upload the tree), and nothing else
changes, unlike the public ``code_search_path``: it also switches Ray to loading functions from local modules,
and a function of a module the workers cannot import (one loaded from a file under another name) then never
reaches them and ``ray.get`` hangs.

A local Ray keeps its session files (logs, sockets, and for a ``pip`` runtime env a copy of the current
virtualenv: Ray clones the driver's virtualenv before installing into it) in a private temporary directory
that is removed when Ray is shut down, instead of leaving them under ``/tmp/ray``. Ray's own start-up notices
about token authentication are silenced (the token stays on: a local Ray still requires it), and the
variables ``ray.init`` sets in ``os.environ`` are taken out again: the caller's environment is left as it was.

``ray`` is imported here only, inside the functions.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import shutil
import tempfile
import threading
import warnings
from collections.abc import Iterable, Iterator
from types import ModuleType
from typing import Any, Optional

from .runtime_env import driver_runtime_env

__all__ = [
    "import_ray",
    "machine_cpus",
    "ensure_local_ray",
    "shutdown_local_ray",
    "job_runtime_env",
    "attach_to_job_cluster",
]

# Ray's own name for the env var through which `ray job submit` hands the job config to the driver.
_RAY_JOB_CONFIG_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"

_lock = threading.Lock()
# (address, runtime env as canonical JSON) of the Ray this module started, or None.
_started: Optional[tuple[Optional[str], str]] = None
# The code roots on its workers' path.
_started_roots: frozenset[str] = frozenset()
# The temporary directory holding the session files of the local Ray this module started.
_started_temp_dir: Optional[str] = None
_atexit_registered = False

# Ray's logger for its token-authentication notices.
_RAY_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"


class _DropTokenNotices(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (message.startswith("Token authentication is enabled") or "authentication token" in message)


@contextlib.contextmanager
def _quiet_ray_init() -> Iterator[None]:
    """Around ``ray.init``: drop Ray's token-auth notices, and put ``os.environ`` back as it was (ray.init
    sets ``RAY_AUTH_MODE``, ``RAY_USAGE_STATS_ENABLED`` and ``PYTHONBREAKPOINT`` in it).

    The driver keeps what those variables selected: Ray caches its config at init, and the processes it
    started got the variables at their start."""
    log = logging.getLogger(_RAY_AUTH_LOGGER)
    notices = _DropTokenNotices()
    before = dict(os.environ)
    log.addFilter(notices)
    try:
        yield
    finally:
        log.removeFilter(notices)
        for name in set(os.environ) - set(before):
            del os.environ[name]
        for name, value in before.items():
            if os.environ.get(name) != value:
                os.environ[name] = value


def _remove_temp_dir() -> None:
    global _started_temp_dir
    if _started_temp_dir is not None:
        shutil.rmtree(_started_temp_dir, ignore_errors=True)
        _started_temp_dir = None


def import_ray() -> ModuleType:
    """``import ray``, with an error naming the extra to install."""
    try:
        import ray
    except ImportError as e:
        raise ImportError("Ray tasks need the ray package to run: pip install 'flytekitplugins-raycluster[ray]'") from e
    return ray


def machine_cpus() -> int:
    """CPUs this process may use (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def _key(address: Optional[str], runtime_env: Optional[dict[str, Any]]) -> tuple[Optional[str], str]:
    return address, json.dumps(runtime_env or {}, sort_keys=True)


def ensure_local_ray(
    address: Optional[str],
    runtime_env: Optional[dict[str, Any]],
    *,
    num_cpus: Optional[int] = None,
    code_roots: Iterable[str] = (),
) -> None:
    """Make sure a Ray with ``runtime_env`` is initialized in this process.

    Without ``address`` a local Ray is started with ``min(num_cpus, machine CPUs)`` CPUs (all the
    machine's when ``num_cpus`` is None), no GPUs and ``code_roots`` on its workers' ``sys.path`` (a Ray
    we started without one of them is restarted with it); with one, Ray connects to that cluster.
    """
    global _started, _started_roots, _started_temp_dir, _atexit_registered
    ray = import_ray()
    key = _key(address, runtime_env)
    roots = frozenset(code_roots) if address is None else frozenset()
    with _lock:
        if ray.is_initialized():
            if _started == key and roots <= _started_roots:
                return
            if _started is None:
                if runtime_env:
                    warnings.warn(
                        "Ray was already initialized by the caller; the task's runtime_env is not applied to it",
                        UserWarning,
                        stacklevel=3,
                    )
                return
            ray.shutdown()  # ours, with another runtime env, address or code root
            _remove_temp_dir()
            if address is None:
                roots |= _started_roots  # the earlier tasks' modules stay importable
            _started, _started_roots = None, frozenset()
        kwargs: dict[str, Any] = {"runtime_env": runtime_env or None}
        if address is None:
            from ray.job_config import JobConfig

            cpus = machine_cpus() if num_cpus is None else max(1, min(num_cpus, machine_cpus()))
            # A short path: Ray's Unix sockets live under it (sun_path holds ~107 bytes).
            _started_temp_dir = tempfile.mkdtemp(prefix="kubejobs-ray-")
            kwargs.update(num_cpus=cpus, num_gpus=0, include_dashboard=False, _temp_dir=_started_temp_dir)
            if roots:
                kwargs["job_config"] = JobConfig(_py_driver_sys_path=sorted(roots))
        try:
            with _quiet_ray_init():
                ray.init(address=address, **kwargs)
        except BaseException:
            _remove_temp_dir()
            raise
        # Ray puts the working directory on its workers' path too, unless a working_dir replaces it.
        cwd = frozenset() if "working_dir" in (runtime_env or {}) else frozenset({os.path.abspath(os.curdir)})
        _started, _started_roots = key, roots | cwd
        if not _atexit_registered:
            atexit.register(shutdown_local_ray)
            _atexit_registered = True


def shutdown_local_ray() -> None:
    """Shut down the Ray this module started, if any (a caller's Ray is left alone)."""
    global _started, _started_roots
    with _lock:
        if _started is None:
            return
        _started, _started_roots = None, frozenset()
        import ray

        if ray.is_initialized():
            ray.shutdown()
        _remove_temp_dir()


def job_runtime_env() -> Optional[dict[str, Any]]:
    """The runtime env Ray injected for the job this process is the driver of (None outside a Ray job)."""
    raw = os.environ.get(_RAY_JOB_CONFIG_ENV)
    if not raw:
        return None
    env = json.loads(raw).get("runtime_env")
    return dict(env) if isinstance(env, dict) else {}


def attach_to_job_cluster(address: Optional[str], runtime_env: Optional[dict[str, Any]]) -> None:
    """On Flyte: connect to the job's Ray cluster and ship the working directory to its workers,
    merged with the job's runtime env instead of conflicting with it."""
    ray = import_ray()
    if ray.is_initialized():
        return
    env = driver_runtime_env(runtime_env, job_runtime_env(), os.getcwd())
    ray.init(address=address, runtime_env=env or None)
