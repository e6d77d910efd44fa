"""Ray runtime environments: the check at construction and the driver's env on the cluster.

On KubeRay the task runs as the Ray job's driver. ``ray job submit`` already applied the config's
runtime_env as the job's env; Ray then merges whatever the driver passes to ``ray.init`` with it and refuses
any top-level key or env var set by both (``ValueError: Failed to merge the Job's runtime env``).
flytekitplugins-ray always passes ``working_dir`` + ``excludes``, so a user runtime_env with a
``working_dir`` breaks it. :func:`driver_runtime_env` passes only what the job's env lacks.

>>> driver_runtime_env({"env_vars": {"A": "1"}}, {"env_vars": {"A": "1"}}, "/app")
{'working_dir': '/app', 'excludes': ['script_mode.tar.gz', 'fast*.tar.gz', '.python_history']}
>>> driver_runtime_env({"working_dir": "s3://b/code.zip"}, {"working_dir": "s3://b/code.zip"}, "/app")
{}
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Optional

from flytekitplugins.kubejobs.wire.fields import check_json_object, check_str, check_str_map

__all__ = ["DRIVER_EXCLUDES", "check_runtime_env", "driver_runtime_env"]

# Fast-registration archives and shell history are not code workers need (flytekit#3140).
DRIVER_EXCLUDES = ("script_mode.tar.gz", "fast*.tar.gz", ".python_history")


def _check_str_keys(field: str, value: object) -> None:
    # json.dumps silently turns int keys into strings; a runtime env with them is a mistake.
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{field} keys must be str, got {key!r} ({type(key).__name__})")
            _check_str_keys(f"{field}[{key!r}]", item)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_str_keys(f"{field}[{i}]", item)


# The package-manager keys Ray allows at most one of, and the fields each one's dict form may have.
_INSTALLERS = {
    "pip": ("packages", "pip_check", "pip_install_options", "pip_version"),
    "uv": ("packages", "uv_version", "uv_check", "uv_pip_install_options"),
    "conda": None,
}


def _check_str_list(field: str, value: object) -> None:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise TypeError(f"{field} must be a list of str, got {value!r}")


def _check_packages(field: str, key: str, value: object) -> None:
    """``pip`` / ``uv``: a list of requirement strings, a requirements file path (pip), or a dict with
    ``packages`` and the options Ray knows; ``conda``: an environment name or an environment dict."""
    name = f"{field}[{key!r}]"
    if key == "conda":
        if not isinstance(value, (str, dict)):
            raise TypeError(f"{name} must be an environment name (str) or an environment dict, got {value!r}")
        return
    if isinstance(value, dict):
        unknown = sorted(set(value) - set(_INSTALLERS[key] or ()))
        if unknown:
            raise ValueError(f"{name} may only have the fields {', '.join(_INSTALLERS[key] or ())}, got {unknown}")
        if "packages" not in value:
            raise ValueError(f"{name} must have the field 'packages', got {value!r}")
        value = value["packages"]
        name = f"{name}['packages']"
    if isinstance(value, str) and key == "pip":
        return  # a requirements file, read where Ray installs the env
    _check_str_list(name, value)


def check_runtime_env(field: str, value: object) -> dict[str, Any]:
    """A JSON copy of ``value`` (tuples become lists), refusing what Ray's own ``RuntimeEnv()`` would
    refuse on the cluster: non-dicts, values JSON cannot carry, non-str ``env_vars`` values, a non-str
    ``working_dir``, ``pip``/``uv``/``conda`` of the wrong shape or more than one of them, ``excludes`` and
    ``py_modules`` that are not lists of str (a str would be read as a list of its characters)."""
    env = check_json_object(field, value)
    _check_str_keys(field, env)
    normalized: dict[str, Any] = json.loads(json.dumps(env))
    if "env_vars" in normalized:
        check_str_map(f"{field}['env_vars']", normalized["env_vars"])
    if "working_dir" in normalized:
        check_str(f"{field}['working_dir']", normalized["working_dir"])
    installers = [key for key in _INSTALLERS if key in normalized]
    if len(installers) > 1:
        raise ValueError(f"{field} may set only one of 'pip', 'uv' and 'conda', got {installers}")
    for key in installers:
        _check_packages(field, key, normalized[key])
    for key in ("excludes", "py_modules"):
        if key in normalized:
            _check_str_list(f"{field}[{key!r}]", normalized[key])
    return normalized


def driver_runtime_env(
    user_env: Optional[Mapping[str, Any]], job_env: Optional[Mapping[str, Any]], working_dir: str
) -> dict[str, Any]:
    """The runtime env the driver passes to ``ray.init`` on the cluster.

    Wanted: the user's env, plus ``working_dir`` (the task's code) and ``excludes`` unless the user set a
    ``working_dir`` (theirs wins). ``job_env`` is the env Ray injected for the job (None outside a Ray job):
    keys and env vars it already has are left out, so Ray's merge never conflicts; the job's value, which
    came from the same config, stays in effect.
    """
    wanted: dict[str, Any] = json.loads(json.dumps(dict(user_env or {})))
    if "working_dir" not in wanted:
        wanted["working_dir"] = working_dir
        excludes = [e for e in wanted.get("excludes", []) if e not in DRIVER_EXCLUDES]
        wanted["excludes"] = [*excludes, *DRIVER_EXCLUDES]
    if job_env is None:
        return wanted
    job_vars = job_env.get("env_vars") or {}
    out = {key: value for key, value in wanted.items() if key != "env_vars" and key not in job_env}
    env_vars = {key: value for key, value in (wanted.get("env_vars") or {}).items() if key not in job_vars}
    if env_vars:
        out["env_vars"] = env_vars
    return out
