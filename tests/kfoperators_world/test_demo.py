"""`make demo`: the example workflow runs with `pyflyte run` (local, real topologies) and prints its metrics."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


@pytest.mark.first
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="the demo's MPIJob needs OpenMPI (make system-deps)")
def test_demo_trains_evaluates_and_prints_the_final_metrics() -> None:
    pyflyte = Path(sys.executable).parent / "pyflyte"
    env = {k: v for k, v in os.environ.items() if k != "KUBEJOBS_LOCAL_WORLD"}  # the demo's configs decide
    run = subprocess.run(
        [str(pyflyte), "run", "examples/demo.py", "demo"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    out = run.stdout
    # DDP over 2 local processes, both ranks logging
    assert "[master-0] rank 0/2 epoch 0" in out and "[worker-0] rank 1/2 epoch 0" in out
    accuracy = float(re.search(r"held-out accuracy ([0-9.]+)", out).group(1))  # type: ignore[union-attr]
    assert accuracy > 0.9  # the two half-moons are learnable by the tiny MLP
    assert "TFJob chief: chief:0 sees cluster chief=1, ps=1, worker=2" in out
    assert "MPIJob launcher: rank 0 of 2" in out
