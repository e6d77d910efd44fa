"""Local worlds with real processes: gloo across PyTorch ranks, TF_CONFIG per TFJob member, mpirun ranks,
and an Elastic job of two nodes. Expected values are the operators' contracts (Kubeflow Training Operator:
RANK 0 is the master, workers follow; TF_CONFIG = cluster spec without the evaluator + task type/index +
"environment": "cloud"), not this code's output."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
from pathlib import Path

import pytest
from flytekit.exceptions.user import FlyteRecoverableException
from flytekitplugins.kfoperators.runtime.world import RecoverableLocalWorldError

from .conftest import alive
from .world_tasks import (
    Collector,
    all_reduce,
    decks_of_a_world,
    elastic_all_reduce,
    elastic_one_node,
    mpi_exit_handlers,
    mpi_hello,
    tf_members,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("full_world"),
    pytest.mark.filterwarnings("ignore:Failed to initialize NumPy:UserWarning"),
]


def test_gloo_all_reduce_over_two_local_pytorch_ranks(capfd: pytest.CaptureFixture[str]) -> None:
    collector = Collector(expected=2)
    # ranks contribute 10 + 0 and 10 + 1; the master (rank 0) gives the task output
    assert all_reduce(value=10, port=collector.port) == [0, 2, 21]
    reports = collector.wait()
    assert sorted(r["rank"] for r in reports) == ["0", "1"]
    out = capfd.readouterr().out
    # live logs are prefixed with role and index
    assert "[master-0] rank 0 sum 21" in out and "[worker-0] rank 1 sum 21" in out
    # every process of the world has ended when the task returns
    assert not [r["pid"] for r in reports if alive(r["pid"])]


def test_tf_config_of_a_one_chief_one_ps_two_worker_job() -> None:
    collector = Collector(expected=4)
    chief_view = json.loads(tf_members(port=collector.port))
    configs = {(c["task"]["type"], c["task"]["index"]): c for c in (r["tf_config"] for r in collector.wait())}
    assert sorted(configs) == [("chief", 0), ("ps", 0), ("worker", 0), ("worker", 1)]
    assert chief_view == configs[("chief", 0)]  # the task output is the chief's
    cluster = chief_view["cluster"]
    assert {role: len(addresses) for role, addresses in cluster.items()} == {"chief": 1, "ps": 1, "worker": 2}
    addresses = [a for group in cluster.values() for a in group]
    assert len(set(addresses)) == 4 and all(re.fullmatch(r"127\.0\.0\.1:\d+", a) for a in addresses)
    for config in configs.values():
        assert config["cluster"] == cluster and config["environment"] == "cloud"
    # the parameter server never exits by itself: the world stopped it once the chief had returned
    assert not [r["pid"] for r in collector.reports if alive(r["pid"])]


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs OpenMPI (make system-deps)")
def test_mpirun_hello_world_with_two_ranks(capfd: pytest.CaptureFixture[str]) -> None:
    assert mpi_hello() == "hello from 0 of 2"  # rank 0's output is the task's
    out = capfd.readouterr().out
    assert "[rank-0] hello from 0 of 2" in out and "[rank-1] hello from 1 of 2" in out
    pids = [int(p) for p in re.findall(r"hello from \d of 2 pid (\d+)", out)]
    assert len(pids) == 2 and not [p for p in pids if alive(p)]


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="needs OpenMPI (make system-deps)")
def test_the_members_exit_handlers_run(tmp_path: Path) -> None:
    # members skip the interpreter's slow teardown once their result is written, but not the user's atexit
    assert mpi_exit_handlers(directory=str(tmp_path)) == "0"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exited-0", "exited-1"]


def test_without_mpirun_the_error_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no mpirun
    with pytest.raises(RuntimeError, match=r"mpirun was not found.*apt-get install openmpi-bin"):
        mpi_hello()


def test_elastic_two_nodes_meet_at_a_local_rendezvous(capfd: pytest.CaptureFixture[str]) -> None:
    # rank, world size, 10 + 11, number of nodes (torch's GROUP_WORLD_SIZE)
    assert elastic_all_reduce(value=10) == [0, 2, 21, 2]
    out = capfd.readouterr().out
    # one prefix per line, naming the node process and the rank (either node may hold rank 0)
    lines = {
        rank: re.findall(rf"^\[(worker-[01])/rank-{rank}\] elastic rank {rank} sum 21$", out, re.M) for rank in (0, 1)
    }
    assert len(lines[0]) == len(lines[1]) == 1 and lines[0] != lines[1]
    assert "] [rank-" not in out


def test_elastic_one_node_runs_its_workers_through_the_elastic_launcher(capfd: pytest.CaptureFixture[str]) -> None:
    import torch  # noqa: F401  (its first import sets KMP_INIT_AT_FORK: not ours to count)

    before = {name: signal.getsignal(getattr(signal, name)) for name in ("SIGINT", "SIGTERM")}
    environment = dict(os.environ)
    assert elastic_one_node(fail_rank=-1) == [0, 2]  # rank 0's value
    assert dict(os.environ) == environment  # the workers' variables never reach the caller's process
    out = capfd.readouterr().out
    # each worker labels its lines; like torchrun, one OpenMP thread per worker when the user set none
    assert "[rank-0] worker 0 of 2 threads 1" in out and "[rank-1] worker 1 of 2 threads 1" in out
    # torch's agent handles signals while it runs; the caller's handlers (Ctrl-C) are back afterwards
    assert {name: signal.getsignal(getattr(signal, name)) for name in before} == before


def test_elastic_worker_failure_names_the_rank_and_stays_retryable() -> None:
    with pytest.raises(RecoverableLocalWorldError) as caught:
        elastic_one_node(fail_rank=1)
    assert (caught.value.role, caught.value.index) == ("rank", 1)
    assert "rank 1 failed: FlyteRecoverableException" in str(caught.value)
    assert isinstance(caught.value, FlyteRecoverableException)


def test_the_output_process_decks_come_back_with_its_value() -> None:
    # the master's value and deck; the worker's deck is discarded with its value
    assert decks_of_a_world() == ["0", "rank-0"]
