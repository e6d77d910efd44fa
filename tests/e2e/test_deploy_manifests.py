"""The deploy manifests apply cleanly to the real API server: `kubectl apply --dry-run=server -f deploy/`, and
the same through the Python client's server-side apply with strict field validation (so a field the API
server does not know is an error, not silently pruned), which needs no kubectl. The TLS patch of
deploy/tls/ is applied (dry run) to the real Deployment."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest
import yaml

from .controlplane import REPO

pytestmark = pytest.mark.slow

DEPLOY = REPO / "deploy"
MANIFESTS = sorted(DEPLOY.glob("*.yaml"))


def _documents() -> list[dict[str, Any]]:
    return [d for path in MANIFESTS for d in yaml.safe_load_all(path.read_text()) if d]


def _is_subset(sent: Any, got: Any) -> bool:
    """Whether everything in ``sent`` came back in ``got`` (the server may add defaults, never drop)."""
    if isinstance(sent, dict):
        return isinstance(got, dict) and all(k in got and _is_subset(v, got[k]) for k, v in sent.items())
    if isinstance(sent, list):
        return isinstance(got, list) and len(sent) == len(got) and all(map(_is_subset, sent, got))
    return bool(sent == got or str(sent) == str(got))


@pytest.fixture(scope="module")
def namespaces(k8s: Any) -> list[str]:
    """The namespaces the manifests name (flyte, and the RoleBindings' job namespaces), as a Flyte cluster has.

    Never deleted: the xdist workers may run this module's tests at the same time, and one worker's teardown
    would leave the other's namespace terminating; the session's control plane is thrown away at the end."""
    from kubernetes import client

    core = client.CoreV1Api(k8s)
    names = sorted({d["metadata"]["namespace"] for d in _documents() if d["metadata"].get("namespace")})
    for name in names:
        try:
            core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
        except client.ApiException as e:
            if e.status != 409:
                raise
    return names


def test_kubectl_apply_dry_run_server_accepts_every_manifest(cluster: dict[str, Any], namespaces: list[str]) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed (Debian: kubernetes-client); the Python client's check below still runs")
    done = subprocess.run(
        [kubectl, "--kubeconfig", cluster["kubeconfig"], "apply", "--dry-run=server", "-f", str(DEPLOY)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    # "deployment.apps/kubejobs-connector created (server dry run)": resource.group/name
    applied = []
    for line in done.stdout.splitlines():
        assert line.endswith("(server dry run)"), line
        resource, _, name = line.split(" ")[0].partition("/")
        applied.append(f"{resource.split('.')[0]}/{name}")
    assert sorted(applied) == sorted(f"{d['kind'].lower()}/{d['metadata']['name']}" for d in _documents())


def test_server_side_apply_dry_run_accepts_every_manifest_unchanged(k8s: Any, namespaces: list[str]) -> None:
    from kubernetes.dynamic import DynamicClient

    dynamic: Any = DynamicClient(k8s)  # type: ignore[no-untyped-call]
    changed = []
    for doc in _documents():
        resource = dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        got = resource.server_side_apply(
            body=doc,
            namespace=doc["metadata"].get("namespace"),
            field_manager="kubejobs-e2e",
            dry_run="All",
            query_params=[("fieldValidation", "Strict")],  # an unknown field is an error, not pruned
        ).to_dict()
        if not _is_subset(doc, got):
            changed.append(f"{doc['kind']} {doc['metadata']['name']}")
    assert not changed, changed


def test_the_tls_patch_applies_to_the_deployed_connector(k8s: Any, namespaces: list[str]) -> None:
    from kubernetes import client
    from kubernetes.dynamic import DynamicClient

    (deployment,) = [d for d in _documents() if d["kind"] == "Deployment"]
    name, namespace = deployment["metadata"]["name"], deployment["metadata"]["namespace"]
    dynamic: Any = DynamicClient(k8s)  # type: ignore[no-untyped-call]
    dynamic.resources.get(api_version="apps/v1", kind="Deployment").server_side_apply(
        body=deployment, namespace=namespace, field_manager="kubejobs-e2e", query_params=[("fieldValidation", "Strict")]
    )
    try:
        patch = yaml.safe_load((DEPLOY / "tls" / "connector-patch.yaml").read_text())
        patched = client.AppsV1Api(k8s).patch_namespaced_deployment(
            name,
            namespace,
            patch,
            dry_run="All",
            field_validation="Strict",
            _content_type="application/strategic-merge-patch+json",
        )
    finally:
        client.AppsV1Api(k8s).delete_namespaced_deployment(name, namespace)
    pod: Any = k8s.sanitize_for_serialization(patched)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"][:2] == ["kubejobs", "serve"]
    for probe in ("readinessProbe", "livenessProbe"):
        assert "grpc" not in container[probe] and container[probe]["tcpSocket"]["port"] == 8000, container[probe]
    assert {m["name"] for m in container["volumeMounts"]} == {"config", "ownership-key", "tls"}  # the others are kept
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == "kubejobs-connector-tls"
