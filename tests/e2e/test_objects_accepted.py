"""Every object the backend builds for the backend test configs is accepted by the real API server unchanged.

The objects are those `tests/kubejobs/backend_build` builds (its `kit.build` records each one when
KUBEJOBS_RECORD_BUILT_OBJECTS is set; the fuzz tests are left out so that the set is the same every run).
Each is created with dryRun=All and fieldValidation=Strict, so the real structural schema, CEL rules, the
training operator's validating webhook and defaulting all run; nothing is stored. The returned object must
hold everything that was sent, unchanged (nothing pruned, nothing rewritten), and whatever the server added
must be a `default` that the operator's CRD schema declares at that path.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
PLURALS = {"PyTorchJob": "pytorchjobs", "TFJob": "tfjobs", "MPIJob": "mpijobs", "RayJob": "rayjobs"}
Path_ = tuple[Any, ...]


@pytest.fixture(scope="module")
def built_objects(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    record = tmp_path_factory.mktemp("built-objects")
    suite = REPO / "tests" / "kubejobs" / "backend_build"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", str(suite), f"--ignore={suite / 'test_fuzz.py'}"],
        cwd=REPO,
        env={**os.environ, "KUBEJOBS_RECORD_BUILT_OBJECTS": str(record)},
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    objects = [json.loads(p.read_text()) for p in sorted(record.glob("*.json"))]
    assert {o["kind"] for o in objects} == set(PLURALS), "the backend tests build every kind"
    return objects


def leaves(value: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """(path, value) of every scalar and empty container in a JSON value."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from leaves(item, (*path, key))
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            yield from leaves(item, (*path, index))
    else:
        yield path, value


def lookup(value: Any, path: Path_) -> tuple[bool, Any]:
    for step in path:
        in_dict = isinstance(value, dict) and isinstance(step, str) and step in value
        in_list = isinstance(value, list) and isinstance(step, int) and step < len(value)
        if not (in_dict or in_list):
            return False, None
        value = value[step]
    return True, value


def schema_at(schema: Any, path: Path_) -> Any:
    """The schema node that governs ``path`` (properties, items, additionalProperties)."""
    for step in path:
        if isinstance(step, int):
            schema = schema.get("items", {})
        elif step in schema.get("properties", {}):
            schema = schema["properties"][step]
        else:
            extra = schema.get("additionalProperties")
            schema = extra if isinstance(extra, dict) else {}
    return schema


def defaulted_by_schema(schema: Any, sent: Any, returned: Any, path: Path_) -> bool:
    """Whether the value added at ``path`` is the schema default there (or lies inside a defaulted parent)."""
    for depth in range(len(path), 0, -1):
        parent = path[:depth]
        if not lookup(sent, parent)[0]:
            node = schema_at(schema, parent)
            if "default" in node and lookup(returned, parent)[1] == node["default"]:
                return True
    return False


def compared(obj: dict[str, Any]) -> dict[str, Any]:
    """The parts of an object that the server must keep as sent: spec, labels and annotations."""
    return {"spec": obj["spec"], "metadata": {k: obj["metadata"].get(k) for k in ("labels", "annotations")}}


def generic(path: Path_) -> str:
    return ".".join("[]" if isinstance(p, int) else str(p) for p in path)


def test_every_built_object_is_accepted_unchanged(
    built_objects: list[dict[str, Any]], k8s: Any, schemas: Any, cluster: dict[str, Any]
) -> None:
    from kubernetes import client

    core = client.CoreV1Api(k8s)
    namespaces: set[str] = set()
    refused: list[str] = []
    changed: list[str] = []
    defaults: dict[str, set[str]] = {}
    for obj in built_objects:
        group, version = obj["apiVersion"].split("/")
        namespace = obj["metadata"]["namespace"]
        if namespace not in namespaces:
            with contextlib.suppress(client.ApiException):  # 409: made by an earlier test
                core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
            namespaces.add(namespace)
        try:
            response: Any = client.CustomObjectsApi(k8s).create_namespaced_custom_object(
                group,
                version,
                namespace,
                PLURALS[obj["kind"]],
                obj,
                dry_run="All",
                field_validation="Strict",
                _preload_content=False,
            )
        except client.ApiException as e:
            refused.append(
                f"{obj['kind']} {obj['metadata']['name']}: {e.status} {json.loads(e.body or '{}').get('message')}"
            )
            continue
        sent_part, got_part = compared(obj), compared(json.loads(response.data or b"{}"))
        for leaf, value in leaves(sent_part):
            found, got = lookup(got_part, leaf)
            if value in ({}, []) and (got is None or type(got) is type(value)):
                # An empty map or list: the server's JSON omits an empty metadata map, and what it adds into
                # an empty container is checked below (CRD defaults only).
                continue
            if not found:
                changed.append(f"{obj['kind']} {generic(leaf)}: pruned")
            elif got != value:
                changed.append(f"{obj['kind']} {generic(leaf)}: sent {value!r}, got {got!r}")
        schema = schemas.schema((group, version, obj["kind"]))
        for leaf, value in leaves(got_part):
            if not lookup(sent_part, leaf)[0]:
                where = f"{obj['kind']} {generic(leaf)} = {value!r}"
                assert defaulted_by_schema(schema, sent_part, got_part, leaf), f"added, not a CRD default: {where}"
                defaults.setdefault(obj["kind"], set()).add(f"{generic(leaf)} = {value!r}")
    assert not refused, "\n".join(refused[:20])
    assert not changed, "\n".join(sorted(set(changed))[:40])
    # What the CRD schemas default when the backend leaves it out (recorded; see docs/architecture.md).
    print(json.dumps({kind: sorted(paths) for kind, paths in defaults.items()}, indent=1))


def test_the_accepted_rayjobs_carry_every_rayjob_setting(built_objects: list[dict[str, Any]]) -> None:
    # The kubejobs.rayJob keys are RayJob spec fields copied as sent: each must be among the objects the test
    # above sends to the real API server (rayClusterSpec's autoscaler keys and the submitter resources inside).
    from flytekitplugins.kubejobs.wire.extension import RAY_JOB_KEYS

    specs = [o["spec"] for o in built_objects if o["kind"] == "RayJob"]
    seen = {key for spec in specs for key in spec}
    assert RAY_JOB_KEYS - {"rayClusterSpec", "submitterPodTemplate"} <= seen, sorted(RAY_JOB_KEYS - seen)
    options = [s["rayClusterSpec"].get("autoscalerOptions", {}) for s in specs if "rayClusterSpec" in s]
    assert any(o.get("version") == "v2" and o.get("imagePullPolicy") for o in options)
    submitters = [
        s["submitterPodTemplate"]["spec"]["containers"][0].get("resources")
        for s in specs
        if "submitterPodTemplate" in s
    ]
    assert {"cpu": "500m", "memory": "256Mi"} in [r.get("limits") for r in submitters if r]


def test_canonical_quantities_are_what_the_api_server_writes_back(k8s: Any) -> None:
    """wire.quantity.canonical_quantity against the API server's own Go round trip (a built-in kind's
    quantities come back canonical): the spelling a TrainJob's immutable spec.trainer must use so that
    Kueue's update through Go's types leaves it unchanged."""
    from flytekitplugins.kubejobs.wire.quantity import canonical_quantity
    from kubernetes import client

    texts = ["1000m", "1024Mi", "0.5", "1.5", "1.5Ki", "0.5Gi", "0.5Ki", "1000", "1500", "12000", "1000000", "250m"]
    # no sub-milli values: a LimitRange rounds those up to milli units, a Go client round trip keeps nano units
    texts += ["2Gi", "1e3", "1500e-3", "1200e3", "0", "0Gi", "3Ti", "2048Ki", "1000k", "1500M"]
    written = {f"example.com/q{i}": text for i, text in enumerate(texts)}
    limits = client.V1LimitRange(
        metadata=client.V1ObjectMeta(name="canonical"),
        spec=client.V1LimitRangeSpec(limits=[client.V1LimitRangeItem(type="Container", max=written)]),
    )
    response: Any = client.CoreV1Api(k8s).create_namespaced_limit_range(
        "default", limits, dry_run="All", _preload_content=False
    )
    back = json.loads(response.data)["spec"]["limits"][0]["max"]
    assert {written[k]: back[k] for k in written} == {text: canonical_quantity(text) for text in written.values()}
