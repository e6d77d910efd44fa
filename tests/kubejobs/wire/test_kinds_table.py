"""The kinds table is THE list of kinds: no module keeps its own, and a new kind is one entry plus its builder."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml
from flyteidl.admin.agent_pb2 import TaskExecutionMetadata
from flyteidl.core.tasks_pb2 import Container, TaskTemplate
from flytekitplugins.kubejobs import backend
from flytekitplugins.kubejobs.backend import builders, decode, kubeflow
from flytekitplugins.kubejobs.wire import kinds
from flytekitplugins.kubejobs.wire.kinds import ENGINE_KINDS, KINDS, JobKind, LinkedRole, Role, StatusStyle
from google.protobuf.struct_pb2 import Struct

REPO = Path(__file__).resolve().parents[3]
PLUGINS = REPO / "plugins"
# (The fake API server, which imitates the operators, is test code under tests/fakeapi: not scanned.)
EXEMPT = ("kubejobs/wire/",)


def _kind_literals() -> set[str]:
    out: set[str] = set()
    for kind in KINDS.values():
        out |= {kind.kind, kind.plural, kind.api_version}
        if kind.replica_specs_key:
            out.add(kind.replica_specs_key)
    return out


def _string_constants(tree: ast.AST) -> list[tuple[int, str]]:
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_no_module_outside_the_wire_core_spells_a_kind() -> None:
    import flytekitplugins.kfoperators

    # The official plugins named a config class like its kind (``MPIJob``): that name is the drop-in API.
    literals = _kind_literals() - set(flytekitplugins.kfoperators.__all__)
    offenders = []
    for path in sorted(PLUGINS.glob("*/flytekitplugins/**/*.py")):  # the packages, not build/ leftovers
        rel = path.relative_to(PLUGINS).as_posix()
        if any(part in rel for part in EXEMPT):
            continue
        for line, value in _string_constants(ast.parse(path.read_text(), str(path))):
            if value in literals:
                offenders.append(f"{rel}:{line}: {value!r}")
    assert not offenders, "kinds spelled outside wire/kinds.py (look them up in KINDS):\n" + "\n".join(offenders)


def test_the_scan_finds_a_module_with_its_own_list_of_kinds() -> None:
    tree = ast.parse('REPLICAS = {"PyTorchJob": "pytorchReplicaSpecs"}\n"""doc PyTorchJob"""')
    assert {v for _, v in _string_constants(tree)} & _kind_literals() == {"PyTorchJob", "pytorchReplicaSpecs"}


def test_every_kind_has_a_builder_and_a_status_mapping() -> None:
    assert builders.registered_task_types() == set(KINDS)
    from flytekitplugins.kubejobs.backend import status

    assert set(status._PHASE_MAPPINGS) == set(StatusStyle)


def test_rbac_grants_exactly_the_kinds_of_the_table() -> None:
    granted = {
        (group, resource)
        for doc in yaml.safe_load_all((REPO / "deploy" / "rbac.yaml").read_text())
        if doc and doc.get("kind") in ("Role", "ClusterRole")
        for rule in doc.get("rules", [])
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
        if group in {k.group for k in (*KINDS.values(), *ENGINE_KINDS)}
    }
    assert granted == {(k.group, k.rbac_resource) for k in (*KINDS.values(), *ENGINE_KINDS)}


def test_adding_a_kind_is_one_table_entry_plus_its_builder(monkeypatch: pytest.MonkeyPatch) -> None:
    """Walk through adding a kind (a Training-Operator-style PaddleJob reading the PyTorch message): the
    table entry and a builder are all it takes for building, naming, the extension key, status and links."""
    paddle = JobKind(
        "paddle",
        "kubeflow.org",
        "v1",
        "PaddleJob",
        "paddlejobs",
        63,
        StatusStyle.CONDITIONS,
        container="paddle",
        task_type_versions=(1,),
        replica_specs_key="paddleReplicaSpecs",
        roles=(Role("Master", "master_replicas"), Role("Worker", "worker_replicas")),
        linked_roles=(LinkedRole("Worker"),),
        extension_sections=frozenset({"replicaSpecs"}),
    )
    monkeypatch.setitem(kinds.KINDS, "paddle", paddle)
    monkeypatch.setattr(builders, "_BUILDERS", dict(builders._BUILDERS))

    @builders.builds("paddle")
    def _paddle(ctx: builders.BuildContext) -> builders.BuiltSpec:  # the kind's genuinely new code
        from flyteidl.plugins.kubeflow import pytorch_pb2

        custom, _, ext = kubeflow._custom(ctx)
        msg = decode.decode_custom(custom, pytorch_pb2.DistributedPyTorchTrainingTask(), "paddle custom")
        _, worker = kubeflow._v1_role(ctx, msg, "Worker", ext)
        return builders.BuiltSpec({ctx.kind.replica_specs_key: {"Worker": worker}})

    custom = Struct()
    custom.update(
        {"workerReplicas": {"replicas": 2}, "kubejobs": {"replicaSpecs": {"Worker": {"nodeSelector": {"a": "b"}}}}}
    )
    template = TaskTemplate(
        type="paddle", task_type_version=1, custom=custom, container=Container(image="i", args=["x"])
    )
    meta = TaskExecutionMetadata(namespace="ns")
    meta.task_execution_id.node_execution_id.execution_id.name = "e"
    meta.task_execution_id.node_execution_id.node_id = "n0"
    obj = backend.build_object(template, meta, validate=False)
    assert (obj["apiVersion"], obj["kind"]) == ("kubeflow.org/v1", "PaddleJob")
    worker = obj["spec"]["paddleReplicaSpecs"]["Worker"]
    assert worker["template"]["spec"]["containers"][0]["name"] == "paddle"
    assert worker["template"]["spec"]["nodeSelector"] == {"a": "b"}

    obj["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    obj["status"] = {"startTime": "2026-01-01T00:00:01Z", "conditions": [{"type": "Running", "status": "True"}]}
    from datetime import datetime, timezone

    info = backend.task_phase(obj, now=datetime(2026, 1, 1, 0, 0, 5, tzinfo=timezone.utc))
    assert info.phase is backend.Phase.RUNNING
    assert [link.uri.split("/")[-2] for link in info.logs] == ["e-n0-0-worker-0", "e-n0-0-worker-1"]

    template.task_type_version = 0
    with pytest.raises(backend.BuildError, match=r"reads versions 1"):
        backend.build_object(template, meta, validate=False)


def test_a_kind_without_a_builder_is_a_build_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        kinds.KINDS, "half", JobKind("half", "x.io", "v1", "Half", "halves", 63, StatusStyle.CONDITIONS, "c", (1,))
    )
    template = TaskTemplate(type="half", task_type_version=1, container=Container(image="i"))
    with pytest.raises(backend.BuildError, match="no spec builder is registered for task type 'half'"):
        backend.build_object(template, TaskExecutionMetadata(namespace="ns"), validate=False)
