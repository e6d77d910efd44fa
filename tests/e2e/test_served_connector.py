"""The connector as it is deployed, driven over gRPC as FlytePropeller drives it, on the real control plane.

`pyflyte serve connector` (and `kubejobs serve` with TLS) runs as a subprocess of this venv, the environment
deploy/Dockerfile installs from the same pins (tests/kubejobs/connector/test_deploy.py checks that). It is
configured only by deploy/connector.yaml's settings file and a kubeconfig holding a TokenRequest token of the
ServiceAccount deploy/rbac.yaml defines, with deploy/rbac.yaml applied to the real API server (its RoleBinding
in the job namespace, none in the "foreign" one). No admin credential reaches the process: its environment is
built from scratch, with a HOME of its own.

Each job goes through CreateTask / GetTask / DeleteTask with the ResourceMeta as opaque bytes and the container
args rendered as propeller renders them; kwok decides each pod's outcome (tests/e2e/controlplane.py). The
phases reported over gRPC come from the real operators' status conditions.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import grpc
import pytest
import yaml
from flyteidl.admin.agent_pb2 import (
    CreateTaskRequest,
    DeleteTaskRequest,
    GetTaskRequest,
    ListAgentsRequest,
    TaskCategory,
    TaskExecutionMetadata,
)
from flyteidl.core.execution_pb2 import TaskExecution
from flyteidl.core.literals_pb2 import Literal, LiteralMap, Primitive, Scalar
from flyteidl.core.tasks_pb2 import TaskTemplate
from flyteidl.service import agent_pb2
from flyteidl.service.agent_pb2_grpc import AgentMetadataServiceStub, AsyncAgentServiceStub
from google.protobuf.json_format import MessageToJson, Parse
from grpc_health.v1 import health_pb2, health_pb2_grpc

from .controlplane import REPO, free_port, wait_for, write_kubeconfig
from .pki import CertificateAuthority
from .test_jobs_run import JOBS, PLURALS, ray_config, task_request

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
SERVICE_HOST = "kubejobs-connector.flyte.svc.cluster.local"  # the host propeller dials (deploy/propeller/)
OUTPUT_PREFIX = "s3://my-s3-bucket/metadata/propeller/proj-dev-{execution}/n0/data/0"
TERMINAL = {TaskExecution.SUCCEEDED, TaskExecution.FAILED, TaskExecution.RETRYABLE_FAILED, TaskExecution.ABORTED}
PHASE_NAMES = {v: k for k, v in TaskExecution.Phase.items()}


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((REPO / "deploy" / name).read_text()) if d]


# -- the cluster side: RBAC from deploy/rbac.yaml, a TokenRequest token, namespaces ----------------------------


@dataclass
class Grant:
    """The ServiceAccount's kubeconfig and the namespaces the test uses."""

    kubeconfig: Path
    granted: str  # has deploy/rbac.yaml's RoleBinding
    foreign: str  # has none: RBAC refuses the connector there
    token: str  # the kubeconfig's TokenRequest token (what the kubelet mounts in the connector's pod)
    server: str
    ca: Path


def _create(k8s: Any, doc: dict[str, Any]) -> None:
    """Create ``doc`` as the admin (server-side apply: the same object again is no change)."""
    from kubernetes.dynamic import DynamicClient

    dynamic: Any = DynamicClient(k8s)  # type: ignore[no-untyped-call]
    resource = dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
    namespace = doc["metadata"].get("namespace")
    resource.server_side_apply(body=doc, namespace=namespace, field_manager="kubejobs-e2e", force_conflicts=True)


@pytest.fixture(scope="module")
def grant(k8s: Any, cluster: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grant]:
    from kubernetes import client

    core = client.CoreV1Api(k8s)
    suffix = os.urandom(3).hex()
    granted, foreign = f"e2e-served-{suffix}", f"e2e-foreign-{suffix}"
    enforce = {"pod-security.kubernetes.io/enforce": "baseline"}
    for name in ("flyte", granted, foreign):
        _create(k8s, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": enforce}})
    bindings = 0
    for doc in _docs("rbac.yaml"):
        if doc["kind"] == "RoleBinding" and doc["roleRef"]["kind"] == "ClusterRole":  # a job namespace's
            if bindings:
                continue  # one is enough: the others differ only in their namespace
            doc = copy.deepcopy(doc)
            doc["metadata"]["namespace"] = granted
            bindings += 1
        _create(k8s, doc)
    (account,) = [d for d in _docs("rbac.yaml") if d["kind"] == "ServiceAccount"]
    issued = core.create_namespaced_service_account_token(
        account["metadata"]["name"],
        account["metadata"]["namespace"],
        client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(audiences=["https://kubernetes.default.svc"], expiration_seconds=3600)
        ),
    ).status
    assert issued is not None and issued.token, "the TokenRequest API issued no token"
    directory = tmp_path_factory.mktemp("served")
    kubeconfig = write_kubeconfig(
        directory / "kubejobs-connector.yaml",
        cluster["server"],
        Path(cluster["ca"]),
        "kubejobs-connector",
        None,
        issued.token,
    )
    yield Grant(kubeconfig, granted, foreign, issued.token, cluster["server"], Path(cluster["ca"]))
    for name in (granted, foreign):
        core.delete_namespace(name)


# -- the served connector ---------------------------------------------------------------------------------------


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    port: int
    metrics_port: int
    log: Path
    credentials: Optional[grpc.ChannelCredentials] = None

    def alive(self) -> None:
        code = self.process.poll()
        if code is not None:
            raise RuntimeError(f"the connector exited with {code}:\n{self.log.read_text(errors='replace')[-3000:]}")

    def channel(self) -> grpc.aio.Channel:
        target = f"127.0.0.1:{self.port}"
        if self.credentials is None:
            return grpc.aio.insecure_channel(target)
        # propeller verifies the certificate for the endpoint's host name, the Service's DNS name
        return grpc.aio.secure_channel(
            target, self.credentials, options=[("grpc.ssl_target_name_override", SERVICE_HOST)]
        )

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return int(self.process.returncode)


def metric_samples(served: Served, name: str) -> dict[tuple[str, str], float]:
    """``(operation, task_type) -> value`` of one of flytekit's connector counters, from the metrics endpoint."""
    with urllib.request.urlopen(f"http://127.0.0.1:{served.metrics_port}/metrics", timeout=10) as response:
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        found = re.fullmatch(rf"{name}\{{(.*)\}} (\S+)", line)
        if found:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', found.group(1)))
            samples[(labels.get("operation", ""), labels.get("task_type", ""))] = float(found.group(2))
    return samples


def health(served: Served, service: str = "") -> Optional[int]:
    """The health service's status of ``service``, or None while the server does not answer."""

    async def check() -> int:
        async with served.channel() as channel:
            reply = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=5
            )
            return int(reply.status)

    try:
        return asyncio.run(check())
    except grpc.RpcError:
        return None


# The kubernetes client reads a pod's service account from this fixed path. A test puts the ServiceAccount's
# files there for the server's process only: a mount namespace of its own with a tmpfs over /run (/var/run's
# target), so nothing changes on the machine.
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
_IN_POD = (
    'mount -t tmpfs tmpfs "$(readlink -f /var/run)" && mkdir -p "$SA" && cp "$FILES"/* "$SA"/ && unset FILES SA'
    ' && exec "$@"'
)


def can_fake_a_pod_mount() -> bool:
    """Whether this user may make a mount namespace (root, or a system allowing unprivileged ones)."""
    try:
        probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def serve(
    argv: list[str],
    grant: Grant,
    directory: Path,
    credentials: Optional[grpc.ChannelCredentials] = None,
    in_cluster: bool = False,
) -> Served:
    """Start ``argv`` (a server command; ``{port}``/``{metrics}`` filled in) as deployed: deploy/connector.yaml's
    settings file, the ServiceAccount's kubeconfig, nothing else. ``in_cluster``: no kubeconfig at all, but
    what a pod has instead (the service account files at their fixed path, ``KUBERNETES_SERVICE_HOST``/
    ``_PORT``), so the connector configures itself as in a pod."""
    (configmap,) = [d for d in _docs("connector.yaml") if d["kind"] == "ConfigMap"]
    settings = directory / "connector.yaml"
    settings.write_text(configmap["data"]["connector.yaml"])
    home = directory / "home"
    home.mkdir(exist_ok=True)
    # the Secret the Deployment mounts at ownership-key-file, here a file of the test's
    ownership_key = directory / "ownership-key"
    ownership_key.write_text(os.urandom(32).hex())
    env = {
        "PATH": f"{BIN}:/usr/bin:/bin",
        "HOME": str(home),  # no ~/.kube/config, no ~/.flyte
        "KUBECONFIG": str(grant.kubeconfig),
        "KUBEJOBS_CONNECTOR_CONFIG": str(settings),
        # the deployed settings file lists flytesnacks-*; here the test's namespaces take their place
        "KUBEJOBS_CONNECTOR_NAMESPACES": f"{grant.granted},{grant.foreign}",
        "KUBEJOBS_CONNECTOR_OWNERSHIP_KEY_FILE": str(ownership_key),
    }
    if in_cluster:
        files = directory / "serviceaccount"
        files.mkdir(exist_ok=True)
        (files / "token").write_text(grant.token)
        (files / "ca.crt").write_bytes(grant.ca.read_bytes())
        (files / "namespace").write_text("flyte")
        host, _, api_port = grant.server.removeprefix("https://").partition(":")
        del env["KUBECONFIG"]
        env.update(KUBERNETES_SERVICE_HOST=host, KUBERNETES_SERVICE_PORT=api_port, FILES=str(files))
        env["SA"] = SERVICE_ACCOUNT_DIR
        argv = ["unshare", "--mount", "--propagation", "private", "sh", "-ec", _IN_POD, "sh", *argv]
    port, metrics = free_port(), free_port()
    log = directory / "connector.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            [a.format(port=port, metrics=metrics) for a in argv],
            cwd=home,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    served = Served(process, port, metrics, log, credentials)
    try:
        serving = health_pb2.HealthCheckResponse.SERVING
        wait_for(
            "the connector's health service", lambda: True if health(served) == serving else None, 120, served.alive
        )
    except BaseException:
        served.stop()
        raise
    return served


@pytest.fixture(scope="module")
def pyflyte(grant: Grant, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    argv = [str(BIN / "pyflyte"), "serve", "connector", "--port", "{port}", "--prometheus_port", "{metrics}"]
    served = serve(argv, grant, tmp_path_factory.mktemp("pyflyte"))
    yield served
    served.stop()


# -- driving it as propeller does ---------------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"\{\{\s*\.(\w+)\s*\}\}")


def propeller_request(template: TaskTemplate, meta: TaskExecutionMetadata) -> CreateTaskRequest:
    """CreateTaskRequest as propeller's connector plugin sends it: the placeholders of the container target's
    args, or of the k8s_pod target's pod spec (the kfoperators tasks' default, for /dev/shm), rendered, and the
    inputs attached."""
    execution = meta.task_execution_id.node_execution_id.execution_id.name
    output_prefix = OUTPUT_PREFIX.format(execution=execution)
    values = {
        "input": output_prefix.rsplit("/", 1)[0] + "/inputs.pb",
        "inputprefix": output_prefix.rsplit("/", 1)[0],
        "outputprefix": output_prefix,
        "rawoutputdataprefix": f"s3://my-s3-bucket/raw/{execution}",
        "checkpointoutputprefix": f"s3://my-s3-bucket/raw/{execution}/_flytecheckpoints",
        "prevcheckpointprefix": '""',  # propeller's "no previous checkpoint"
    }

    def render(text: str) -> str:  # inside JSON text: each value JSON-escaped
        return _PLACEHOLDER.sub(lambda m: json.dumps(values[m.group(1).lower()])[1:-1], text)

    rendered = TaskTemplate()
    rendered.CopyFrom(template)
    target = rendered.WhichOneof("target")
    assert target in ("container", "k8s_pod"), target
    part = rendered.container if target == "container" else rendered.k8s_pod.pod_spec
    Parse(render(MessageToJson(part)), part)
    inputs = LiteralMap(literals={"epochs": Literal(scalar=Scalar(primitive=Primitive(integer=1)))})
    return CreateTaskRequest(
        inputs=inputs, template=rendered, output_prefix=output_prefix, task_execution_metadata=meta
    )


@dataclass
class Run:
    name: str
    outcome: str
    phases: list[str]
    message: str
    resource_meta: bytes
    category: TaskCategory


async def run_task(
    channel: grpc.aio.Channel, name: str, config: Any, namespace: str, outcome: str, timeout: float = 180
) -> Run:
    """CreateTask, then GetTask (every second, as a short resync would) until a terminal phase."""
    template, meta = task_request(config, namespace, f"{name}-{outcome}", outcome)
    stub = AsyncAgentServiceStub(channel)
    created = await stub.CreateTask(propeller_request(template, meta), timeout=90)
    category = TaskCategory(name=template.type, version=template.task_type_version)
    phases: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        reply = await stub.GetTask(
            GetTaskRequest(task_type=template.type, task_category=category, resource_meta=created.resource_meta),
            timeout=30,
        )
        phase = PHASE_NAMES[reply.resource.phase]
        if not phases or phases[-1] != phase:
            phases.append(phase)
        if reply.resource.phase in TERMINAL or time.monotonic() > deadline:
            return Run(name, outcome, phases, reply.resource.message, created.resource_meta, category)
        await asyncio.sleep(1)  # propeller's resync interval, shortened: the poll of a condition with a deadline


#: (config, pod outcome, the final phase over gRPC, a fragment of its message). Kubeflow jobs whose pods fail are
#: retryable, as with propeller's Go plugins; a RayJob whose submitter fails is a permanent failure.
CASES: list[tuple[str, Callable[[], Any], str, str, str]] = [
    *((name, config, "succeed", "SUCCEEDED", "Succeeded") for name, config in JOBS),
    *((name, config, "fail", "RETRYABLE_FAILED", "Failed") for name, config in JOBS),
    ("ray", ray_config, "fail", "FAILED", "SubmissionFailed"),
    # KubeRay reads the Ray job's own result from the head's dashboard, which a kwok pod does not serve: with the
    # submitter done and no answer it gives up after its grace period, a system (retryable) failure. Simulated.
    ("ray", ray_config, "succeed", "RETRYABLE_FAILED", "JobDeploymentStatusTransitionGracePeriodExceeded"),
]


def test_every_kind_reaches_the_phase_its_pods_decide_over_grpc(pyflyte: Served, grant: Grant) -> None:
    async def all_runs() -> list[Run]:
        async with pyflyte.channel() as channel:
            return list(
                await asyncio.gather(
                    *(run_task(channel, name, config(), grant.granted, outcome) for name, config, outcome, *_ in CASES)
                )
            )

    started = time.monotonic()
    runs = asyncio.run(all_runs())
    print(json.dumps({"served_runs_seconds": round(time.monotonic() - started, 1)}))
    wrong = []
    for run, (*_, final, fragment) in zip(runs, CASES, strict=True):
        print(json.dumps({"config": run.name, "outcome": run.outcome, "phases": run.phases, "message": run.message}))
        if run.phases[-1] != final or fragment not in run.message or run.phases[0] not in ("QUEUED", "INITIALIZING"):
            wrong.append((run.name, run.outcome, run.phases, run.message))
    assert not wrong, wrong
    # flytekit's connector service counts every call in the Prometheus metrics
    counted = metric_samples(pyflyte, "flyte_connector_requests_success_total")
    for _, config, *_ in CASES:
        for operation in ("create", "get"):
            task_type = task_request(config(), "ns", "x", "")[0].type
            assert counted.get((operation, task_type), 0) >= 1, (operation, task_type, counted)


def test_a_task_naming_a_compute_template_gets_it_through_rbac_yaml_s_grant(
    pyflyte: Served, grant: Grant, k8s: Any
) -> None:
    from flytekitplugins.kfoperators import PyTorch, Worker
    from flytekitplugins.kubejobs.wire.compute import TemplateSpec
    from kubernetes import client

    # The platform's template, in the connector's own namespace (the served connector's default: no service
    # account file here, so deploy/'s `flyte`), read with only the ServiceAccount's token.
    name = "e2e-served-" + os.urandom(3).hex()
    core: Any = client.CoreV1Api(k8s)
    core.create_namespaced_config_map("flyte", TemplateSpec(name, cpu="2", memory="3Gi").to_configmap("flyte"))
    try:

        async def one() -> Run:
            async with pyflyte.channel() as channel:
                config = PyTorch(worker=Worker(replicas=1, compute_template=name))
                return await run_task(channel, "templated", config, grant.granted, "succeed")

        run = asyncio.run(one())
        assert run.phases[-1] == "SUCCEEDED", (run.phases, run.message)
        job_name = json.loads(run.resource_meta)["name"]
        custom: Any = client.CustomObjectsApi(k8s)
        job = custom.get_namespaced_custom_object("kubeflow.org", "v1", grant.granted, "pytorchjobs", job_name)
        worker = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
        assert worker["resources"]["limits"] == {"cpu": "2", "memory": "3Gi"}
    finally:
        core.delete_namespaced_config_map(name, "flyte")


def test_abort_deletes_the_job_and_the_controller_manager_collects_its_pods(
    pyflyte: Served, grant: Grant, k8s: Any
) -> None:
    from kubernetes import client

    config = dict(JOBS)["pytorch"]()

    async def abort() -> tuple[list[str], str]:
        async with pyflyte.channel() as channel:
            stub = AsyncAgentServiceStub(channel)
            template, meta = task_request(config, grant.granted, "abort-me", "")  # pods stay Running
            created = await stub.CreateTask(propeller_request(template, meta), timeout=90)
            category = TaskCategory(name=template.type, version=template.task_type_version)
            request = GetTaskRequest(
                task_type=template.type, task_category=category, resource_meta=created.resource_meta
            )
            phases: list[str] = []
            deadline = time.monotonic() + 120
            while not phases or phases[-1] != "RUNNING":
                assert time.monotonic() < deadline, phases
                phase = PHASE_NAMES[(await stub.GetTask(request, timeout=30)).resource.phase]
                if not phases or phases[-1] != phase:
                    phases.append(phase)
                await asyncio.sleep(0.5)  # poll of a condition with a deadline
            await stub.DeleteTask(
                DeleteTaskRequest(task_type=template.type, task_category=category, resource_meta=created.resource_meta),
                timeout=60,
            )
            return phases, json.loads(created.resource_meta)["name"]

    phases, name = asyncio.run(abort())
    api, core = client.CustomObjectsApi(k8s), client.CoreV1Api(k8s)

    def gone() -> Optional[bool]:
        try:
            api.get_namespaced_custom_object("kubeflow.org", "v1", grant.granted, PLURALS["PyTorchJob"], name)
            return None
        except client.ApiException as e:
            return True if e.status == 404 else None

    wait_for(f"PyTorchJob {name} to be deleted", gone, 60)
    selector = f"training.kubeflow.org/job-name={name}"
    wait_for(
        f"the pods of {name} to be garbage-collected",
        lambda: True if not core.list_namespaced_pod(grant.granted, label_selector=selector).items else None,
        90,
    )
    assert phases[-1] == "RUNNING", phases


def test_propeller_learns_the_versions_flytekit_writes_from_list_agents(pyflyte: Served) -> None:
    async def agents() -> Any:
        async with pyflyte.channel() as channel:
            return await AgentMetadataServiceStub(channel).ListAgents(ListAgentsRequest(), timeout=10)

    reply = asyncio.run(agents())
    (ours,) = [a for a in reply.agents if a.name == "Kubejobs Connector"]
    assert not ours.is_sync
    # propeller v1.16 (webapi/connector getConnectorRegistry) keeps, per task type, the version listed last
    kept = {c.name: c.version for c in ours.supported_task_categories}
    written = {
        template.type: template.task_type_version
        for template, _ in (task_request(config(), "ns", "x", "") for _, config in [*JOBS, ("ray", ray_config)])
    }
    assert kept == written == {"pytorch": 1, "tensorflow": 1, "mpi": 1, "ray": 0}


def test_the_health_service_reports_every_connector_service(pyflyte: Served) -> None:
    serving = health_pb2.HealthCheckResponse.SERVING
    for service in agent_pb2.DESCRIPTOR.services_by_name.values():
        assert health(pyflyte, service.full_name) == serving, service.full_name
    assert health(pyflyte, "grpc.health.v1.Health") == serving


# -- RBAC for real -------------------------------------------------------------------------------------------------


def test_the_api_server_refuses_the_connector_outside_its_grant_through_grpc(
    pyflyte: Served, grant: Grant, k8s: Any
) -> None:
    """The connector's own allow-list lets the foreign namespace through (the test configured it so); RBAC
    does not: the create fails with the API server's 403 and leaves nothing behind."""
    from kubernetes import client

    template, meta = task_request(dict(JOBS)["pytorch"](), grant.foreign, "foreign", "succeed")

    async def create() -> grpc.aio.AioRpcError:
        async with pyflyte.channel() as channel:
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await AsyncAgentServiceStub(channel).CreateTask(propeller_request(template, meta), timeout=90)
            return raised.value

    error = asyncio.run(create())
    assert "403" in (error.details() or "") and "forbidden" in (error.details() or "").lower(), error.details()
    jobs: Any = client.CustomObjectsApi(k8s).list_namespaced_custom_object(
        "kubeflow.org", "v1", grant.foreign, "pytorchjobs"
    )
    assert jobs["items"] == []


def test_the_service_account_token_can_do_exactly_what_rbac_yaml_grants(grant: Grant) -> None:
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(grant.kubeconfig), client_configuration=configuration)  # type: ignore[no-untyped-call]
    api = client.ApiClient(configuration)
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "rbac-probe"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "template": {"spec": {"containers": [{"name": "pytorch", "image": "registry.example/flyte:1.0"}]}},
                }
            }
        },
    }

    def status(call: Callable[[], Any]) -> int:
        try:
            call()
        except client.ApiException as e:
            return int(e.status)
        return 200

    granted, foreign = grant.granted, grant.foreign
    allowed = {
        "create a job (dry run)": lambda: custom.create_namespaced_custom_object(
            "kubeflow.org", "v1", granted, "pytorchjobs", job, dry_run="All"
        ),
        "list jobs": lambda: custom.list_namespaced_custom_object("kubeflow.org", "v1", granted, "pytorchjobs"),
        "list rayjobs": lambda: custom.list_namespaced_custom_object("ray.io", "v1", granted, "rayjobs"),
        "list the compute template ConfigMaps of its own namespace": lambda: core.list_namespaced_config_map(
            "flyte", label_selector="kubejobs.flyte.org/config-type=compute-template"
        ),
        "watch ConfigMaps in its own namespace": lambda: core.list_namespaced_config_map(
            "flyte", watch=True, timeout_seconds=1, _preload_content=False
        ),
        "list trainjobs": lambda: custom.list_namespaced_custom_object(
            "trainer.kubeflow.org", "v1alpha1", granted, "trainjobs"
        ),
        "list pods (a TrainJob's log links)": lambda: core.list_namespaced_pod(granted),
    }
    refused = {
        "read a pod": lambda: core.read_namespaced_pod("any", granted),
        "read a pod's log": lambda: core.read_namespaced_pod_log("any", granted),
        "list pods in a namespace it is not granted": lambda: core.list_namespaced_pod(foreign),
        "read secrets": lambda: core.list_namespaced_secret(granted),
        "read the connector's own namespace's secrets": lambda: core.list_namespaced_secret("flyte"),
        "create a job in a namespace it is not granted": lambda: custom.create_namespaced_custom_object(
            "kubeflow.org", "v1", foreign, "pytorchjobs", job, dry_run="All"
        ),
        "list jobs cluster-wide": lambda: custom.list_cluster_custom_object("kubeflow.org", "v1", "pytorchjobs"),
        "patch a job": lambda: custom.patch_namespaced_custom_object(
            "kubeflow.org", "v1", granted, "pytorchjobs", "any", {"metadata": {"labels": {"a": "b"}}}
        ),
        "read PodTemplates": lambda: core.list_namespaced_pod_template(granted),
        "read ConfigMaps of a job namespace": lambda: core.list_namespaced_config_map(granted),
        "read ConfigMaps of a namespace it has no grant in": lambda: core.list_namespaced_config_map(foreign),
        "read ConfigMaps cluster-wide": lambda: core.list_config_map_for_all_namespaces(),
        "write a compute template (the platform's job, not the connector's)": lambda: core.create_namespaced_config_map(
            "flyte", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="planted")), dry_run="All"
        ),
        "create a pod": lambda: core.create_namespaced_pod(
            granted,
            client.V1Pod(
                metadata=client.V1ObjectMeta(name="p"),
                spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]),
            ),
            dry_run="All",
        ),
    }
    assert {what: status(call) for what, call in allowed.items()} == dict.fromkeys(allowed, 200)
    assert {what: status(call) for what, call in refused.items()} == dict.fromkeys(refused, 403)


def test_the_service_account_token_runs_a_trainjob_through_the_connector(
    grant: Grant, k8s: Any, cluster: dict[str, Any], e2e_runtimes: None
) -> None:
    """deploy/rbac.yaml is enough for the TrainJob target: create, get and the pod LIST of its log links."""
    from flytekitplugins.kfoperators import PyTorch, Worker

    from .drive import connector_runtime, create, execution, registered, wait_terminal
    from .test_trainjob_run import assert_links_name_the_real_pods, trainjob_backend

    with connector_runtime(str(grant.kubeconfig), trainjob_backend()):
        run = create(registered(PyTorch(worker=Worker(replicas=1))), execution(grant.granted, "sa-trainjob", "succeed"))
        assert run.handle.plural == "trainjobs", run.handle
        wait_terminal(k8s, [run])
    assert run.phase == TaskExecution.SUCCEEDED, run.phases
    assert_links_name_the_real_pods(k8s, run)


# -- TLS --------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_served(grant: Grant, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, CertificateAuthority]]:
    directory = tmp_path_factory.mktemp("tls")
    ca = CertificateAuthority(directory / "pki", "kubejobs-connector-ca")
    pair = ca.issue("connector", "kubejobs-connector", dns_names=(SERVICE_HOST,))
    argv = [
        str(BIN / "kubejobs"),
        "serve",
        "--port",
        "{port}",
        "--prometheus-port",
        "{metrics}",
        "--tls-cert-file",
        str(pair.cert),
        "--tls-key-file",
        str(pair.key),
    ]
    served = serve(argv, grant, directory, grpc.ssl_channel_credentials(root_certificates=ca.cert_pem))
    yield served, ca
    served.stop()


def test_kubejobs_serve_with_tls_serves_what_pyflyte_serves(
    tls_served: tuple[Served, CertificateAuthority], pyflyte: Served, grant: Grant, tmp_path: Path
) -> None:
    served, _ = tls_served
    names = ["", "grpc.health.v1.Health", *(s.full_name for s in agent_pb2.DESCRIPTOR.services_by_name.values())]
    assert [health(served, n) for n in names] == [health(pyflyte, n) for n in names]
    assert set(s for s in [health(served, n) for n in names]) == {health_pb2.HealthCheckResponse.SERVING}

    async def one_job() -> Run:
        async with served.channel() as channel:
            return await run_task(channel, "tls", dict(JOBS)["pytorch"](), grant.granted, "succeed")

    run = asyncio.run(one_job())
    assert run.phases[-1] == "SUCCEEDED", run
    assert metric_samples(served, "flyte_connector_requests_success_total")[("create", "pytorch")] == 1


def test_the_tls_port_refuses_plaintext_and_unknown_authorities(
    tls_served: tuple[Served, CertificateAuthority], tmp_path: Path
) -> None:
    served, _ = tls_served
    plaintext = Served(served.process, served.port, served.metrics_port, served.log, None)
    other_ca = CertificateAuthority(tmp_path, "someone-else")
    impostor = Served(
        served.process, served.port, served.metrics_port, served.log, grpc.ssl_channel_credentials(other_ca.cert_pem)
    )
    assert health(plaintext) is None
    assert health(impostor) is None
    assert health(served) == health_pb2.HealthCheckResponse.SERVING


def test_the_connector_in_a_pod_uses_its_service_account_without_a_kubeconfig(grant: Grant, tmp_path: Path) -> None:
    if not can_fake_a_pod_mount():
        pytest.skip("needs a mount namespace (unshare --mount) to place the service account files; run as root")
    argv = [str(BIN / "pyflyte"), "serve", "connector", "--port", "{port}", "--prometheus_port", "{metrics}"]
    served = serve(argv, grant, tmp_path, in_cluster=True)
    name, config, outcome, final, _ = CASES[0]
    template, meta = task_request(config(), grant.foreign, "pod-foreign", outcome)

    async def both() -> tuple[Run, grpc.aio.AioRpcError]:
        async with served.channel() as channel:
            mine = await run_task(channel, f"pod-{name}", config(), grant.granted, outcome)
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await AsyncAgentServiceStub(channel).CreateTask(propeller_request(template, meta), timeout=90)
            return mine, raised.value

    try:
        mine, refused = asyncio.run(both())
    finally:
        served.stop()
    # The job ran on the mounted token; where deploy/rbac.yaml grants nothing the API server refused that same
    # token, so no other credential authorised the first.
    assert mine.phases[-1] == final, mine
    assert "403" in (refused.details() or ""), refused.details()
    assert not (tmp_path / "home" / ".kube").exists()


def test_kubejobs_serve_stops_on_sigterm(grant: Grant, tmp_path: Path) -> None:
    argv = [str(BIN / "kubejobs"), "serve", "--port", "{port}", "--prometheus-port", "{metrics}"]
    served = serve(argv, grant, tmp_path)
    started = time.monotonic()
    code = served.stop()
    assert code == 0 and time.monotonic() - started < 15, (code, served.log.read_text())
