"""SchemaSet sources (schema files, CRD manifests, CRDs from a cluster), the validator cache, the warning
without schemas, and the documented examples."""

from __future__ import annotations

import doctest
import importlib
import json
import logging
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from flytekitplugins.kubejobs.schema import ObjectInvalid, SchemaSet, validate_object

TYPO = ("spec", "pytorchReplicaSpecs", "Worker", "replica")


def crd(schema: Any, group: str, kind: str, plural: str, versions: list[tuple[str, bool]]) -> dict[str, Any]:
    """A CustomResourceDefinition as the API server lists it, around one official schema."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {"kind": kind, "plural": plural},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": name,
                    "served": served,
                    "storage": name == versions[0][0],
                    "schema": {"openAPIV3Schema": schema},
                }
                for name, served in versions
            ],
        },
    }


def with_typo(obj: dict[str, Any]) -> dict[str, Any]:
    obj["spec"]["pytorchReplicaSpecs"]["Worker"]["replica"] = 2
    return obj


def test_from_dir_reads_the_operators_crd_files(schemas: Any) -> None:
    # every served version of every CRD the operators' modules ship
    assert schemas.keys() == [
        ("kubeflow.org", "v1", "JAXJob"),
        ("kubeflow.org", "v1", "MPIJob"),
        ("kubeflow.org", "v1", "PaddleJob"),
        ("kubeflow.org", "v1", "PyTorchJob"),
        ("kubeflow.org", "v1", "TFJob"),
        ("kubeflow.org", "v1", "XGBoostJob"),
        ("kubeflow.org", "v2beta1", "MPIJob"),
        ("ray.io", "v1", "RayCluster"),
        ("ray.io", "v1", "RayCronJob"),
        ("ray.io", "v1", "RayJob"),
        ("ray.io", "v1", "RayService"),
        ("ray.io", "v1alpha1", "RayCluster"),
        ("ray.io", "v1alpha1", "RayJob"),
        ("ray.io", "v1alpha1", "RayService"),
    ]
    key = ("kubeflow.org", "v1", "PyTorchJob")
    assert schemas.validator(key) is schemas.validator(key)  # compiled once


def test_from_dir_reads_whole_crd_manifests_yaml_and_json(
    tmp_path: Path, schemas: Any, make: Callable[[str], dict[str, Any]]
) -> None:
    pytorch = crd(
        schemas.schema(("kubeflow.org", "v1", "PyTorchJob")),
        "kubeflow.org",
        "PyTorchJob",
        "pytorchjobs",
        [("v1", True)],
    )
    ray_schema = schemas.schema(("ray.io", "v1", "RayJob"))
    ray = crd(ray_schema, "ray.io", "RayJob", "rayjobs", [("v1", True), ("v1alpha1", False)])
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    (tmp_path / "crds.yaml").write_text(yaml.dump_all([{"kind": "Namespace"}, pytorch], Dumper=dumper))
    (tmp_path / "ray.json").write_text(json.dumps({"kind": "List", "items": [ray]}))
    (tmp_path / "notes.txt").write_text("ignored")
    schemas = SchemaSet.from_dir(tmp_path)
    assert schemas.keys() == [("kubeflow.org", "v1", "PyTorchJob"), ("ray.io", "v1", "RayJob")]
    assert schemas.source(("ray.io", "v1", "RayJob")).endswith("ray.json")
    validate_object(make("ray"), schemas)
    with pytest.raises(ObjectInvalid) as info:
        validate_object(with_typo(make("pytorch")), schemas)
    assert info.value.paths == ["spec.pytorchReplicaSpecs.Worker.replica"]


def test_from_crds_keeps_served_versions_only(schemas: Any, make: Callable[[str], dict[str, Any]]) -> None:
    ray_schema = schemas.schema(("ray.io", "v1", "RayJob"))
    ray = crd(ray_schema, "ray.io", "RayJob", "rayjobs", [("v1", True), ("v1alpha1", False)])
    schemas = SchemaSet.from_crds([ray])
    assert schemas.keys() == [("ray.io", "v1", "RayJob")]
    old = make("ray")
    old["apiVersion"] = "ray.io/v1alpha1"
    with pytest.raises(ObjectInvalid) as info:
        validate_object(old, schemas)
    assert "apiVersion" in info.value.paths


def test_from_crds_accepts_kubernetes_client_models() -> None:
    from kubernetes.client import (
        V1CustomResourceDefinition,
        V1CustomResourceDefinitionNames,
        V1CustomResourceDefinitionSpec,
        V1CustomResourceDefinitionVersion,
        V1CustomResourceValidation,
        V1JSONSchemaProps,
        V1ObjectMeta,
    )

    containers = V1JSONSchemaProps(
        type="array",
        x_kubernetes_list_type="map",
        x_kubernetes_list_map_keys=["name"],
        items={"type": "object", "properties": {"name": {"type": "string"}}},
    )
    schema = V1JSONSchemaProps(
        type="object",
        properties={"spec": V1JSONSchemaProps(type="object", properties={"containers": containers})},
    )
    model = V1CustomResourceDefinition(
        metadata=V1ObjectMeta(name="things.example.com"),
        spec=V1CustomResourceDefinitionSpec(
            group="example.com",
            names=V1CustomResourceDefinitionNames(kind="Thing", plural="things"),
            scope="Namespaced",
            versions=[
                V1CustomResourceDefinitionVersion(
                    name="v1", served=True, storage=True, schema=V1CustomResourceValidation(open_apiv3_schema=schema)
                )
            ],
        ),
    )
    schemas = SchemaSet.from_crds([model])
    thing = {"apiVersion": "example.com/v1", "kind": "Thing", "spec": {"containers": [{"name": "a"}, {"name": "a"}]}}
    with pytest.raises(ObjectInvalid) as info:  # the extension keys survived the model's attribute names
        validate_object(thing, schemas)
    assert info.value.paths == ["spec.containers[1].name"]


def test_from_dir_errors_name_the_directory_or_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        SchemaSet.from_dir(tmp_path / "missing")
    with pytest.raises(ValueError, match="no CRD schemas found"):
        SchemaSet.from_dir(tmp_path)
    (tmp_path / "kubeflow.org_pytorchjobs.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"kubeflow\.org_pytorchjobs\.json"):
        SchemaSet.from_dir(tmp_path)


def test_from_crds_refuses_non_crds() -> None:
    with pytest.raises(ValueError, match="not a CustomResourceDefinition"):
        SchemaSet.from_crds([{"kind": "Pod"}])


def test_one_warning_per_process_without_schemas_and_rules_still_run(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, make: Callable[[str], dict[str, Any]]
) -> None:
    validate_module = importlib.import_module("flytekitplugins.kubejobs.schema.validate")
    monkeypatch.setattr(validate_module, "_warned", threading.Event())  # as in a fresh process
    caplog.set_level(logging.WARNING, logger="flytekitplugins.kubejobs.schema")
    validate_object(with_typo(make("pytorch")), None)  # schema-only problem: not seen without schemas
    bad = make("pytorch")
    bad["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    with pytest.raises(ObjectInvalid):
        validate_object(bad, None)
    validate_object(make("ray"), None)
    records = [r for r in caplog.records if r.name.startswith("flytekitplugins.kubejobs.schema")]
    assert len(records) == 1
    assert "no CRD schemas" in records[0].getMessage() and "--crd-dir" in records[0].getMessage()


@pytest.mark.parametrize("module", ["__init__", "problems", "schemaset", "validate"])
def test_documented_examples_run(module: str) -> None:
    name = "flytekitplugins.kubejobs.schema" + ("" if module == "__init__" else f".{module}")
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0


def test_imports_stay_light_until_used() -> None:
    # jsonschema and the kubernetes client load only when a schema validator / a cluster is first needed.
    code = (
        "import sys\n"
        "from flytekitplugins.kubejobs import cli\n"
        "from flytekitplugins.kubejobs.schema import validate_object, ObjectInvalid\n"
        "job = {'apiVersion': 'ray.io/v1', 'kind': 'RayJob', 'metadata': {'name': 'x'}, 'spec': {}}\n"
        "try:\n"
        "    validate_object(job, None, warn_without_schemas=False)\n"
        "except ObjectInvalid:\n"
        "    pass\n"
        "print(sorted(m for m in ('jsonschema', 'kubernetes.client') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stderr


def test_no_crd_copies_ship_with_the_packages() -> None:
    plugins = Path(__file__).resolve().parents[3] / "plugins"
    for path in plugins.rglob("*"):
        if path.suffix in (".json", ".yaml", ".yml") and path.is_file():
            assert "openAPIV3Schema" not in path.read_text(errors="replace"), path
            assert "CustomResourceDefinition" not in path.read_text(errors="replace"), path


@pytest.mark.parametrize("package", ["flytekitplugins-kubejobs", "flytekitplugins-raycluster"])
def test_built_wheels_hold_no_crd_schema(package: str, tmp_path: Path) -> None:
    # What pip installs, not what the tree holds: a package-data or MANIFEST change would show here. Built
    # from a copy so the shared source tree gets no build/ directory.
    import shutil
    import zipfile

    source = tmp_path / package
    ignore = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    shutil.copytree(Path(__file__).resolve().parents[3] / "plugins" / package, source, ignore=ignore)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), "."],
        cwd=source,
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        data = [n for n in names if ".dist-info/" not in n and not n.endswith((".py", "py.typed"))]
        assert data == [], f"{wheel.name} ships data files: {data}"
        assert any(n.endswith("/schema/schemaset.py") or n.endswith("/raycluster/task_configs.py") for n in names)
