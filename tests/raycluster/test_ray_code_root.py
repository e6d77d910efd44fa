"""A task file in a plain directory (no package), run with `pyflyte run` from another working directory: the
local Ray's workers import it by name, as a pod imports it from its code root. Without the module's root on
the workers' path, unpickling the remote function's argument (a class of that module) fails there with
``ModuleNotFoundError``, as it did before the fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

PLAIN_MODULE = """
from dataclasses import dataclass

import ray
from flytekit import task, workflow
from flytekitplugins.raycluster import RayJobConfig, WorkerNodeConfig


@dataclass
class Point:
    x: int


def double(x: int) -> int:
    return 2 * x


@ray.remote
def score(point: Point) -> tuple[int, str]:
    return double(point.x), __name__


@task(task_config=RayJobConfig([WorkerNodeConfig("w", 1)]))
def fan(n: int) -> str:
    results = ray.get([score.remote(Point(i)) for i in range(n)])
    return f"sum={sum(v for v, _ in results)} modules={sorted({m for _, m in results})}"


@workflow
def wf(n: int = 4) -> str:
    return fan(n=n)
"""


def test_a_remote_function_of_a_plain_directory_module_runs_on_local_ray_workers(tmp_path: Path) -> None:
    code, elsewhere = tmp_path / "plain dir", tmp_path / "elsewhere"
    code.mkdir()
    elsewhere.mkdir()  # not the code's directory: Ray's own "add the working directory" does not help
    (code / "plain_tasks.py").write_text(PLAIN_MODULE)
    pyflyte = Path(sys.executable).with_name("pyflyte")
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_JOB_CONFIG_JSON_ENV_VAR", "PYTHONPATH")}
    out = subprocess.run(
        [str(pyflyte), "run", str(code / "plain_tasks.py"), "wf", "--n", "4"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=elsewhere,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    # 2 * (0 + 1 + 2 + 3), computed in Ray workers that imported the module by its own name
    assert "sum=12 modules=['plain_tasks']" in out.stdout
    assert "ModuleNotFoundError" not in out.stderr
