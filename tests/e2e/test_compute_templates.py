"""Compute templates by name on the real control plane: platform engineers store them with `kubejobs templates`
(or kubectl), the connector resolves the names a task gives from a watch of its own namespace's labelled
ConfigMaps, and the real Training Operator / KubeRay create pods with the template's resources, node selector and
tolerations. An unknown name fails the task permanently, naming the templates that exist; a template created after
the connector started reaches the next task through the watch; a template planted in another namespace, or a
malformed one, is never applied."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import pytest
import yaml
from click.testing import CliRunner
from flyteidl.core.execution_pb2 import TaskExecution
from flytekit import Resources, task
from flytekit.configuration import ImageConfig, SerializationSettings
from flytekit.extend.backend.base_connector import ConnectorRegistry
from flytekit.models.task import TaskExecutionMetadata
from flytekit.models.task import TaskTemplate as TaskTemplateModel
from flytekit.tools.translator import get_serializable
from flytekitplugins.kfoperators import Master, PyTorch, Worker
from flytekitplugins.kubejobs.backend import BackendConfig
from flytekitplugins.kubejobs.cli import main
from flytekitplugins.kubejobs.connector.runtime import Runtime, configure, shutdown
from flytekitplugins.kubejobs.connector.settings import ConnectorSettings
from flytekitplugins.kubejobs.wire.compute import LABEL_SELECTOR
from flytekitplugins.raycluster import HeadNodeConfig, RayJobConfig, WorkerNodeConfig

from .connector_kit import metadata_pb
from .controlplane import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::UserWarning:flytekitplugins.*")]

REPO = Path(__file__).resolve().parents[2]
SETTINGS = SerializationSettings(
    project="flytesnacks",
    domain="development",
    version="v1",
    image_config=ImageConfig.auto(img_name="registry.example/flyte:1.0"),
)
TEMPLATES_FILE = """\
- name: a100x8
  cpu: "8"
  memory: 4Gi
  gpu: 8
  nodeSelector: {pool: a100}
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
- name: cpu-large
  cpu: "3"
  memory: 2Gi
"""


def train(epochs: int) -> float:
    return float(epochs)


def ray_main() -> None: ...


def _template(config: Any, fn: Any = train) -> TaskTemplateModel:
    return get_serializable(OrderedDict(), SETTINGS, task(task_config=config)(fn)).template


def pytorch(worker_template: str, master_template: Optional[str] = None) -> TaskTemplateModel:
    master = Master(compute_template=master_template) if master_template else Master()
    return _template(
        PyTorch(worker=Worker(replicas=1, compute_template=worker_template, requests=Resources(cpu="1")), master=master)
    )


def cli(kubeconfig: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), env={"KUBECONFIG": kubeconfig}, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def templates_namespace(k8s: Any) -> Iterator[str]:
    """The connector's own namespace (where its templates live), fresh per test."""
    from kubernetes import client

    name = "e2e-templates-" + os.urandom(3).hex()
    client.CoreV1Api(k8s).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    client.CoreV1Api(k8s).delete_namespace(name)


@pytest.fixture
def runtime(cluster: dict[str, Any], namespace: str, templates_namespace: str, tmp_path: Path) -> Iterator[Runtime]:
    settings = ConnectorSettings(
        kubeconfig=cluster["kubeconfig"],
        namespaces=(namespace,),
        templates_namespace=templates_namespace,
        input_prefixes=(str(tmp_path),),  # the task's {{.input}} is written there
        retry_deadline=20.0,
        backend=BackendConfig(),
    )
    yield configure(settings)
    shutdown()


def create(template: TaskTemplateModel, namespace: str, execution: str) -> Any:
    connector = ConnectorRegistry.get_connector(template.type, template.task_type_version)
    meta = TaskExecutionMetadata.from_flyte_idl(metadata_pb(namespace, execution))
    from flytekitplugins.kubejobs.connector.runtime import runtime

    prefix = f"{runtime().settings.input_prefixes[0]}/{execution}"
    return asyncio.run(connector.create(template, prefix, None, meta))


def get(template: TaskTemplateModel, resource_meta: Any) -> Any:
    connector = ConnectorRegistry.get_connector(template.type, template.task_type_version)
    return asyncio.run(connector.get(resource_meta))


def pods_of(k8s: Any, namespace: str, selector: str, count: int) -> list[dict[str, Any]]:
    """The pods the operator created (as JSON), once there are ``count`` of them."""
    import json

    from kubernetes import client

    core: Any = client.CoreV1Api(k8s)

    def listed() -> Optional[list[dict[str, Any]]]:
        raw = core.list_namespaced_pod(namespace, label_selector=selector, _preload_content=False)
        items: list[dict[str, Any]] = json.loads(raw.data)["items"]
        return items if len(items) >= count else None

    return wait_for(f"{count} pods of {selector}", listed, 90)


def test_templates_cli_stores_lists_gets_and_deletes_configmaps(
    cluster: dict[str, Any], templates_namespace: str, tmp_path: Path
) -> None:
    kubeconfig, ns = cluster["kubeconfig"], templates_namespace
    path = tmp_path / "templates.yaml"
    path.write_text(TEMPLATES_FILE)
    assert cli(kubeconfig, "templates", "create", "-f", str(path), "-n", ns)[0] == 0
    code, out, err = cli(
        kubeconfig,
        "templates",
        "create",
        "fpga",
        "--extended-resource",
        "example.com/fpga=2",
        "--toleration",
        "fpga=yes:NoSchedule",
        "--node-selector",
        "accel=fpga",
        "-n",
        ns,
    )
    assert code == 0, err
    assert out == f"created: compute template 'fpga' (ConfigMap {ns}/fpga)\n"
    code, _, err = cli(kubeconfig, "templates", "create", "fpga", "--cpu", "1", "-n", ns)
    assert code == 1 and "already exists; give --replace" in err
    code, out, _ = cli(kubeconfig, "templates", "list", "-n", ns, "-o", "yaml")
    assert code == 0
    assert [t["name"] for t in yaml.safe_load(out)] == ["a100x8", "cpu-large", "fpga"]
    code, out, _ = cli(kubeconfig, "templates", "get", "fpga", "-n", ns)
    assert yaml.safe_load(out) == {
        "name": "fpga",
        "extendedResources": {"example.com/fpga": "2"},
        "tolerations": [{"key": "fpga", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}],
        "nodeSelector": {"accel": "fpga"},
    }
    code, out, _ = cli(kubeconfig, "templates", "list", "-n", ns)
    assert code == 0 and "a100x8" in out and "8 nvidia.com/gpu" in out
    assert cli(kubeconfig, "templates", "create", "fpga", "--cpu", "1", "--replace", "-n", ns)[1].startswith(
        "replaced:"
    )
    # render resolves the names from the cluster, as the connector would
    tasks = REPO / "tests" / "kubejobs" / "cli" / "cli_example_tasks.py"
    code, out, err = cli(
        kubeconfig, "render", str(tasks), "train_named_template", "--from-cluster", "--templates-namespace", ns
    )
    assert code == 0, err
    worker = yaml.safe_load(out)["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    assert worker["nodeSelector"] == {"pool": "a100"} and worker["containers"][0]["resources"]["limits"]["cpu"] == "8"
    assert cli(kubeconfig, "templates", "delete", "fpga", "-n", ns)[0] == 0
    code, _, err = cli(kubeconfig, "templates", "get", "fpga", "-n", ns)
    assert code == 1 and f"compute template 'fpga' does not exist in namespace {ns}" in err


def test_a_plain_manifest_is_a_template_and_the_cli_will_not_touch_other_configmaps(
    cluster: dict[str, Any], k8s: Any, templates_namespace: str, tmp_path: Path
) -> None:
    from kubernetes import client

    # The README's example manifest, applied as a platform engineer would (kubectl when present, else the API).
    readme = (REPO / "plugins" / "flytekitplugins-kubejobs" / "README.md").read_text()
    manifest = readme.split("```yaml\n# compute-template.yaml\n", 1)[1].split("```", 1)[0]
    doc = yaml.safe_load(manifest)
    doc["metadata"]["namespace"] = templates_namespace
    kubectl = shutil.which("kubectl")
    if kubectl:
        path = tmp_path / "cm.yaml"
        path.write_text(yaml.safe_dump(doc))
        env = {**os.environ, "KUBECONFIG": cluster["kubeconfig"]}
        subprocess.run([kubectl, "apply", "-f", str(path)], check=True, env=env, capture_output=True)
    else:
        client.CoreV1Api(k8s).create_namespaced_config_map(templates_namespace, doc)
    code, out, err = cli(cluster["kubeconfig"], "templates", "get", doc["metadata"]["name"], "-n", templates_namespace)
    assert code == 0, err
    assert yaml.safe_load(out)["nodeSelector"] == {"pool": "a100"}
    client.CoreV1Api(k8s).create_namespaced_config_map(
        templates_namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="app-config"), data={"cpu": "1"})
    )
    code, _, err = cli(cluster["kubeconfig"], "templates", "delete", "app-config", "-n", templates_namespace)
    assert code == 1 and "is not a compute template" in err
    assert client.CoreV1Api(k8s).read_namespaced_config_map("app-config", templates_namespace) is not None


def test_a_pytorch_task_naming_templates_gets_their_resources_on_the_operator_s_pods(
    runtime: Runtime, cluster: dict[str, Any], k8s: Any, namespace: str, templates_namespace: str, tmp_path: Path
) -> None:
    path = tmp_path / "templates.yaml"
    path.write_text(TEMPLATES_FILE)
    assert cli(cluster["kubeconfig"], "templates", "create", "-f", str(path), "-n", templates_namespace)[0] == 0
    template = pytorch("a100x8", master_template="cpu-large")
    job = create(template, namespace, "named")
    assert not job.refused, job.refused
    pods = {
        p["metadata"]["labels"]["training.kubeflow.org/replica-type"]: p["spec"]
        for p in pods_of(k8s, namespace, f"training.kubeflow.org/job-name={job.name}", 2)
    }
    worker, master = pods["worker"], pods["master"]
    assert worker["containers"][0]["resources"] == {
        "requests": {"cpu": "1", "memory": "4Gi", "nvidia.com/gpu": "8"},  # the role's own cpu request wins
        "limits": {"cpu": "8", "memory": "4Gi", "nvidia.com/gpu": "8"},
    }
    assert worker["nodeSelector"] == {"pool": "a100"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in worker["tolerations"]
    assert master["containers"][0]["resources"]["limits"] == {"cpu": "3", "memory": "2Gi"}
    assert "pool" not in (master.get("nodeSelector") or {})
    # the templates namespace is the only one the connector read ConfigMaps from, through one watch
    informer = runtime.templates.informer
    assert informer is not None and informer.namespace == templates_namespace and informer.watching


def test_a_ray_task_naming_templates_gets_them_on_its_groups(
    runtime: Runtime, cluster: dict[str, Any], k8s: Any, namespace: str, templates_namespace: str, tmp_path: Path
) -> None:
    from kubernetes import client

    path = tmp_path / "templates.yaml"
    path.write_text(TEMPLATES_FILE)
    assert cli(cluster["kubeconfig"], "templates", "create", "-f", str(path), "-n", templates_namespace)[0] == 0
    config = RayJobConfig(
        head_node_config=HeadNodeConfig(compute_template="cpu-large"),
        worker_node_config=[WorkerNodeConfig("gpu", replicas=1, compute_template="a100x8")],
    )
    template = _template(config, ray_main)
    job = create(template, namespace, "rayjob")
    assert not job.refused, job.refused
    custom: Any = client.CustomObjectsApi(k8s)
    obj = custom.get_namespaced_custom_object("ray.io", "v1", namespace, "rayjobs", job.name)
    cluster_spec = obj["spec"]["rayClusterSpec"]
    head = cluster_spec["headGroupSpec"]["template"]["spec"]
    gpu = cluster_spec["workerGroupSpecs"][0]["template"]["spec"]
    assert head["containers"][0]["resources"]["limits"] == {"cpu": "3", "memory": "2Gi"}
    assert gpu["containers"][0]["resources"]["limits"] == {"cpu": "8", "memory": "4Gi", "nvidia.com/gpu": "8"}
    assert gpu["nodeSelector"] == {"pool": "a100"}


def test_an_unknown_name_fails_permanently_naming_the_templates_that_exist(
    runtime: Runtime, cluster: dict[str, Any], k8s: Any, namespace: str, templates_namespace: str, tmp_path: Path
) -> None:
    from kubernetes import client

    path = tmp_path / "templates.yaml"
    path.write_text(TEMPLATES_FILE)
    assert cli(cluster["kubeconfig"], "templates", "create", "-f", str(path), "-n", templates_namespace)[0] == 0
    template = pytorch("h100x8")
    job = create(template, namespace, "unknown")
    resource = get(template, job)
    assert resource.phase == TaskExecution.FAILED  # permanent: propeller does not re-attempt
    assert resource.message == (
        "[TaskRefused] BuildError: Worker: compute template 'h100x8' does not exist in namespace "
        f"'{templates_namespace}'; existing templates: 'a100x8', 'cpu-large'"
    )
    custom: Any = client.CustomObjectsApi(k8s)
    jobs = custom.list_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs")
    assert jobs["items"] == []  # nothing was created


def test_a_template_created_after_the_connector_started_is_seen_through_the_watch(
    runtime: Runtime, cluster: dict[str, Any], namespace: str, templates_namespace: str
) -> None:
    kubeconfig = cluster["kubeconfig"]
    assert cli(kubeconfig, "templates", "create", "cpu-large", "--cpu", "3", "-n", templates_namespace)[0] == 0
    template = pytorch("late")
    first = create(template, namespace, "before")
    assert "compute template 'late' does not exist" in first.refused and "'cpu-large'" in first.refused
    informer = runtime.templates.informer
    assert informer is not None
    wait_for("the template informer to sync", lambda: True if informer.snapshot() is not None else None, 30)
    assert cli(kubeconfig, "templates", "create", "late", "--cpu", "2", "-n", templates_namespace)[0] == 0

    def seen() -> Optional[bool]:
        held = informer.snapshot() or []
        return True if any(o["metadata"]["name"] == "late" for o in held) else None

    wait_for("the watch to deliver the new template", seen, 30)
    assert informer.relists == 1  # delivered by the watch, not by a new list
    second = create(template, namespace, "after")
    assert not second.refused, second.refused


def test_planted_and_malformed_templates_are_never_applied(
    runtime: Runtime, cluster: dict[str, Any], k8s: Any, namespace: str, templates_namespace: str
) -> None:
    from kubernetes import client

    core = client.CoreV1Api(k8s)
    labels = dict(item.split("=") for item in LABEL_SELECTOR.split(","))
    # another team writes a template into its own namespace (the job namespace): it is no template of the connector's
    core.create_namespaced_config_map(
        namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="planted", labels=labels), data={"cpu": "64"})
    )
    # a malformed one in the connector's namespace, next to a good one
    for name, data in (
        ("privileged", {"cpu": "1", "securityContext": '{"privileged": true}'}),
        ("badqty", {"memory": "lots"}),
        ("good", {"cpu": "2"}),
    ):
        meta = client.V1ObjectMeta(name=name, labels=labels)
        core.create_namespaced_config_map(templates_namespace, client.V1ConfigMap(metadata=meta, data=data))
    planted = create(pytorch("planted"), namespace, "planted")
    assert f"compute template 'planted' does not exist in namespace '{templates_namespace}'" in planted.refused
    assert "existing templates: 'good'" in planted.refused
    privileged = create(pytorch("privileged"), namespace, "privileged")
    assert (
        "compute template 'privileged'" in privileged.refused
        and "unknown keys ['securityContext']" in privileged.refused
    )
    badqty = create(pytorch("badqty"), namespace, "badqty")
    assert "memory is not a Kubernetes quantity: 'lots'" in badqty.refused
    good = create(pytorch("good"), namespace, "good")  # the cache still serves the good one
    assert not good.refused, good.refused
    informer = runtime.templates.informer
    assert informer is not None and informer.running


def test_without_the_cache_each_create_lists_the_templates(
    cluster: dict[str, Any], namespace: str, templates_namespace: str, tmp_path: Path
) -> None:
    configure(
        ConnectorSettings(
            kubeconfig=cluster["kubeconfig"],
            namespaces=(namespace,),
            templates_namespace=templates_namespace,
            input_prefixes=(str(tmp_path),),
            cache=False,
            backend=BackendConfig(),
        )
    )
    try:
        first = create(pytorch("cpu-large"), namespace, "nocache1")
        assert "existing templates: none" in first.refused
        assert (
            cli(cluster["kubeconfig"], "templates", "create", "cpu-large", "--cpu", "3", "-n", templates_namespace)[0]
            == 0
        )
        second = create(pytorch("cpu-large"), namespace, "nocache2")  # read at create: no watch to wait for
        assert not second.refused, second.refused
        from flytekitplugins.kubejobs.connector.runtime import runtime

        assert runtime().templates.informer is None
    finally:
        shutdown()
