"""Every construction rule of issue 2: bad input raises ValueError/TypeError at construction, and the
message names the field (``Class.field``) and shows the value."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from flytekit import Resources
from flytekitplugins.kfoperators import (
    PS,
    Chief,
    CleanPodPolicy,
    Elastic,
    Evaluator,
    HorovodJob,
    Launcher,
    Master,
    MPIJob,
    PyTorch,
    RestartPolicy,
    RunPolicy,
    SchedulingPolicy,
    TfJob,
    Worker,
)

ONE = Worker(replicas=1)

# (id, construction, exception type, substrings the message must contain: the field, then the value)
CASES: list[tuple[str, Callable[[], Any], type[Exception], tuple[str, ...]]] = [
    # replicas: negative, non-int, over int32
    ("replicas-negative", lambda: Worker(replicas=-1), ValueError, ("Worker.replicas", "-1")),
    ("replicas-str", lambda: Worker(replicas="2"), TypeError, ("Worker.replicas", "'2'")),
    ("replicas-float", lambda: PS(replicas=2.5), TypeError, ("PS.replicas", "2.5")),
    ("replicas-bool", lambda: Chief(replicas=True), TypeError, ("Chief.replicas", "True")),
    ("replicas-over-int32", lambda: Worker(replicas=2**31), ValueError, ("Worker.replicas", "2147483648")),
    ("evaluator-negative", lambda: Evaluator(replicas=-3), ValueError, ("Evaluator.replicas", "-3")),
    ("num-workers-negative", lambda: PyTorch(num_workers=-1), ValueError, ("PyTorch.num_workers", "-1")),
    ("num-workers-str", lambda: TfJob(num_workers="2"), TypeError, ("TfJob.num_workers", "'2'")),
    (
        "num-workers-over-int32",
        lambda: MPIJob(num_workers=2**31),
        ValueError,
        ("MPIJob.num_workers", "2147483648"),
    ),
    # TF or MPI with no workers
    ("tf-no-workers", lambda: TfJob(), ValueError, ("TfJob.worker.replicas", "None")),
    ("tf-zero-workers", lambda: TfJob(worker=Worker(replicas=0)), ValueError, ("TfJob.worker.replicas", "0")),
    ("mpi-no-workers", lambda: MPIJob(), ValueError, ("MPIJob.worker.replicas", "None")),
    (
        "horovod-zero-workers",
        lambda: HorovodJob(worker=Worker(replicas=0)),
        ValueError,
        ("HorovodJob.worker.replicas", "0"),
    ),
    ("pytorch-no-workers", lambda: PyTorch(), ValueError, ("PyTorch.worker.replicas", "None")),
    # launcher / master count other than 1; at most one chief
    ("launcher-two", lambda: Launcher(replicas=2), ValueError, ("Launcher.replicas", "2")),
    ("launcher-zero", lambda: Launcher(replicas=0), ValueError, ("Launcher.replicas", "0")),
    ("master-two", lambda: Master(replicas=2), ValueError, ("Master.replicas", "2")),
    ("master-zero", lambda: Master(replicas=0), ValueError, ("Master.replicas", "0")),
    (
        "num-launcher-two",
        lambda: MPIJob(worker=ONE, num_launcher_replicas=2),
        ValueError,
        ("MPIJob.num_launcher_replicas", "2"),
    ),
    (
        "num-launcher-zero",
        lambda: HorovodJob(worker=ONE, num_launcher_replicas=0),
        ValueError,
        ("HorovodJob.num_launcher_replicas", "0"),
    ),
    ("two-chiefs", lambda: TfJob(chief=Chief(replicas=2), worker=ONE), ValueError, ("TfJob.chief.replicas", "2")),
    # Elastic nnodes / nproc_per_node / start_method and the other runtime knobs
    ("nnodes-word", lambda: Elastic(nnodes="abc"), ValueError, ("Elastic.nnodes", "'abc'")),
    ("nnodes-min-above-max", lambda: Elastic(nnodes="4:2"), ValueError, ("Elastic.nnodes", "'4:2'")),
    ("nnodes-zero", lambda: Elastic(nnodes=0), ValueError, ("Elastic.nnodes", "0")),
    ("nnodes-negative", lambda: Elastic(nnodes=-1), ValueError, ("Elastic.nnodes", "-1")),
    ("nnodes-zero-min", lambda: Elastic(nnodes="0:2"), ValueError, ("Elastic.nnodes", "'0:2'")),
    ("nnodes-three-parts", lambda: Elastic(nnodes="1:2:3"), ValueError, ("Elastic.nnodes", "'1:2:3'")),
    ("nnodes-float", lambda: Elastic(nnodes=2.0), TypeError, ("Elastic.nnodes", "2.0")),
    ("nnodes-open-range", lambda: Elastic(nnodes="2:"), ValueError, ("Elastic.nnodes", "'2:'")),
    ("nnodes-over-int32", lambda: Elastic(nnodes=2**31), ValueError, ("Elastic.nnodes", "2147483648")),
    ("nnodes-bool", lambda: Elastic(nnodes=True), TypeError, ("Elastic.nnodes", "True")),
    ("nproc-zero", lambda: Elastic(nproc_per_node=0), ValueError, ("Elastic.nproc_per_node", "0")),
    ("nproc-auto", lambda: Elastic(nproc_per_node="auto"), TypeError, ("Elastic.nproc_per_node", "'auto'")),
    ("nproc-float", lambda: Elastic(nproc_per_node=1.5), TypeError, ("Elastic.nproc_per_node", "1.5")),
    (
        "start-forkserver",
        lambda: Elastic(start_method="forkserver"),
        ValueError,
        ("Elastic.start_method", "'forkserver'"),
    ),
    ("max-restarts-negative", lambda: Elastic(max_restarts=-1), ValueError, ("Elastic.max_restarts", "-1")),
    ("monitor-zero", lambda: Elastic(monitor_interval=0), ValueError, ("Elastic.monitor_interval", "0")),
    ("rdzv-not-dict", lambda: Elastic(rdzv_configs=[("timeout", 1)]), TypeError, ("Elastic.rdzv_configs", "timeout")),
    # MPI slots and commands
    ("slots-zero", lambda: MPIJob(worker=ONE, slots=0), ValueError, ("MPIJob.slots", "0")),
    ("slots-negative", lambda: HorovodJob(worker=ONE, slots=-2), ValueError, ("HorovodJob.slots", "-2")),
    ("command-int", lambda: Worker(command=123), TypeError, ("Worker.command", "123")),
    ("command-non-str-item", lambda: Launcher(command=["python", 3]), TypeError, ("Launcher.command[1]", "3")),
    ("command-empty", lambda: Worker(command=""), ValueError, ("Worker.command", "''")),
    ("command-bad-quoting", lambda: Worker(command="echo 'open"), ValueError, ("Worker.command", "open")),
    (
        "command-outside-mpi",
        lambda: PyTorch(worker=Worker(replicas=1, command=["x"])),
        ValueError,
        ("PyTorch.worker.command", "'x'"),
    ),
    # resource quantities
    ("cpu-word", lambda: Worker(requests=Resources(cpu="lots")), ValueError, ("Worker.requests.cpu", "'lots'")),
    ("mem-space", lambda: Master(limits=Resources(mem="2 GB")), ValueError, ("Master.limits.mem", "'2 GB'")),
    ("gpu-negative", lambda: PS(requests=Resources(gpu="-1")), ValueError, ("PS.requests.gpu", "'-1'")),
    ("cpu-nan", lambda: Worker(limits=Resources(cpu=float("nan"))), ValueError, ("Worker.limits.cpu", "nan")),
    ("mem-bool", lambda: Chief(requests=Resources(mem=True)), TypeError, ("Chief.requests.mem", "True")),
    (
        "request-above-limit",
        lambda: Worker(requests=Resources(cpu="4"), limits=Resources(cpu="2")),
        ValueError,
        ("Worker", "cpu", "'4'"),
    ),
    ("resources-not-resources", lambda: Worker(requests={"cpu": "1"}), TypeError, ("Worker.requests", "'cpu'")),
    # enums as unknown strings or ints
    ("restart-word", lambda: Worker(restart_policy="sometimes"), ValueError, ("Worker.restart_policy", "'sometimes'")),
    ("restart-int", lambda: Chief(restart_policy=7), ValueError, ("Chief.restart_policy", "7")),
    (
        "clean-word",
        lambda: RunPolicy(clean_pod_policy="everything"),
        ValueError,
        ("RunPolicy.clean_pod_policy", "'everything'"),
    ),
    ("clean-int", lambda: RunPolicy(clean_pod_policy=5), ValueError, ("RunPolicy.clean_pod_policy", "5")),
    # negative run-policy values
    ("backoff-negative", lambda: RunPolicy(backoff_limit=-1), ValueError, ("RunPolicy.backoff_limit", "-1")),
    (
        "ttl-negative",
        lambda: RunPolicy(ttl_seconds_after_finished=-5),
        ValueError,
        ("RunPolicy.ttl_seconds_after_finished", "-5"),
    ),
    (
        "deadline-negative",
        lambda: RunPolicy(active_deadline_seconds=-1),
        ValueError,
        ("RunPolicy.active_deadline_seconds", "-1"),
    ),
    (
        "min-available-zero",
        lambda: SchedulingPolicy(min_available=0),
        ValueError,
        ("SchedulingPolicy.min_available", "0"),
    ),
    # wrong types where a config object is expected
    ("worker-wrong-role", lambda: PyTorch(worker=Chief(replicas=1)), TypeError, ("PyTorch.worker", "Chief")),
    (
        "run-policy-dict",
        lambda: TfJob(worker=ONE, run_policy={"backoff_limit": 1}),
        TypeError,
        ("TfJob.run_policy", "backoff_limit"),
    ),
    (
        "shared-mem-str",
        lambda: PyTorch(worker=ONE, increase_shared_mem="yes"),
        TypeError,
        ("PyTorch.increase_shared_mem", "'yes'"),
    ),
    (
        "horovod-log-level",
        lambda: HorovodJob(worker=ONE, log_level="LOUD"),
        ValueError,
        ("HorovodJob.log_level", "'LOUD'"),
    ),
    (
        "horovod-timeout",
        lambda: HorovodJob(worker=ONE, elastic_timeout=0),
        ValueError,
        ("HorovodJob.elastic_timeout", "0"),
    ),
    ("horovod-verbose", lambda: HorovodJob(worker=ONE, verbose="yes"), TypeError, ("HorovodJob.verbose", "'yes'")),
    ("image-int", lambda: Worker(image=3), TypeError, ("Worker.image", "3")),
    ("local-world-zero", lambda: PyTorch(worker=ONE, local_world=0), ValueError, ("PyTorch.local_world", "0")),
]


@pytest.mark.parametrize(("make", "error", "needles"), [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_bad_input_is_refused_at_construction(
    make: Callable[[], Any], error: type[Exception], needles: tuple[str, ...]
) -> None:
    with pytest.raises(error) as caught:
        make()
    assert type(caught.value) is error
    for needle in needles:
        assert needle in str(caught.value)


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda: Worker(restart_policy="on_failure").restart_policy, RestartPolicy.FAILURE),
        (lambda: Worker(restart_policy="Always").restart_policy, RestartPolicy.ALWAYS),
        (lambda: Worker(restart_policy=0).restart_policy, RestartPolicy.NEVER),
        (lambda: RunPolicy(clean_pod_policy="all").clean_pod_policy, CleanPodPolicy.ALL),
        (lambda: RunPolicy(clean_pod_policy=1).clean_pod_policy, CleanPodPolicy.RUNNING),
        (lambda: Worker(command="python train.py --name 'a b'").command, ("python", "train.py", "--name", "a b")),
        (lambda: Elastic(nnodes="2").nodes, (2, 2)),
        (lambda: Elastic(nnodes=" 1:3 ").nodes, (1, 3)),
        (lambda: TfJob(worker=ONE).chief.replicas or 0, 0),
        (lambda: MPIJob(worker=ONE).launcher.replicas, None),
        (lambda: HorovodJob(worker=ONE, log_level="debug").log_level, "DEBUG"),
        (lambda: Worker(requests=Resources(cpu=0.5, mem=1024)).requests, Resources(cpu="0.5", mem="1024")),
    ],
)
def test_lenient_spellings_are_normalized(make: Callable[[], Any], expected: Any) -> None:
    assert make() == expected


def test_the_callers_rdzv_configs_dict_is_copied() -> None:
    configs = {"timeout": 5}
    elastic = Elastic(rdzv_configs=configs)
    configs["timeout"] = 999
    assert elastic.rdzv_configs == {"timeout": 5}
