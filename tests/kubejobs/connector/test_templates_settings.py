"""Where the connector reads compute templates: its own namespace (the service account's namespace file), else
deploy/'s `flyte`; a setting (file or environment) overrides it, checked as a namespace name."""

from __future__ import annotations

from pathlib import Path

import pytest
from flyteidl.core.tasks_pb2 import TaskTemplate
from flytekitplugins.kfoperators import PyTorch, Worker
from flytekitplugins.kfoperators.serialize import pytorch_custom
from flytekitplugins.kubejobs.backend.computetemplates import named_templates
from flytekitplugins.kubejobs.connector.settings import ConnectorSettings, own_namespace
from google.protobuf.struct_pb2 import Struct


def test_the_templates_namespace_is_the_pod_s_own_else_flyte(tmp_path: Path) -> None:
    path = tmp_path / "namespace"
    assert own_namespace(str(path)) == "flyte"  # not in a pod: deploy/'s namespace
    path.write_text("platform\n")
    assert own_namespace(str(path)) == "platform"
    assert ConnectorSettings().templates_namespace == own_namespace()


def test_the_templates_namespace_can_be_set_and_is_checked() -> None:
    settings = ConnectorSettings.from_mapping({"connector": {"templates-namespace": "ml-platform"}})
    assert settings.templates_namespace == "ml-platform"
    env = {"KUBEJOBS_CONNECTOR_TEMPLATES_NAMESPACE": "other"}
    assert ConnectorSettings.from_mapping({}, env).templates_namespace == "other"
    with pytest.raises(ValueError, match=r"ConnectorSettings\.templates_namespace must be a DNS-1123 label"):
        ConnectorSettings(templates_namespace="Not/A-Namespace")


def _template(custom: dict[str, object]) -> TaskTemplate:
    struct = Struct()
    struct.update(custom)
    return TaskTemplate(type="pytorch", task_type_version=1, custom=struct)


def test_only_tasks_naming_templates_make_the_connector_read_them() -> None:
    named = pytorch_custom(PyTorch(worker=Worker(replicas=1, compute_template="a100x8")))
    assert named_templates(_template(named)) == {"a100x8"}
    assert named_templates(_template(pytorch_custom(PyTorch(worker=Worker(replicas=1))))) == frozenset()
    assert named_templates(TaskTemplate(type="pytorch")) == frozenset()
    # malformed sections name nothing here; building refuses them with a message
    assert named_templates(_template({"kubejobs": {"replicaSpecs": "x", "rayGroups": {"workers": 3}}})) == frozenset()
