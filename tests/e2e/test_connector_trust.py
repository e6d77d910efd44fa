"""The connector as a trust boundary, attacked the way a caller of its gRPC port could, on the real control plane.

The connector is served by flytekit's own `AsyncConnectorService` on a loopback gRPC port and driven with
`CreateTask` / `GetTask` / `DeleteTask`, the ResourceMeta travelling as the opaque bytes propeller keeps (and a
caller could forge). It runs with the cluster admin's kubeconfig: the API server would allow everything, so
whatever is refused here is refused by the connector itself. Its allow-list is the test's namespace only.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Optional

import grpc
import pytest
from flyteidl.admin.agent_pb2 import (
    CreateTaskRequest,
    CreateTaskResponse,
    DeleteTaskRequest,
    GetTaskRequest,
    TaskCategory,
)
from flyteidl.admin.agent_pb2 import TaskExecutionMetadata as PbMeta
from flyteidl.core.execution_pb2 import TaskExecution
from flyteidl.core.tasks_pb2 import TaskTemplate
from flyteidl.service.agent_pb2_grpc import AsyncAgentServiceStub
from flytekit import task
from flytekit.configuration import ImageConfig, SerializationSettings
from flytekit.extend.backend.base_connector import ConnectorRegistry
from flytekit.models.task import TaskExecutionMetadata
from flytekit.models.task import TaskTemplate as TaskTemplateModel
from flytekit.tools.translator import get_serializable
from flytekitplugins.kfoperators import PyTorch, Worker
from flytekitplugins.kubejobs.backend import BackendConfig, build_object
from flytekitplugins.kubejobs.connector import EXECUTION_LABEL
from flytekitplugins.kubejobs.connector.ownership import legacy_label
from flytekitplugins.kubejobs.connector.runtime import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    Runtime,
    configure,
    shutdown,
)
from flytekitplugins.kubejobs.connector.runtime import (
    runtime as current_runtime,
)
from flytekitplugins.kubejobs.connector.settings import ConnectorSettings

from .connector_kit import connector_service
from .controlplane import wait_for

pytestmark = pytest.mark.slow

GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"
PYTORCH = TaskCategory(name="pytorch", version=1)
SETTINGS = SerializationSettings(
    project="proj", domain="dev", version="v1", image_config=ImageConfig.auto(img_name="registry.example/flyte:1.0")
)


def train(epochs: int) -> float:
    return float(epochs)


def template() -> TaskTemplate:
    config = PyTorch(worker=Worker(replicas=2))
    pb: TaskTemplate = get_serializable(
        OrderedDict(), SETTINGS, task(task_config=config)(train)
    ).template.to_flyte_idl()
    return pb


def metadata(namespace: str, execution: str, interruptible: bool = False) -> PbMeta:
    meta = PbMeta(namespace=namespace, interruptible=interruptible)
    tid = meta.task_execution_id
    tid.node_execution_id.execution_id.project = "proj"
    tid.node_execution_id.execution_id.domain = "dev"
    tid.node_execution_id.execution_id.name = execution
    tid.node_execution_id.node_id = "n0"
    tid.task_id.name = "train"
    return meta


def execution_id_of(meta: PbMeta) -> str:
    return f"proj/dev/{meta.task_execution_id.node_execution_id.execution_id.name}/n0/0/train"


def forged(namespace: str, name: str, **fields: str) -> bytes:
    """ResourceMeta bytes as a caller of the gRPC port may write them."""
    meta = {"group": GROUP, "version": VERSION, "plural": PLURAL, "namespace": namespace, "name": name, **fields}
    return json.dumps(meta).encode()


class Admin:
    """The cluster admin's view, to arrange and check what the connector must leave alone."""

    def __init__(self, k8s: Any):
        from kubernetes import client

        self.api = client.CustomObjectsApi(k8s)
        self.core = client.CoreV1Api(k8s)

    def create(self, namespace: str, obj: dict[str, Any]) -> dict[str, Any]:
        created = self.api.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, obj)
        assert isinstance(created, dict)
        return created

    def get(self, namespace: str, name: str) -> Optional[dict[str, Any]]:
        from kubernetes.client import ApiException

        try:
            found = self.api.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
            assert isinstance(found, dict)
            return found
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def delete_and_wait(self, namespace: str, name: str) -> None:
        self.api.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        wait_for(f"{namespace}/{name} gone", lambda: True if self.get(namespace, name) is None else None, 60)

    def pods_of(self, namespace: str, job: str) -> list[Any]:
        pods = self.core.list_namespaced_pod(namespace, label_selector=f"training.kubeflow.org/job-name={job}")
        return list(pods.items)


def foreign_job(namespace: str, execution: str, labels: dict[str, str]) -> dict[str, Any]:
    """A PyTorchJob someone else made under the name the connector gives ``execution``'s task."""
    obj: dict[str, Any] = build_object(template(), metadata(namespace, execution), BackendConfig())
    obj["metadata"] = {"name": obj["metadata"]["name"], "namespace": namespace, "labels": labels}
    return obj


@pytest.fixture
def admin(k8s: Any) -> Admin:
    return Admin(k8s)


@pytest.fixture
def other_namespace(k8s: Any) -> Iterator[str]:
    """A namespace the connector is not configured for (another team's)."""
    from kubernetes import client

    name = "e2e-other-" + os.urandom(3).hex()
    client.CoreV1Api(k8s).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    client.CoreV1Api(k8s).delete_namespace(name)


def connector_settings(cluster: dict[str, Any], namespace: str, key_file: Path, **overrides: Any) -> ConnectorSettings:
    values: dict[str, Any] = dict(
        kubeconfig=cluster["kubeconfig"],
        namespaces=(namespace,),
        ownership_key_file=str(key_file),
        input_prefixes=(str(key_file.parent),),  # the task (a pod-template target) has its inputs.pb written
        retry_deadline=20.0,
        backend=BackendConfig(),
    )
    values.update(overrides)
    return ConnectorSettings(**values)


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "ownership-key"
    path.write_bytes(os.urandom(32).hex().encode())  # as `openssl rand -hex 32` puts it in the Secret
    return path


@pytest.fixture
def runtime(cluster: dict[str, Any], namespace: str, key_file: Path) -> Iterator[Runtime]:
    yield configure(connector_settings(cluster, namespace, key_file))
    shutdown()


@asynccontextmanager
async def serving() -> AsyncIterator[AsyncAgentServiceStub]:
    """flytekit's connector service on a loopback port, and a stub calling it as propeller does."""
    async with connector_service() as channel:
        yield AsyncAgentServiceStub(channel)


async def create(stub: AsyncAgentServiceStub, meta: PbMeta) -> CreateTaskResponse:
    prefix = (
        f"{current_runtime().settings.input_prefixes[0]}/{meta.task_execution_id.node_execution_id.execution_id.name}"
    )
    request = CreateTaskRequest(template=template(), output_prefix=prefix, task_execution_metadata=meta)
    response: CreateTaskResponse = await stub.CreateTask(request)
    return response


async def get_phase(stub: AsyncAgentServiceStub, resource_meta: bytes) -> tuple[int, str]:
    resource = (await stub.GetTask(GetTaskRequest(task_category=PYTORCH, resource_meta=resource_meta))).resource
    return resource.phase, resource.message


async def delete(stub: AsyncAgentServiceStub, resource_meta: bytes) -> None:
    await stub.DeleteTask(DeleteTaskRequest(task_category=PYTORCH, resource_meta=resource_meta))


async def refused(call: Any, match: str) -> str:
    """The details of the gRPC error ``call`` must end with; fails if it succeeds."""
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    details = caught.value.details() or ""
    assert caught.value.code() != grpc.StatusCode.OK and match in details, details
    return details


# -- who may do what: the allow-list on every call -------------------------------------------------------------


def test_forged_metadata_for_another_namespace_neither_reads_nor_deletes_its_job(
    runtime: Runtime, admin: Admin, namespace: str, other_namespace: str
) -> None:
    victim = admin.create(other_namespace, foreign_job(other_namespace, "victim", {"team": "b"}))
    name, uid = victim["metadata"]["name"], victim["metadata"]["uid"]

    async def attack() -> None:
        async with serving() as stub:
            for outside in (other_namespace, "kube-system"):
                meta = forged(outside, name, uid=uid)
                await refused(get_phase(stub, meta), f"namespace {outside!r} is not one of the connector's")
                await refused(delete(stub, meta), f"namespace {outside!r} is not one of the connector's")
            # A kind this connector does not serve, and a name that is not one.
            other_kind = json.dumps(
                {**json.loads(forged(other_namespace, name)), "group": "ray.io", "plural": "rayjobs"}
            )
            await refused(delete(stub, other_kind.encode()), "the pytorch connector serves pytorchjobs.kubeflow.org")
            await refused(delete(stub, forged(namespace, "../secrets")), "'../secrets' is not a Kubernetes object name")

    asyncio.run(attack())
    still = admin.get(other_namespace, name)
    assert still is not None and still["metadata"]["uid"] == uid
    assert runtime.cache is not None
    assert {i.namespace for i in runtime.cache.informers()} <= set(runtime.settings.namespaces)  # nothing read there


# -- ownership: the uid recorded at create --------------------------------------------------------------------


def test_aborting_after_our_job_was_replaced_leaves_the_new_owner_s_job_alone(
    runtime: Runtime, admin: Admin, namespace: str
) -> None:
    meta = metadata(namespace, "replaced")

    async def scenario() -> None:
        async with serving() as stub:
            created = await create(stub, meta)
            ours = json.loads(created.resource_meta)
            assert ours["uid"] == admin.get(namespace, ours["name"])["metadata"]["uid"]  # type: ignore[index]
            admin.delete_and_wait(namespace, ours["name"])  # deleted out of band; another team takes the name
            theirs = admin.create(namespace, foreign_job(namespace, "replaced", {"team": "b"}))
            phase, message = await get_phase(stub, created.resource_meta)
            assert phase == TaskExecution.RETRYABLE_FAILED and "held by an object this task did not create" in message
            await delete(stub, created.resource_meta)  # the abort succeeds, and deletes nothing
            left = admin.get(namespace, ours["name"])
            assert left is not None and left["metadata"]["uid"] == theirs["metadata"]["uid"]

    asyncio.run(scenario())


def test_metadata_from_before_uids_still_gets_and_deletes_its_job_but_never_a_newer_one(
    runtime: Runtime, admin: Admin, namespace: str
) -> None:
    old, new = metadata(namespace, "legacy"), metadata(namespace, "keyed")
    # An object as the previous version created it: the plain-hash label, no uid in its ResourceMeta.
    labels = {MANAGED_BY_LABEL: MANAGED_BY, EXECUTION_LABEL: legacy_label(execution_id_of(old))}
    legacy = admin.create(namespace, foreign_job(namespace, "legacy", labels))
    old_meta = forged(
        namespace, legacy["metadata"]["name"], execution=base64.b64encode(old.SerializeToString()).decode()
    )

    async def scenario() -> None:
        async with serving() as stub:
            phase, _ = await get_phase(stub, old_meta)
            assert phase in (TaskExecution.QUEUED, TaskExecution.INITIALIZING, TaskExecution.RUNNING), phase
            # A forged uid-less ResourceMeta cannot reach an object created since: it carries a keyed label.
            created = await create(stub, new)
            keyed = json.loads(created.resource_meta)
            without_uid = json.dumps({**keyed, "uid": ""}).encode()
            phase, message = await get_phase(stub, without_uid)
            assert phase == TaskExecution.RETRYABLE_FAILED and "did not create" in message
            await delete(stub, without_uid)
            assert admin.get(namespace, keyed["name"]) is not None
            await delete(stub, old_meta)  # the old task's abort still works
            wait_for(
                "the legacy job deleted",
                lambda: True if admin.get(namespace, legacy["metadata"]["name"]) is None else None,
                60,
            )

    asyncio.run(scenario())


# -- adoption after a 409: the keyed owner label ---------------------------------------------------------------


def test_a_planted_object_with_the_public_hash_is_not_adopted_but_an_earlier_attempt_is(
    cluster: dict[str, Any], runtime: Runtime, admin: Admin, namespace: str, key_file: Path, tmp_path: Path
) -> None:
    planted_meta, retried_meta = metadata(namespace, "planted"), metadata(namespace, "retried")
    # The attacker computes what anyone can: the name, and the plain hash of the (public) execution id.
    public = {MANAGED_BY_LABEL: MANAGED_BY, EXECUTION_LABEL: legacy_label(execution_id_of(planted_meta))}
    planted = admin.create(namespace, foreign_job(namespace, "planted", public))

    async def scenario() -> None:
        async with serving() as stub:
            await refused(create(stub, planted_meta), "already exists and was not created by this task execution")
            first = json.loads((await create(stub, retried_meta)).resource_meta)
            again = json.loads((await create(stub, retried_meta)).resource_meta)  # a retried CreateTask
            assert again == first
        configure(connector_settings(cluster, namespace, key_file))  # a restart with the same Secret: still ours
        async with serving() as stub:
            assert json.loads((await create(stub, retried_meta)).resource_meta)["uid"] == first["uid"]
        other_key = tmp_path / "other-key"
        other_key.write_bytes(os.urandom(32))
        configure(connector_settings(cluster, namespace, other_key))  # another key: someone else's object
        async with serving() as stub:
            await refused(create(stub, retried_meta), "was not created by this task execution")

    asyncio.run(scenario())
    left = admin.get(namespace, planted["metadata"]["name"])
    assert left is not None and left["metadata"]["uid"] == planted["metadata"]["uid"]
    assert left["metadata"]["labels"] == public  # untouched


# -- abort: the job and its pods go (garbage collection by kube-controller-manager) -----------------------------


def test_abort_deletes_the_running_job_and_its_pods(runtime: Runtime, admin: Admin, namespace: str) -> None:
    async def scenario() -> None:
        async with serving() as stub:
            created = await create(stub, metadata(namespace, "aborted"))
            job = json.loads(created.resource_meta)

            def running_pods() -> Optional[list[Any]]:
                pods = admin.pods_of(namespace, job["name"])
                return pods if len(pods) == 3 and all(p.status.phase == "Running" for p in pods) else None

            pods = await asyncio.to_thread(wait_for, "3 running pods", running_pods, 120)
            owners = {ref.uid for p in pods for ref in p.metadata.owner_references or [] if ref.controller}
            assert owners == {job["uid"]}  # what lets the garbage collector find them
            await delete(stub, created.resource_meta)

            def all_gone() -> Optional[bool]:
                return (
                    True
                    if admin.get(namespace, job["name"]) is None and not admin.pods_of(namespace, job["name"])
                    else None
                )

            await asyncio.to_thread(wait_for, "the job and its pods gone", all_gone, 120)

    asyncio.run(scenario())


# -- interruptible: honoured when a caller sends it --------------------------------------------------------------


class FullExecutionMetadata(TaskExecutionMetadata):  # type: ignore[misc]
    """flytekit's model as it would be if it kept every field of the message (today it keeps seven)."""

    def __init__(self, pb: PbMeta):
        model = TaskExecutionMetadata.from_flyte_idl(pb)
        super().__init__(**{k.lstrip("_"): v for k, v in vars(model).items()})
        self._pb = pb

    def to_flyte_idl(self) -> PbMeta:
        return self._pb


def test_flytekit_s_service_drops_interruptible_and_overrides_before_the_connector() -> None:
    """The second half of the known limit (README, "What propeller sends"): even a caller that sends them loses
    them in flytekit's TaskExecutionMetadata model. When flytekit keeps them, this fails: update the README."""
    pb = metadata("ns", "spot", interruptible=True)
    pb.max_attempts = 3
    pb.overrides.resources.requests.add(name=1, value="2")
    kept = TaskExecutionMetadata.from_flyte_idl(pb).to_flyte_idl()
    assert (kept.interruptible, kept.max_attempts, kept.HasField("overrides")) == (False, 0, False)


def test_interruptible_metadata_reaches_every_pod_template(
    cluster: dict[str, Any], admin: Admin, namespace: str, key_file: Path, tmp_path: Path
) -> None:
    plugins = {
        "k8s": {
            "interruptible-tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
            "interruptible-node-selector": {"pool": "spot"},
        }
    }
    backend = ConnectorSettings.from_mapping({"plugins": plugins}).backend
    configure(connector_settings(cluster, namespace, key_file, backend=backend))
    connector = ConnectorRegistry.get_connector("pytorch", 1)
    task_template = TaskTemplateModel.from_flyte_idl(template())

    async def scenario() -> None:
        for execution, interruptible in (("spot", True), ("ondemand", False)):
            meta = FullExecutionMetadata(metadata(namespace, execution, interruptible))
            job = await connector.create(task_template, str(key_file.parent / execution), None, meta)
            stored = admin.get(namespace, job.name)  # as the real API server kept it
            assert stored is not None
            for role, spec in stored["spec"]["pytorchReplicaSpecs"].items():
                pod = spec["template"]["spec"]
                tolerated = {"key": "spot", "operator": "Exists", "effect": "NoSchedule"} in pod.get("tolerations", [])
                assert tolerated == interruptible, (execution, role, pod.get("tolerations"))
                assert (pod.get("nodeSelector", {}).get("pool") == "spot") == interruptible, (execution, role)

    try:
        asyncio.run(scenario())
    finally:
        shutdown()


# -- secrets never logged --------------------------------------------------------------------------------------


def service_account_kubeconfig(cluster: dict[str, Any], k8s: Any, namespace: str, path: Path) -> str:
    """A kubeconfig holding a bearer token of a ServiceAccount allowed the four job kinds in ``namespace``."""
    import yaml
    from kubernetes import client

    core, rbac = client.CoreV1Api(k8s), client.RbacAuthorizationV1Api(k8s)
    core.create_namespaced_service_account(
        namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="jobs"))
    )
    rule = client.V1PolicyRule(
        api_groups=["kubeflow.org"], resources=[PLURAL], verbs=["create", "get", "list", "watch", "delete"]
    )
    rbac.create_namespaced_role(namespace, client.V1Role(metadata=client.V1ObjectMeta(name="jobs"), rules=[rule]))
    binding = client.V1RoleBinding(
        metadata=client.V1ObjectMeta(name="jobs"),
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="jobs"),
        subjects=[client.RbacV1Subject(kind="ServiceAccount", name="jobs", namespace=namespace)],
    )
    rbac.create_namespaced_role_binding(namespace, binding)
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=600))
    status = core.create_namespaced_service_account_token("jobs", namespace, request).status
    assert status is not None and isinstance(status.token, str)
    token = status.token
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {"server": cluster["server"], "certificate-authority": cluster["ca"]}}],
        "users": [{"name": "jobs", "user": {"token": token}}],
        "contexts": [{"name": "jobs", "context": {"cluster": "e2e", "user": "jobs", "namespace": namespace}}],
        "current-context": "jobs",
    }
    path.write_text(yaml.safe_dump(config))
    return token


def test_no_log_record_holds_the_api_token_or_the_ownership_key(
    cluster: dict[str, Any],
    k8s: Any,
    admin: Admin,
    namespace: str,
    key_file: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    kubeconfig = tmp_path / "sa-kubeconfig"
    token = service_account_kubeconfig(cluster, k8s, namespace, kubeconfig)
    configure(connector_settings(cluster, namespace, key_file, kubeconfig=str(kubeconfig)))
    caplog.set_level(logging.DEBUG)  # every logger, urllib3's and the kubernetes client's included
    planted_meta = metadata(namespace, "planted-log")
    admin.create(namespace, foreign_job(namespace, "planted-log", {"team": "b"}))

    async def scenario() -> list[str]:
        details = []
        async with serving() as stub:
            created = await create(stub, metadata(namespace, "logged"))
            await get_phase(stub, created.resource_meta)
            details.append(await refused(create(stub, planted_meta), "was not created by this task execution"))
            details.append(await refused(get_phase(stub, forged("kube-system", "x")), "is not one of the"))
            await delete(stub, created.resource_meta)
        return details

    try:
        details = asyncio.run(scenario())
    finally:
        shutdown()
    key = key_file.read_bytes().strip().decode()
    text = caplog.text + "\n".join(details)
    assert any("pytorchjobs" in r.getMessage() for r in caplog.records)  # the requests were logged, at DEBUG
    assert token not in text and token[-24:] not in text
    assert key not in text and key[:16] not in text
