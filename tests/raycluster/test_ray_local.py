"""Ray tasks run locally on a real local Ray (CPU-only, bounded to the machine) with the config's
runtime_env applied, reused across the tasks of one run, restarted only when the runtime env changes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray
from flytekit import task, workflow
from flytekitplugins.raycluster import RayJobConfig, WorkerNodeConfig
from flytekitplugins.raycluster.local import ensure_local_ray, machine_cpus, shutdown_local_ray

pytestmark = pytest.mark.slow

ENV = {"env_vars": {"HF_HOME": "/data/hf", "RAYCLUSTER_TEST": "fan-out"}}
CONFIG = RayJobConfig(worker_node_config=[WorkerNodeConfig("workers", replicas=2)], runtime_env=ENV)


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    # One local Ray for the module, started the way the plugin starts it, so tasks with ENV reuse it.
    assert not ray.is_initialized()
    ensure_local_ray(None, ENV, num_cpus=2)
    yield
    shutdown_local_ray()
    assert not ray.is_initialized()


@ray.remote
def square_with_env(x: int) -> tuple[int, str, str, int]:
    return x * x, os.environ.get("HF_HOME", ""), os.environ.get("RAYCLUSTER_TEST", ""), os.getpid()


@task(task_config=CONFIG)
def fan_out(n: int) -> list[str]:
    results = ray.get([square_with_env.remote(i) for i in range(n)])
    assert [r[0] for r in results] == [i * i for i in range(n)]
    pids = {r[3] for r in results}
    return [*sorted({f"{r[1]}|{r[2]}" for r in results}), f"driver={os.getpid()}", f"workers={len(pids)}"]


@task(task_config=CONFIG)
def node_id() -> str:
    return str(ray.get_runtime_context().get_node_id())


@workflow
def two_ray_tasks(n: int) -> str:
    fan_out(n=n)
    return node_id()


def test_remote_functions_see_the_runtime_env_and_the_parent_env_is_untouched(local_ray: None) -> None:
    before = dict(os.environ)
    out = fan_out(n=8)
    assert out[0] == "/data/hf|fan-out" and len(out) == 3
    assert out[1] == f"driver={os.getpid()}"  # the task body ran here, the squares in Ray worker processes
    assert int(out[2].removeprefix("workers=")) >= 1 and str(os.getpid()) not in out[2]
    assert dict(os.environ) == before


def test_local_ray_is_cpu_only_and_bounded_to_the_machine(local_ray: None) -> None:
    fan_out(n=1)
    resources = ray.cluster_resources()
    assert 1 <= resources["CPU"] <= machine_cpus()
    assert resources.get("GPU", 0) == 0


def test_ray_is_reused_across_the_tasks_of_a_run(local_ray: None) -> None:
    first = node_id()
    assert two_ray_tasks(n=2) == first
    assert node_id() == first


@task(task_config=RayJobConfig([WorkerNodeConfig("w", 1)], runtime_env={"env_vars": {"HF_HOME": "/other"}}))
def other_env() -> str:
    return str(ray.get(ray.remote(lambda: os.environ.get("HF_HOME", "")).remote()))


def test_a_task_with_another_runtime_env_gets_it(local_ray: None) -> None:
    first = node_id()
    assert other_env() == "/other"
    # and the next ENV task gets ENV back
    assert fan_out(n=2)[0] == "/data/hf|fan-out"
    assert node_id() != first


def test_a_missing_ray_names_the_extra(tmp_path: Path) -> None:
    script = tmp_path / "no_ray.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys
            sys.modules["ray"] = None  # what `import ray` sees when ray is not installed
            from flytekit import task
            from flytekitplugins.raycluster import RayJobConfig, WorkerNodeConfig

            @task(task_config=RayJobConfig([WorkerNodeConfig("w", 1)]))
            def t() -> int:
                return 1

            try:
                t()
            except ImportError as e:
                print("IMPORT-ERROR:", e)
            """
        )
    )
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert "IMPORT-ERROR:" in out.stdout, out.stderr
    assert "pip install 'flytekitplugins-raycluster[ray]'" in out.stdout


PYFLYTE_MODULE = """
import os

import ray
from flytekit import task, workflow
from flytekitplugins.raycluster import RayJobConfig, WorkerNodeConfig


@ray.remote
def read_env(i: int) -> str:
    return os.environ.get("FROM_RUNTIME_ENV", "missing")


@task(task_config=RayJobConfig([WorkerNodeConfig("w", 1)], runtime_env={"env_vars": {"FROM_RUNTIME_ENV": "yes"}}))
def fan(n: int) -> str:
    return ",".join(sorted(set(ray.get([read_env.remote(i) for i in range(n)]))))


@workflow
def wf(n: int = 3) -> str:
    return fan(n=n)
"""


def test_pyflyte_run_without_remote_runs_on_a_local_ray(tmp_path: Path) -> None:
    (tmp_path / "ray_wf.py").write_text(PYFLYTE_MODULE)
    pyflyte = Path(sys.executable).with_name("pyflyte")
    out = subprocess.run(
        [str(pyflyte), "run", "ray_wf.py", "wf", "--n", "4"], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "yes" in out.stdout and "missing" not in out.stdout


EXIT_SCRIPT = """
import atexit

import ray
from flytekit import task
from flytekitplugins.raycluster import RayJobConfig, WorkerNodeConfig

# atexit runs handlers last-registered first: this probe runs after the plugin's handler (registered when the
# task starts Ray) and before Ray's own (registered when ray was imported), so it sees what the plugin did.
atexit.register(lambda: print("AT-EXIT ray initialized:", ray.is_initialized(), flush=True))


@task(task_config=RayJobConfig([WorkerNodeConfig("w", 1)]))
def one() -> int:
    return int(ray.get(ray.remote(lambda: 1).remote()))


print("RESULT:", one(), ray.is_initialized())
"""


def test_the_local_ray_is_shut_down_at_process_exit(tmp_path: Path) -> None:
    script = tmp_path / "exit_script.py"
    script.write_text(EXIT_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_JOB_CONFIG_JSON_ENV_VAR")}
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "RESULT: 1 True" in out.stdout  # still up after the task: reused by the run's next Ray task
    assert "AT-EXIT ray initialized: False" in out.stdout


ENV_SCRIPT = """
import os

import ray
from flytekit import task
from flytekitplugins.raycluster import RayJobConfig, WorkerNodeConfig


@task(task_config=RayJobConfig([WorkerNodeConfig("w", 1)]))
def one() -> int:
    return int(ray.get(ray.remote(lambda: 1).remote()))


before = dict(os.environ)
print("RESULT:", one())
print("ENV UNCHANGED:", dict(os.environ) == before, sorted(set(os.environ) ^ set(before)))
print("SESSION FILES:", sorted(n for n in os.listdir(os.environ["TMPDIR"]) if "ray" in n))
"""


def test_a_local_run_cleans_its_session_files_and_keeps_the_environment(tmp_path: Path) -> None:
    """Ray's session files (logs, sockets, a pip runtime env's virtualenv copy) live in a private temporary
    directory while the run lasts and are gone after it; Ray's token notices are not printed; the
    process environment is as it was (ray.init sets RAY_AUTH_MODE in it)."""
    # A short $TMPDIR: Ray's Unix socket paths under it must fit in 107 bytes.
    tmp = Path(tempfile.mkdtemp(prefix="kj-", dir="/tmp"))
    (tmp_path / "env_script.py").write_text(ENV_SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")} | {"TMPDIR": str(tmp)}
    out = subprocess.run(
        [sys.executable, "env_script.py"], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "RESULT: 1" in out.stdout
    assert "ENV UNCHANGED: True []" in out.stdout
    session = [line for line in out.stdout.splitlines() if line.startswith("SESSION FILES:")]
    assert len(session) == 1 and session[0].startswith("SESSION FILES: ['kubejobs-ray-") and "'ray'" not in session[0]
    try:
        # removed at exit, and nothing under $TMPDIR/ray (Ray's default) either; flytekit's own dirs may stay
        assert [n for n in os.listdir(tmp) if "ray" in n] == []
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    assert "Token authentication" not in out.stderr and "authentication token" not in out.stderr
