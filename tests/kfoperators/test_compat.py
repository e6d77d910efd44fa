"""Compatibility with configs written for the official plugins: deprecated fields, pod templates, and
never touching the user's objects or environment."""

from __future__ import annotations

import copy
import dataclasses
import enum
import inspect
import os
from collections.abc import Callable
from typing import Any

import flytekitplugins.kfmpi as official_mpi
import flytekitplugins.kfoperators as ours
import flytekitplugins.kfpytorch as official_pytorch
import flytekitplugins.kftensorflow as official_tf
import pytest
from flytekit import PodTemplate, Resources, task
from flytekitplugins.kfoperators import (
    PS,
    Chief,
    Elastic,
    Evaluator,
    HorovodJob,
    Launcher,
    Master,
    MPIJob,
    PyTorch,
    RestartPolicy,
    TfJob,
    Worker,
)
from flytekitplugins.kubejobs.userwarnings import KubejobsDeprecationWarning
from google.protobuf.json_format import MessageToDict
from kubernetes.client import V1Container, V1PodSpec, V1Volume, V1VolumeMount

from .task_functions import train

Register = Callable[[Any], Any]


@pytest.mark.parametrize(
    ("make", "replacement", "role", "replicas"),
    [
        (lambda: PyTorch(num_workers=3), "PyTorch(worker=Worker(replicas=3))", "worker", 3),
        (lambda: TfJob(num_workers=2), "TfJob(worker=Worker(replicas=2))", "worker", 2),
        (lambda: TfJob(worker=Worker(replicas=1), num_ps_replicas=2), "TfJob(ps=PS(replicas=2))", "ps", 2),
        (lambda: TfJob(worker=Worker(replicas=1), num_chief_replicas=1), "TfJob(chief=Chief(replicas=1))", "chief", 1),
        (
            lambda: TfJob(worker=Worker(replicas=1), num_evaluator_replicas=1),
            "TfJob(evaluator=Evaluator(replicas=1))",
            "evaluator",
            1,
        ),
        (lambda: MPIJob(num_workers=4), "MPIJob(worker=Worker(replicas=4))", "worker", 4),
        (
            lambda: MPIJob(worker=Worker(replicas=1), num_launcher_replicas=1),
            "MPIJob(launcher=Launcher(replicas=1))",
            "launcher",
            1,
        ),
        (lambda: HorovodJob(num_workers=2), "HorovodJob(worker=Worker(replicas=2))", "worker", 2),
    ],
)
def test_deprecated_counts_work_and_name_their_replacement(
    make: Callable[[], Any], replacement: str, role: str, replicas: int
) -> None:
    with pytest.warns(KubejobsDeprecationWarning) as record:
        config = make()
    assert any(replacement in str(w.message) for w in record), [str(w.message) for w in record]
    assert {w.filename for w in record} == {__file__}  # points at the user's line, not at the plugin
    assert getattr(config, role).replicas == replicas


@pytest.mark.parametrize(
    ("make", "role", "replicas"),
    [
        (lambda: PyTorch(num_workers=3, worker=Worker(replicas=2)), "worker", 2),
        (lambda: TfJob(num_ps_replicas=4, ps=PS(replicas=1), worker=Worker(replicas=1)), "ps", 1),
        (
            lambda: TfJob(num_evaluator_replicas=2, evaluator=Evaluator(replicas=1), worker=Worker(replicas=1)),
            "evaluator",
            1,
        ),
        (lambda: MPIJob(num_workers=5, worker=Worker(replicas=2)), "worker", 2),
    ],
)
def test_a_per_role_count_wins_over_a_deprecated_one_with_a_warning(
    make: Callable[[], Any], role: str, replicas: int
) -> None:
    with pytest.warns(Warning) as record:
        config = make()
    categories = {w.category for w in record}
    assert categories == {KubejobsDeprecationWarning, UserWarning}
    assert any(f"{role}.replicas={replicas} is used" in str(w.message) for w in record)
    assert getattr(config, role).replicas == replicas


def test_applying_a_deprecated_count_leaves_the_users_role_alone() -> None:
    worker = Worker(image="reg/w")
    with pytest.deprecated_call():
        config = PyTorch(worker=worker, num_workers=2)
    assert worker.replicas is None and config.worker.replicas == 2 and config.worker.image == "reg/w"


def test_chief_and_ps_default_to_zero_and_the_launcher_to_one(register: Register) -> None:
    tf = TfJob(worker=Worker(replicas=2))
    assert (tf.chief, tf.ps, tf.evaluator.replicas) == (Chief(), PS(), 0)
    custom = register(task(task_config=MPIJob(worker=Worker(replicas=2)))(train)).custom
    assert custom["launcherReplicas"]["replicas"] == 1
    assert Launcher().replicas is None


def _pod_template() -> PodTemplate:
    return PodTemplate(
        primary_container_name="primary",
        pod_spec=V1PodSpec(
            containers=[V1Container(name="primary", volume_mounts=[V1VolumeMount(name="data", mount_path="/data")])],
            volumes=[V1Volume(name="data")],
        ),
        labels={"team": "ml"},
    )


def test_one_pod_template_serves_several_tasks_and_is_never_changed(register: Register) -> None:
    template = _pod_template()
    snapshot = copy.deepcopy(template)
    configs = [
        PyTorch(worker=Worker(replicas=2)),
        PyTorch(worker=Worker(replicas=1), increase_shared_mem=False),
        Elastic(nnodes=2),
        TfJob(worker=Worker(replicas=1)),
        MPIJob(worker=Worker(replicas=1)),
    ]
    with pytest.warns(KubejobsDeprecationWarning):
        configs.append(PyTorch(worker=Worker(replicas=1), increase_shared_mem=True))
    pods = []
    for config in configs * 2:
        registered = register(task(task_config=config, pod_template=template)(train))
        pods.append(MessageToDict(registered.k8s_pod.pod_spec))
    assert template == snapshot
    # Each task got the template once, plus (PyTorch and Elastic unless opted out) the /dev/shm volume once.
    shm = [True, False, True, False, False, True] * 2
    for pod, with_shm in zip(pods, shm, strict=True):
        extra_volume = [{"name": "shm", "emptyDir": {"medium": "Memory"}}] if with_shm else []
        extra_mount = [{"name": "shm", "mountPath": "/dev/shm"}] if with_shm else []
        assert pod["volumes"] == [{"name": "data"}, *extra_volume]
        assert pod["containers"][0]["volumeMounts"] == [{"name": "data", "mountPath": "/data"}, *extra_mount]


def test_config_objects_are_reusable_across_tasks(register: Register) -> None:
    config = PyTorch(worker=Worker(replicas=2))
    first = register(task(task_config=config)(train))
    second = register(task(task_config=config, requests=None)(train))
    assert first.custom == second.custom


def test_serialization_never_touches_os_environ(register: Register) -> None:
    before = dict(os.environ)
    for config in (PyTorch(worker=Worker(replicas=1)), Elastic(nproc_per_node=4), TfJob(worker=Worker(replicas=1))):
        register(task(task_config=config)(train))
    assert dict(os.environ) == before


# Documented differences (README, "Decisions" and "Differences from the official plugins"):
#: (official package, class, field) whose default differs: None (unset) instead of True.
OTHER_DEFAULT = {("kfpytorch", "PyTorch", "increase_shared_mem"), ("kfpytorch", "Elastic", "increase_shared_mem")}
#: (official package, class, field) that is keyword-only here: one Worker serves all three job kinds.
KEYWORD_ONLY_HERE = {("kfmpi", "Worker", "command")}
OFFICIAL_MODULES = (official_pytorch, official_tf, official_mpi)


def _official_classes() -> list[Any]:
    """Every class the official packages export, found by looking, not listed by hand."""
    out = []
    for module in OFFICIAL_MODULES:
        package = module.__name__.split(".")[-1]
        for name in sorted(n for n in dir(module) if not n.startswith("_")):
            value = getattr(module, name)
            if isinstance(value, type) and value.__module__.startswith(module.__name__):
                out.append(pytest.param(package, value, id=f"{package}.{name}"))
    return out


def _default(cls: type, param: inspect.Parameter) -> Any:
    """A parameter's default, with a dataclass ``default_factory`` called (the signature shows a sentinel)."""
    if dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            if f.name == param.name and f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
    return param.default


def _same_default(theirs: Any, mine: Any) -> bool:
    if dataclasses.is_dataclass(theirs) and not isinstance(theirs, type):  # e.g. Master(): same name, same values
        names = [f.name for f in dataclasses.fields(theirs)]
        return type(mine).__name__ == type(theirs).__name__ and all(
            getattr(mine, n) == getattr(theirs, n) for n in names
        )
    return bool(mine == theirs)


def _positional(signature: inspect.Signature) -> list[str]:
    return [p.name for p in signature.parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD]


@pytest.mark.parametrize(("package", "official"), _official_classes())
def test_every_official_constructor_is_here_with_its_names_order_and_defaults(package: str, official: type) -> None:
    mine = getattr(ours, official.__name__)  # exported under the same name
    if issubclass(official, enum.Enum):
        assert {m.name: m.value for m in official} == {m.name: m.value for m in mine}
        return
    theirs_sig, mine_sig = inspect.signature(official), inspect.signature(mine)
    for name, param in theirs_sig.parameters.items():
        assert name in mine_sig.parameters, f"{official.__name__}.{name} is missing"
        expected, got = _default(official, param), _default(mine, mine_sig.parameters[name])
        if (package, official.__name__, name) in OTHER_DEFAULT:
            assert (expected, got) == (True, None)
        else:
            assert _same_default(expected, got), f"{official.__name__}.{name}: {got!r} != {expected!r}"
    kept = [n for n in _positional(theirs_sig) if (package, official.__name__, n) not in KEYWORD_ONLY_HERE]
    assert _positional(mine_sig)[: len(kept)] == kept  # positional calls written for upstream mean the same
    for name in _positional(theirs_sig):
        if (package, official.__name__, name) in KEYWORD_ONLY_HERE:
            assert mine_sig.parameters[name].kind is inspect.Parameter.KEYWORD_ONLY


def test_positional_calls_written_for_the_official_roles_mean_the_same() -> None:
    gpu = Resources(gpu="1")
    assert (
        official_mpi.Launcher(["mpirun"], "reg/l", gpu, gpu, 1).image
        == Launcher(["mpirun"], "reg/l", gpu, gpu, 1).image
    )
    launcher = Launcher(["mpirun"], "reg/l", gpu, gpu, 1, RestartPolicy.ALWAYS)
    assert (launcher.command, launcher.limits.gpu, launcher.replicas) == (("mpirun",), "1", 1)
    master = Master("reg/m", None, gpu, "always")
    assert (master.image, master.limits.gpu, master.restart_policy) == ("reg/m", "1", RestartPolicy.ALWAYS)
    worker = Worker("reg/w", gpu, None, 3, RestartPolicy.NEVER)
    assert (worker.image, worker.requests.gpu, worker.replicas, worker.restart_policy) == (
        "reg/w",
        "1",
        3,
        RestartPolicy.NEVER,
    )
