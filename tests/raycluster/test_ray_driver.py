"""On the cluster the task is the Ray job's driver: `ray job submit` hands it the job's runtime env (the
config's runtime_env) through RAY_JOB_CONFIG_JSON_ENV_VAR and Ray merges it with the driver's ray.init env.
flytekitplugins-ray fails that merge when the user's runtime_env sets working_dir or env vars it also sets
(ray-sdk-and-kuberay.md §2.5); ours merges instead. The cluster-side path runs here for real: a subprocess
with the job config Ray itself would inject, in Flyte's task-execution mode, against a real Ray."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from flytekitplugins.raycluster.runtime_env import DRIVER_EXCLUDES, driver_runtime_env

SCRIPT = """
import os, sys
import ray
from flytekit import task
from flytekit.core.context_manager import ExecutionState, FlyteContextManager
from {module} import RayJobConfig, WorkerNodeConfig

RUNTIME_ENV = {runtime_env!r}

@ray.remote
def probe():
    import shipped_helper  # only importable if the working_dir reached the worker
    return shipped_helper.VALUE, os.environ.get("HF_HOME", "")

@task(task_config=RayJobConfig([WorkerNodeConfig("w", 1)], runtime_env=RUNTIME_ENV))
def driver() -> str:
    value, hf_home = ray.get(probe.remote())
    return f"{{value}}|{{hf_home}}"

ctx = FlyteContextManager.current_context()
state = ctx.execution_state.with_params(mode=ExecutionState.Mode.TASK_EXECUTION)
with FlyteContextManager.with_context(ctx.with_execution_state(state)):
    try:
        driver.pre_execute(None)
    except ValueError as e:
        print("PRE-EXECUTE-FAILED:", e)
        sys.exit(0)
    print("RESULT:", driver.execute())
    ray.shutdown()
"""


def run_driver(module: str, tmp_path: Path, runtime_env: dict[str, object]) -> str:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "shipped_helper.py").write_text("VALUE = 'shipped'\n")
    script = tmp_path / "driver_script.py"
    script.write_text(textwrap.dedent(SCRIPT.format(module=module, runtime_env=runtime_env)))
    # What `ray job submit --runtime-env-json` gives the entrypoint (KubeRay passes the config's runtime_env).
    env = {**os.environ, "RAY_JOB_CONFIG_JSON_ENV_VAR": json.dumps({"runtime_env": runtime_env})}
    env.pop("RAY_ADDRESS", None)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=code, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


@pytest.mark.slow
def test_user_working_dir_and_env_vars_merge_on_the_cluster(tmp_path: Path) -> None:
    runtime_env: dict[str, object] = {"working_dir": str(tmp_path / "code"), "env_vars": {"HF_HOME": "/data/hf"}}
    theirs = run_driver("flytekitplugins.ray", tmp_path, runtime_env)
    assert "PRE-EXECUTE-FAILED: Failed to merge the Job's runtime env" in theirs
    mine = run_driver("flytekitplugins.raycluster", tmp_path, runtime_env)
    assert "RESULT: shipped|/data/hf" in mine


@pytest.mark.slow
def test_the_working_directory_is_shipped_when_the_user_sets_only_env_vars(tmp_path: Path) -> None:
    mine = run_driver("flytekitplugins.raycluster", tmp_path, {"env_vars": {"HF_HOME": "/data/hf"}})
    assert "RESULT: shipped|/data/hf" in mine


def test_driver_env_adds_only_what_the_job_env_lacks() -> None:
    user = {"env_vars": {"A": "1", "B": "2"}, "pip": ["x"]}
    job = {"env_vars": {"A": "1"}, "pip": ["x"]}
    assert driver_runtime_env(user, job, "/app") == {
        "working_dir": "/app",
        "excludes": list(DRIVER_EXCLUDES),
        "env_vars": {"B": "2"},
    }


def test_driver_env_outside_a_ray_job_carries_the_whole_user_env() -> None:
    # e.g. `address=` pointing at an existing cluster: the user's runtime_env is applied by ray.init itself
    user = {"env_vars": {"A": "1"}, "excludes": ["data/"]}
    assert driver_runtime_env(user, None, "/app") == {
        "env_vars": {"A": "1"},
        "excludes": ["data/", *DRIVER_EXCLUDES],
        "working_dir": "/app",
    }
    assert user == {"env_vars": {"A": "1"}, "excludes": ["data/"]}


ADDRESS_SCRIPT = """
import os
import ray
from ray.cluster_utils import Cluster
from flytekit import task
from flytekitplugins.raycluster import RayJobConfig, WorkerNodeConfig

cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
try:
    @task(task_config=RayJobConfig([], address=cluster.address, runtime_env={"env_vars": {"HF_HOME": "/data/hf"}}))
    def on_existing_cluster() -> str:
        hf_home = ray.get(ray.remote(lambda: os.environ.get("HF_HOME", "")).remote())
        return f"{ray.get_runtime_context().gcs_address == cluster.address}|{hf_home}"

    print("RESULT:", on_existing_cluster())
finally:
    ray.shutdown()
    cluster.shutdown()
"""


@pytest.mark.slow
def test_a_local_run_with_address_connects_to_that_cluster_with_the_runtime_env(tmp_path: Path) -> None:
    script = tmp_path / "address_script.py"
    script.write_text(ADDRESS_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_JOB_CONFIG_JSON_ENV_VAR")}
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "RESULT: True|/data/hf" in out.stdout
