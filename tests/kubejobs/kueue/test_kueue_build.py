"""Kueue queueing: the queue a task or the backend configuration names becomes the label Kueue reads on the
job object itself, the job is created suspended where each kind keeps ``suspend``, and a suspended queued
job reads as QUEUED with a message saying it waits for Kueue. Objects are checked against the operators' CRDs.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest
from flyteidl.admin.agent_pb2 import TaskExecutionMetadata
from flytekit import task
from flytekit.configuration import Image, ImageConfig, SerializationSettings
from flytekit.tools.translator import get_serializable
from flytekitplugins.kfoperators import KueueQueue, MPIJob, PyTorch, RunPolicy, TfJob, Worker
from flytekitplugins.kubejobs.backend import BackendConfig, BuildError, Phase, build_object, task_phase
from flytekitplugins.kubejobs.backend.kueue import KueueConfig
from flytekitplugins.raycluster import HeadNodeConfig, RayJobConfig, WorkerNodeConfig

SETTINGS = SerializationSettings(
    project="proj",
    domain="dev",
    version="v1",
    image_config=ImageConfig(default_image=Image(name="default", fqn="registry.example/img", tag="1")),
)
QUEUE = "kueue.x-k8s.io/queue-name"
PRIORITY = "kueue.x-k8s.io/priority-class"


def _template(cfg: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)

        @task(task_config=cfg)  # type: ignore[untyped-decorator]
        def train() -> None: ...

        return get_serializable(OrderedDict(), SETTINGS, train).template.to_flyte_idl()


def _meta(namespace: str = "team-a") -> TaskExecutionMetadata:
    m = TaskExecutionMetadata(namespace=namespace)
    m.task_execution_id.node_execution_id.execution_id.name = "abc123"
    m.task_execution_id.node_execution_id.node_id = "n0"
    return m


def _ray() -> RayJobConfig:
    return RayJobConfig(head_node_config=HeadNodeConfig(), worker_node_config=[WorkerNodeConfig("w", replicas=1)])


def _backend(crd_dir: Path, plugins: dict[str, Any]) -> BackendConfig:
    return BackendConfig.from_flyte_config(plugins, crd_dir=str(crd_dir))


def test_a_task_queue_is_the_label_on_the_job_and_the_job_starts_suspended(crd_dir: Path) -> None:
    queue = KueueQueue("team-a-gpu", priority_class="high")
    obj = build_object(
        _template(PyTorch(worker=Worker(replicas=2), run_policy=RunPolicy(queue=queue))),
        _meta(),
        BackendConfig(crd_dir=str(crd_dir)),
    )
    assert obj["metadata"]["labels"][QUEUE] == "team-a-gpu"
    assert obj["metadata"]["labels"][PRIORITY] == "high"
    assert obj["spec"]["runPolicy"]["suspend"] is True
    assert "managedBy" not in obj["spec"]["runPolicy"]


@pytest.mark.parametrize(
    ("plugins", "namespace", "task_type", "expected"),
    [
        (
            {"queues": [{"namespace": "team-a", "task-type": "pytorch", "queue": "a-torch"}, {"queue": "any"}]},
            "team-a",
            "pytorch",
            "a-torch",
        ),
        (
            {"queues": [{"namespace": "team-a", "task-type": "pytorch", "queue": "a-torch"}, {"queue": "any"}]},
            "team-b",
            "pytorch",
            "any",
        ),
        ({"queues": [{"namespace": "team-a", "queue": "a"}]}, "team-b", "pytorch", None),
        ({"queues": [{"task-type": "ray", "queue": "ray-q"}]}, "team-a", "ray", "ray-q"),
    ],
)
def test_the_first_backend_rule_matching_namespace_and_task_type_queues_the_job(
    crd_dir: Path, plugins: dict[str, Any], namespace: str, task_type: str, expected: str | None
) -> None:
    cfg = PyTorch(worker=Worker(replicas=1)) if task_type == "pytorch" else _ray()
    obj = build_object(_template(cfg), _meta(namespace), _backend(crd_dir, {"kueue": plugins}))
    assert obj["metadata"]["labels"].get(QUEUE) == expected
    suspend = obj["spec"].get("suspend") if task_type == "ray" else obj["spec"].get("runPolicy", {}).get("suspend")
    assert suspend is (True if expected else None)


def test_the_task_queue_wins_over_the_backend_rule(crd_dir: Path) -> None:
    cfg = TfJob(worker=Worker(replicas=1), run_policy=RunPolicy(queue=KueueQueue("mine")))
    obj = build_object(_template(cfg), _meta(), _backend(crd_dir, {"kueue": {"queues": [{"queue": "platform"}]}}))
    assert obj["metadata"]["labels"][QUEUE] == "mine"
    assert obj["spec"]["runPolicy"]["suspend"] is True


def test_multikueue_sets_managed_by_where_each_kind_keeps_it(crd_dir: Path) -> None:
    backend = _backend(crd_dir, {"kueue": {"queues": [{"queue": "q"}], "multikueue": True}})
    torch = build_object(_template(PyTorch(worker=Worker(replicas=1))), _meta(), backend)
    ray = build_object(_template(_ray()), _meta(), backend)
    assert torch["spec"]["runPolicy"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    assert ray["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue" and ray["spec"]["suspend"] is True


def test_a_trainjob_is_queued_with_spec_suspend() -> None:
    backend = BackendConfig.from_flyte_config(
        {
            "trainjob": {"task-types": ["pytorch", "mpi"], "runtimes": {"mpi": "mpi-rt"}},
            "kueue": {"queues": [{"queue": "q"}]},
        }
    )
    for cfg in (PyTorch(worker=Worker(replicas=1)), MPIJob(worker=Worker(replicas=2), slots=1)):
        obj = build_object(_template(cfg), _meta(), backend)
        assert obj["kind"] == "TrainJob" and obj["metadata"]["labels"][QUEUE] == "q"
        assert obj["spec"]["suspend"] is True


def test_an_explicitly_running_queued_job_is_refused(crd_dir: Path) -> None:
    cfg = PyTorch(worker=Worker(replicas=1), run_policy=RunPolicy(suspend=False, queue=KueueQueue("q")))
    with pytest.raises(BuildError, match=r"runPolicy.suspend is false, but the job is queued in Kueue LocalQueue 'q'"):
        build_object(_template(cfg), _meta(), BackendConfig(crd_dir=str(crd_dir)))


def test_a_queued_v1_mpijob_is_refused_because_kueue_would_never_resume_it(crd_dir: Path) -> None:
    cfg = MPIJob(worker=Worker(replicas=2), slots=1, run_policy=RunPolicy(queue=KueueQueue("q")))
    with pytest.raises(BuildError, match=r"v2beta1 MPIJob, so it would stay suspended"):
        build_object(_template(cfg), _meta(), BackendConfig(crd_dir=str(crd_dir)))


@pytest.mark.parametrize(
    ("name", "priority", "field"),
    [("Team_A", None, "KueueQueue.name"), ("q", "x" * 64, "KueueQueue.priority_class"), ("", None, "KueueQueue.name")],
)
def test_a_queue_that_is_not_a_label_value_is_refused_at_construction(
    name: str, priority: str | None, field: str
) -> None:
    with pytest.raises(ValueError, match=field):
        KueueQueue(name, priority_class=priority)


def test_run_policy_queue_must_be_a_kueue_queue() -> None:
    with pytest.raises(TypeError, match=r"RunPolicy.queue must be a KueueQueue, got 'q'"):
        RunPolicy(queue="q")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"queue": [{"queue": "q"}]}, r"plugins.kueue has unknown keys \['queue'\]"),
        ({"queues": [{"queue": "q", "tasktype": "ray"}]}, r"plugins.kueue.queues\[0\] has unknown keys \['tasktype'\]"),
        ({"queues": [{"queue": "q", "task-type": "spark"}]}, r"task-type must be one of"),
        ({"queues": [{"namespace": "a"}]}, r"plugins.kueue.queues\[0\].queue must be a DNS-1123 label"),
    ],
)
def test_a_bad_kueue_section_names_the_key(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        KueueConfig.from_section(section)


def test_a_forged_extension_queue_is_a_build_error(crd_dir: Path) -> None:
    template = _template(PyTorch(worker=Worker(replicas=1)))
    template.custom.update({"kubejobs": {"version": 1, "queue": {"name": "q; rm -rf /"}}})
    with pytest.raises(BuildError, match=r"kubejobs.queue.name must be a DNS-1123 label"):
        build_object(template, _meta(), BackendConfig(crd_dir=str(crd_dir)))
    template.custom.update({"kubejobs": {"version": 1, "queue": {"name": "q", "cohort": "x"}}})
    with pytest.raises(BuildError, match=r"kubejobs.queue has unknown keys \['cohort'\]"):
        build_object(template, _meta(), BackendConfig(crd_dir=str(crd_dir)))


def test_a_suspended_queued_job_is_queued_with_a_message_saying_so(crd_dir: Path) -> None:
    obj = build_object(
        _template(PyTorch(worker=Worker(replicas=1), run_policy=RunPolicy(queue=KueueQueue("lq")))),
        _meta(),
        BackendConfig(crd_dir=str(crd_dir)),
    )
    obj["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    obj["status"] = {
        "conditions": [
            {"type": "Created", "status": "True", "reason": "PyTorchJobCreated"},
            {"type": "Suspended", "status": "True", "reason": "PyTorchJobSuspended", "message": "job is suspended"},
        ]
    }
    info = task_phase(obj)  # long after creation: a suspended job is never "operator stalled"
    assert info.phase is Phase.QUEUED
    assert info.message == "waiting for Kueue to admit it (LocalQueue lq): job is suspended"
