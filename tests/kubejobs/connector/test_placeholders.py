"""Pod-template tasks: FlytePropeller hands a ``k8s_pod`` target over with ``{{.input}}``... unrendered.

The connector fills them as flytekit's connector framework does (``render_task_template``: expected
values come from it), writes the inputs with flytekit's data persistence, and the rendered command
really runs: ``pyflyte-execute`` reads those inputs and writes the outputs where propeller reads them.
"""

from __future__ import annotations

import asyncio
import datetime
import importlib.util
import os
import subprocess
import sys
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakeapi import FakeApiServer
from flyteidl.core import literals_pb2, tasks_pb2
from flytekit import FlyteContextManager
from flytekit.core.type_engine import TypeEngine
from flytekit.extend.backend.base_connector import ConnectorRegistry
from flytekit.extend.backend.utils import render_task_template
from flytekit.models import task as task_models
from flytekit.models.literals import LiteralMap
from google.protobuf.struct_pb2 import Struct

HERE = Path(__file__).resolve().parent
G, P = "kubeflow.org", "pytorchjobs"


@pytest.fixture(scope="module")
def pod_task_template() -> Iterator[task_models.TaskTemplate]:
    """``pod_tasks.scale`` serialized by flytekit (module name ``pod_tasks``, as pyflyte-execute imports it)."""
    from flytekit.configuration import ImageConfig, SerializationSettings
    from flytekit.tools.translator import get_serializable

    spec = importlib.util.spec_from_file_location("pod_tasks", HERE / "pod_tasks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["pod_tasks"] = module
    try:
        spec.loader.exec_module(module)
        settings = SerializationSettings(image_config=ImageConfig.auto_default_image())
        yield get_serializable(OrderedDict(), settings, module.scale).template
    finally:
        sys.modules.pop("pod_tasks", None)


def _inputs(**values: Any) -> LiteralMap:
    ctx = FlyteContextManager.current_context()
    types = {k: list[int] if isinstance(v, list) else type(v) for k, v in values.items()}
    return TypeEngine.dict_to_literal_map(ctx, values, types)


def _primary_args(server: FakeApiServer, role: str = "Master") -> list[str]:
    (obj,) = server.objects(G, P)
    (container,) = obj["spec"]["pytorchReplicaSpecs"][role]["template"]["spec"]["containers"]
    return list(container["args"])


def _flytekit_rendering(template: task_models.TaskTemplate, prefix: str) -> list[str]:
    """What flytekit's connector framework renders for the same args (it supports container targets only)."""
    (container,) = template.k8s_pod.pod_spec["containers"]
    as_container = task_models.TaskTemplate(
        id=template.id,
        type=template.type,
        metadata=template.metadata,
        interface=template.interface,
        custom=template.custom,
        container=task_models.Container(
            image=container["image"],
            command=[],
            args=list(container["args"]),
            resources=task_models.Resources([], []),
            env={},
            config={},
        ),
    )
    args = list(render_task_template(as_container, prefix).container.args)
    # flytekit points the previous checkpoint at a folder that never exists; propeller writes "" for a
    # first attempt (flytekit's entrypoint reads both as "no previous checkpoint").
    args[args.index("--prev-checkpoint") + 1] = '""'
    return args


@pytest.mark.parametrize("scheme", ["", "file://"])
def test_a_pod_template_task_gets_its_placeholders_and_inputs_from_the_connector(
    server: FakeApiServer, cached_runtime: Any, kit: Any, tmp_path: Path, pod_task_template: Any, scheme: str
) -> None:
    prefix = f"{scheme}{tmp_path / 'out'}"
    inputs = _inputs(x=3, factor=2.5)
    connector = ConnectorRegistry.get_connector("pytorch", 1)
    asyncio.run(connector.create(pod_task_template, prefix, inputs, kit.metadata("podtask")))

    expected = _flytekit_rendering(pod_task_template, prefix)
    assert _primary_args(server, "Master") == expected
    assert _primary_args(server, "Worker") == expected
    written = literals_pb2.LiteralMap()
    written.ParseFromString((tmp_path / "out" / "inputs.pb").read_bytes())
    assert written == inputs.to_flyte_idl()
    if scheme:
        return
    # The rendered command really runs: pyflyte-execute reads the inputs and writes outputs.pb.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    bin_dir = Path(sys.executable).parent
    subprocess.run([str(bin_dir / expected[0]), *expected[1:]], cwd=tmp_path, env=env, check=True, timeout=60)
    outputs = literals_pb2.LiteralMap()
    outputs.ParseFromString((tmp_path / "out" / "outputs.pb").read_bytes())
    assert outputs.literals["o0"].scalar.primitive.float_value == 7.5


def test_a_container_task_rendered_by_propeller_is_left_as_it_is(
    server: FakeApiServer, cached_runtime: Any, kit: Any, tmp_path: Path
) -> None:
    template = kit.template("pytorch")
    connector = ConnectorRegistry.get_connector("pytorch", 1)
    asyncio.run(connector.create(template, str(tmp_path / "out"), _inputs(x=1), kit.metadata("rendered")))
    assert _primary_args(server, "Worker") == list(template.container.args)
    assert not (tmp_path / "out").exists()  # propeller wrote the inputs already: nothing written


def _pod_target(args: list[str]) -> task_models.TaskTemplate:
    pod_spec = Struct()
    pod_spec.update({"containers": [{"name": "primary", "image": "img:1", "args": args}]})
    pb = tasks_pb2.TaskTemplate(
        type="pytorch",
        task_type_version=1,
        k8s_pod=tasks_pb2.K8sPod(pod_spec=pod_spec),
        config={"primary_container_name": "primary"},
    )
    pb.custom.update({"workerReplicas": {"replicas": 1}})
    return task_models.TaskTemplate.from_flyte_idl(pb)


def test_input_values_and_the_per_retry_key_are_rendered_as_propeller_would(
    server: FakeApiServer, cached_runtime: Any, kit: Any, tmp_path: Path
) -> None:
    names = ["x", "factor", "big", "flag", "name", "when", "sizes"]
    template = _pod_target(["train", *(f"{{{{.Inputs.{n}}}}}" for n in names), "{{.perRetryUniqueKey}}", "{{.other}}"])
    when = datetime.datetime(2026, 1, 2, 3, 4, 5, 250000, tzinfo=datetime.timezone.utc)
    inputs = _inputs(x=3, factor=0.000025, big=1234567.0, flag=False, name="run-a", when=when, sizes=[1, 2])
    connector = ConnectorRegistry.get_connector("pytorch", 1)
    meta = asyncio.run(connector.create(template, str(tmp_path / "out"), inputs, kit.metadata("vals", attempt=2)))
    # Propeller's serializeLiteral: Go's fmt "%v" for numbers and booleans, RFC 3339 for datetimes,
    # "[a,b]" for lists; a placeholder Flyte does not define stays as written.
    printed = ["3", "2.5e-05", "1.234567e+06", "false", "run-a", "2026-01-02T03:04:05.25Z", "[1,2]"]
    assert _primary_args(server, "Worker") == ["train", *printed, meta.name, "{{.other}}"]
    assert meta.name == "vals-n0-2"
    assert not (tmp_path / "out").exists()  # no {{.input}}: nothing to write


@pytest.mark.parametrize(
    ("arg", "inputs", "match"),
    [
        ("{{.Inputs.wait}}", {"wait": datetime.timedelta(seconds=5)}, r"input 'wait' is a duration"),
        ("{{.Inputs.missing}}", {"x": 1}, r"the task has no input named 'missing'"),
        ("{{.taskTemplatePath}}", {}, r"taskTemplatePath.* cannot be rendered by the connector"),
    ],
)
def test_placeholders_the_connector_cannot_fill_are_refused_before_anything_is_created(
    server: FakeApiServer, cached_runtime: Any, kit: Any, tmp_path: Path, arg: str, inputs: Any, match: str
) -> None:
    template = _pod_target(["train", arg, "--inputs", "{{.input}}"])
    connector = ConnectorRegistry.get_connector("pytorch", 1)
    with pytest.raises(ValueError, match=match):
        asyncio.run(connector.submit(template, str(tmp_path / "out"), _inputs(**inputs), kit.metadata("refused")))
    assert server.objects(G, P) == [] and server.store.created == 0
    assert not (tmp_path / "out").exists()  # and no inputs written


def test_a_ray_pod_template_task_gets_a_rendered_entrypoint(
    server: FakeApiServer, cached_runtime: Any, kit: Any, tmp_path: Path
) -> None:
    pb = kit.template("ray").to_flyte_idl()
    pod_spec = Struct()
    args = ["pyflyte-execute", "--inputs", "{{.input}}", "--output-prefix", "{{ .outputPrefix }}"]
    pod_spec.update({"containers": [{"name": "primary", "image": "img:1", "args": args}]})
    pb.ClearField("container")
    pb.k8s_pod.pod_spec.CopyFrom(pod_spec)
    pb.config["primary_container_name"] = "primary"
    prefix = str(tmp_path / "out")
    connector = ConnectorRegistry.get_connector("ray", 0)
    template = task_models.TaskTemplate.from_flyte_idl(pb)
    asyncio.run(connector.create(template, prefix, _inputs(x=1), kit.metadata("raypod")))
    (obj,) = server.objects("ray.io", "rayjobs")
    assert obj["spec"]["entrypoint"] == f"pyflyte-execute --inputs {prefix}/inputs.pb --output-prefix {prefix}"
    written = literals_pb2.LiteralMap()
    written.ParseFromString((tmp_path / "out" / "inputs.pb").read_bytes())
    assert written == _inputs(x=1).to_flyte_idl()


@pytest.mark.parametrize(
    ("where", "match"),
    [
        ("elsewhere", r"is outside the connector's input-prefixes"),
        ("{tmp}-sibling/out", r"is outside the connector's input-prefixes"),  # a shared string prefix is not enough
        ("{tmp}/out/../../etc", r"has a '\.\.' segment"),
        ("file:///etc/cron.d", r"is outside the connector's input-prefixes"),
    ],
)
def test_inputs_are_written_only_under_the_configured_prefixes(
    server: FakeApiServer, cached_runtime: Any, kit: Any, tmp_path: Path, pod_task_template: Any, where: str, match: str
) -> None:
    # The caller names the output prefix; the connector writes there with its own storage credentials.
    prefix = where.format(tmp=tmp_path) if "{tmp}" in where else where
    if where == "elsewhere":
        prefix = str(tmp_path.parent / "elsewhere")
    connector = ConnectorRegistry.get_connector("pytorch", 1)
    with pytest.raises(ValueError, match=match):
        asyncio.run(connector.submit(pod_task_template, prefix, _inputs(x=3, factor=2.5), kit.metadata("outside")))
    assert server.request_total() == 0  # refused before the job was created
    assert not (tmp_path.parent / "elsewhere").exists() and not Path(f"{tmp_path}-sibling").exists()


def test_without_input_prefixes_the_connector_writes_nowhere(
    server: FakeApiServer, kit: Any, tmp_path: Path, pod_task_template: Any
) -> None:
    from flytekitplugins.kubejobs.connector.runtime import configure, shutdown

    configure(kit.settings(server, tmp_path, cache=False))
    try:
        connector = ConnectorRegistry.get_connector("pytorch", 1)
        with pytest.raises(ValueError, match="the connector has no input-prefixes setting"):
            asyncio.run(
                connector.submit(
                    pod_task_template, str(tmp_path / "out"), _inputs(x=1, factor=1.0), kit.metadata("none")
                )
            )
    finally:
        shutdown()
    assert not (tmp_path / "out").exists()
