"""``RayJobConfig(runtime_env=...)`` refuses at construction what Ray's own ``RuntimeEnv()`` refuses on the
cluster (where the submitter or the driver would fail the job), and accepts what it accepts. The expected
outcome of every row comes from Ray itself."""

from __future__ import annotations

from typing import Any

import pytest
from flytekitplugins.raycluster import RayJobConfig, WorkerNodeConfig
from ray.runtime_env import RuntimeEnv

ENVS: list[dict[str, Any]] = [
    {"pip": ["numpy==2.1", "pandas"]},
    {"pip": []},
    {"pip": {"packages": ["numpy"], "pip_check": False, "pip_version": "==24.0"}},
    {"pip": {"packages": ["numpy"], "pip_install_options": ["--no-cache-dir"]}},
    {"pip": 1},
    {"pip": {}},
    {"pip": {"packages": ["a"], "bogus": 1}},
    {"pip": ["numpy", None]},
    {"pip": [1]},
    {"pip": ["a"], "conda": {"dependencies": ["b"]}},
    {"uv": ["a"], "pip": ["b"]},
    {"uv": ["requests"]},
    {"uv": {"packages": ["requests"]}},
    {"uv": 1},
    {"conda": "my-env"},
    {"conda": {"dependencies": ["numpy"]}},
    {"conda": 1},
    {"conda": ["numpy"]},
    {"excludes": ["*.ckpt", ".git"]},
    {"excludes": "*.ckpt"},
    {"excludes": [1]},
    {"py_modules": ["s3://bucket/mod.zip"]},
    {"py_modules": "mod"},
    {"py_modules": [1]},
    {"working_dir": 1},
    {"env_vars": {"A": "1"}},
    {"env_vars": {"A": 1}},
]


def _ray_refuses(env: dict[str, Any]) -> bool:
    try:
        RuntimeEnv(**env)
    except (TypeError, ValueError):
        return True
    return False


@pytest.mark.parametrize("env", ENVS, ids=[repr(e) for e in ENVS])
def test_runtime_env_is_refused_exactly_when_ray_refuses_it(env: dict[str, Any]) -> None:
    if _ray_refuses(env):
        with pytest.raises((TypeError, ValueError)) as caught:
            RayJobConfig([WorkerNodeConfig("w", 1)], runtime_env=env)
        assert "runtime_env" in str(caught.value)
        # the message names the key at fault
        assert any(f"'{key}'" in str(caught.value) for key in env), caught.value
    else:
        assert RayJobConfig([WorkerNodeConfig("w", 1)], runtime_env=env).runtime_env == env


def test_a_pip_requirements_file_is_left_to_the_cluster() -> None:
    # Ray reads a str `pip` as a requirements file where it installs the env (the head or the submitter),
    # so whether it exists is only known there.
    cfg = RayJobConfig([WorkerNodeConfig("w", 1)], runtime_env={"pip": "/app/requirements.txt"})
    assert cfg.runtime_env == {"pip": "/app/requirements.txt"}
