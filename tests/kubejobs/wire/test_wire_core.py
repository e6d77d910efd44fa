"""The wire core is stdlib-only, the server side loads no SDK, quantities follow Kubernetes, Ray's extension key."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from flyteidl.admin.agent_pb2 import TaskExecutionMetadata
from flyteidl.core.tasks_pb2 import Container, TaskTemplate
from flytekitplugins.kubejobs.backend import BuildError, build_object
from flytekitplugins.kubejobs.wire.quantity import canonical_quantity, check_quantity, parse_quantity
from google.protobuf.struct_pb2 import Struct
from kubernetes.utils import parse_quantity as client_parse_quantity

THIRD_PARTY = ("flytekit", "flyteidl", "google", "kubernetes", "yaml", "jsonschema")


def _loaded(code: str) -> set[str]:
    probe = f"import sys\n{code}\nprint(','.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout
    return set(out.strip().split(","))


def test_the_wire_core_imports_only_the_standard_library() -> None:
    assert (
        _loaded("import flytekitplugins.kubejobs.wire, flytekitplugins.kubejobs.wire.template") & set(THIRD_PARTY)
        == set()
    )


def test_building_and_validating_an_object_loads_no_flytekit() -> None:
    code = """
import logging; logging.disable(logging.WARNING)
import flytekitplugins.kubejobs.backend as b
from flyteidl.admin.agent_pb2 import TaskExecutionMetadata
from flyteidl.core.tasks_pb2 import Container, TaskTemplate
from google.protobuf.struct_pb2 import Struct
custom = Struct()
custom.update({"workerReplicas": {"replicas": 2, "resources": {"requests": [{"name": "CPU", "value": "2"}]}}})
template = TaskTemplate(type="pytorch", task_type_version=1, custom=custom, container=Container(image="i", args=["a"]))
meta = TaskExecutionMetadata(namespace="ns")
meta.task_execution_id.node_execution_id.execution_id.name = "e"
b.build_object(template, meta)
"""
    assert "flytekit" not in _loaded(code)


VALID = [
    "1",
    "0",
    "1.5Gi",
    "250m",
    "1e3",
    "1E-2",
    "+1k",
    "-2M",
    ".5",
    "1.",
    "100Mi",
    "3Ei",
    "7n",
    "2u",
    "0.1Ki",
    "5e+2",
]


@pytest.mark.parametrize("text", VALID)
def test_valid_quantities_mean_what_the_kubernetes_client_says(text: Any) -> None:
    assert parse_quantity(text) == client_parse_quantity(text)


#: (as written, as Go's Quantity.String() writes it back); tests/e2e/test_objects_accepted.py checks these and
#: more against the real API server's round trip.
CANONICAL = [
    ("1000m", "1"),
    ("1024Mi", "1Gi"),
    ("0.5", "500m"),
    ("1.5", "1500m"),
    ("1.5Ki", "1536"),
    ("0.5Gi", "512Mi"),
    ("0.5Ki", "512"),
    ("1000", "1k"),
    ("1500", "1500"),
    ("12000", "12k"),
    ("1000000", "1M"),
    ("250m", "250m"),
    ("2Gi", "2Gi"),
    ("1e3", "1e3"),
    ("1500e-3", "1500e-3"),
    ("0.1n", "1n"),
    ("0", "0"),
    ("0Gi", "0"),
]


@pytest.mark.parametrize(("text", "canonical"), CANONICAL)
def test_canonical_quantity_is_the_same_amount_spelled_as_go_writes_it(text: str, canonical: str) -> None:
    assert canonical_quantity(text) == canonical
    assert parse_quantity(canonical) == parse_quantity(text) or text == "0.1n"  # the API server rounds up to 1n


# The Python client's parser takes these (Decimal's syntax); the API server's grammar refuses them.
@pytest.mark.parametrize(
    "text", ["NaN", "inf", "-Infinity", "1_000", "\u0661", "1K", "1ki", "1e1.5", "", " 1", "e3", "G"]
)
def test_quantities_the_api_server_refuses_are_a_value_error_naming_the_field(text: str) -> None:
    with pytest.raises(ValueError, match=r"Worker\.requests\.cpu"):
        parse_quantity(text, "Worker.requests.cpu")


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_non_finite_floats_are_refused_naming_the_field(value: Any) -> None:
    with pytest.raises(ValueError, match=r"Worker\.limits\.memory must be a finite quantity"):
        check_quantity("Worker.limits.memory", value)


def _ray_template(extension: object) -> TaskTemplate:
    custom = Struct()
    custom.update({"rayCluster": {"headGroupSpec": {}}, "kubejobs": extension})
    return TaskTemplate(type="ray", custom=custom, container=Container(image="i", args=["python", "main.py"]))


@pytest.mark.parametrize(
    "extension, message",
    [
        (
            {"replicaSpecs": {"Worker": {"nodeSelector": {"a": "b"}}}},
            r"kubejobs\.replicaSpecs is not supported for RayJob ray.io/v1",
        ),
        ({"runPolicy": {"suspend": True}}, r"kubejobs\.runPolicy is not supported for RayJob ray.io/v1"),
        ({"headGroup": {}}, r"kubejobs has unknown key 'headGroup'"),
        ({"version": 2}, r"kubejobs\.version 2 is not supported"),
    ],
)
def test_a_ray_custom_extension_key_is_refused_not_dropped(extension: dict[str, Any], message: str) -> None:
    with pytest.raises(BuildError, match=message):
        build_object(_ray_template(extension), TaskExecutionMetadata(namespace="ns"), validate=False)


def test_a_ray_custom_with_an_empty_extension_still_builds() -> None:
    obj = build_object(_ray_template({"version": 1}), TaskExecutionMetadata(namespace="ns"), validate=False)
    assert obj["kind"] == "RayJob"


def test_a_kubeflow_extension_with_an_unknown_top_level_key_is_refused() -> None:
    custom = Struct()
    custom.update({"workerReplicas": {"replicas": 1}, "kubejobs": {"version": 1, "replicaSpec": {}}})
    template = TaskTemplate(type="pytorch", task_type_version=1, custom=custom, container=Container(image="i"))
    with pytest.raises(BuildError, match="kubejobs has unknown key 'replicaSpec'"):
        build_object(template, TaskExecutionMetadata(namespace="ns"), validate=False)
