"""The files under deploy/: least-privilege RBAC per namespace, a NetworkPolicy that admits propeller only, a
connector config the connector accepts, propeller configs (plaintext and TLS) that route the four task types
to it, the TLS patch, and an image whose environment is the test environment's pins.

The same manifests are applied to the real API server in tests/e2e/test_deploy_manifests.py and
tests/e2e/test_served_connector.py."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml
from flytekitplugins.kubejobs.backend.podsecurity import pod_security_violations
from flytekitplugins.kubejobs.connector import SUPPORTED
from flytekitplugins.kubejobs.connector.settings import ConnectorSettings
from flytekitplugins.kubejobs.wire.kinds import ENGINE_KINDS, KINDS
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy"
ACCOUNT = {"kind": "ServiceAccount", "name": "kubejobs-connector", "namespace": "flyte"}


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def _by_kind(name: str) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in _docs(name)}


def _settings() -> ConnectorSettings:
    return ConnectorSettings.from_yaml(_by_kind("connector.yaml")["ConfigMap"]["data"]["connector.yaml"])


def test_the_manifests_hold_no_cluster_wide_grant() -> None:
    kinds = {path.name: sorted(d["kind"] for d in _docs(path.name)) for path in sorted(DEPLOY.glob("*.yaml"))}
    assert kinds == {
        "connector.yaml": ["ConfigMap", "Deployment", "Service"],
        "imagebuild-rbac.yaml": ["Role", "RoleBinding"],
        "networkpolicy.yaml": ["NetworkPolicy"],
        "rbac.yaml": [
            "ClusterRole",
            "Role",
            "RoleBinding",
            "RoleBinding",
            "RoleBinding",
            "RoleBinding",
            "ServiceAccount",
        ],
    }


def test_rbac_grants_what_the_connector_calls_and_only_in_its_namespaces() -> None:
    docs = _docs("rbac.yaml")
    (role,) = [d for d in docs if d["kind"] == "ClusterRole"]
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    # client.py: create/get/delete; cache.py: list/watch; list of pods for the kinds whose log links need
    # them (TrainJob). Nothing else (no update, patch, pod reads, secrets).
    kinds = (*KINDS.values(), *ENGINE_KINDS)
    expected = {
        (kind.group, kind.plural, verb) for kind in kinds for verb in ("create", "get", "list", "watch", "delete")
    }
    expected |= {("", "pods", "list")} if any(kind.lists_pods for kind in kinds) else set()
    assert granted == expected
    bindings = [d for d in docs if d["kind"] == "RoleBinding" and d["roleRef"]["kind"] == "ClusterRole"]
    assert all(b["subjects"] == [ACCOUNT] for b in bindings)
    assert all(
        b["roleRef"]
        == {"apiGroup": role["apiVersion"].split("/")[0], "kind": "ClusterRole", "name": role["metadata"]["name"]}
        for b in bindings
    )
    # the connector's allow-list is the set of namespaces RBAC grants
    assert sorted(b["metadata"]["namespace"] for b in bindings) == sorted(_settings().namespaces)
    (account,) = [d for d in docs if d["kind"] == "ServiceAccount"]
    assert {"kind": "ServiceAccount", **account["metadata"]} == ACCOUNT


def test_rbac_lets_the_connector_read_configmaps_in_its_own_namespace_only() -> None:
    docs = _docs("rbac.yaml")
    (role,) = [d for d in docs if d["kind"] == "Role"]
    (binding,) = [d for d in docs if d["kind"] == "RoleBinding" and d["roleRef"]["kind"] == "Role"]
    # templates.py: list + watch (the informer); get for a direct read. No writes, and only where the connector runs.
    assert role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == ACCOUNT["namespace"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    assert binding["subjects"] == [ACCOUNT]
    deployment = _by_kind("connector.yaml")["Deployment"]
    # the connector's default templates namespace is its own: the one the Role is in
    assert deployment["metadata"]["namespace"] == role["metadata"]["namespace"] == _settings().templates_namespace


def test_only_propeller_reaches_the_grpc_port() -> None:
    (policy,) = _docs("networkpolicy.yaml")
    deployment = _by_kind("connector.yaml")["Deployment"]
    assert policy["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    assert policy["spec"]["podSelector"]["matchLabels"] == deployment["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    grpc_port = next(p["containerPort"] for p in container["ports"] if p["name"] == "grpc")
    assert rule["ports"] == [{"protocol": "TCP", "port": grpc_port}]  # not the metrics port
    peers = {
        (tuple(p["namespaceSelector"]["matchLabels"].items()), tuple(p["podSelector"]["matchLabels"].items()))
        for p in rule["from"]
    }
    flyte = (("kubernetes.io/metadata.name", "flyte"),)
    assert peers == {  # flyte-core's propeller, flyte-binary's single pod
        (flyte, (("app.kubernetes.io/name", "flytepropeller"),)),
        (flyte, (("app.kubernetes.io/name", "flyte-binary"),)),
    }


def test_the_deployment_serves_the_configmap_config_the_connector_accepts() -> None:
    docs = _by_kind("connector.yaml")
    settings = _settings()
    assert settings.cache and settings.kubeconfig is None  # in-cluster service account
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == ACCOUNT["name"]
    (container,) = pod["containers"]
    assert container["command"][:3] == ["pyflyte", "serve", "connector"]
    env = {e["name"]: e["value"] for e in container["env"]}
    mount = container["volumeMounts"][0]["mountPath"]
    assert env["KUBEJOBS_CONNECTOR_CONFIG"] == f"{mount}/connector.yaml"
    port = int(container["command"][container["command"].index("--port") + 1])
    assert docs["Service"]["spec"]["ports"][0]["port"] == port


def test_the_connector_pod_meets_the_restricted_pod_security_level() -> None:
    template = _by_kind("connector.yaml")["Deployment"]["spec"]["template"]
    assert pod_security_violations(template, "restricted") == []


def _propeller(name: str) -> dict[str, Any]:
    (config,) = _docs(f"propeller/{name}")
    return config


def test_propeller_routes_the_four_task_types_to_the_connector_in_both_setups() -> None:
    service = _by_kind("connector.yaml")["Service"]
    host = f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc.cluster.local"
    for name, insecure in (("propeller-config.yaml", True), ("propeller-config-tls.yaml", False)):
        config = _propeller(name)
        plugins = config["tasks"]["task-plugins"]
        task_types = {t for t, _ in SUPPORTED}
        assert {t: plugins["default-for-task-types"][t] for t in task_types} == dict.fromkeys(
            task_types, "connector-service"
        )
        assert "connector-service" in plugins["enabled-plugins"]
        assert not task_types & set(plugins["enabled-plugins"])  # the Go plugins stay off
        connectors = config["plugins"]["connector-service"]
        # connectorForTaskTypes would pin each type to version 0 (propeller v1.16), and kubeflow tasks are v1
        assert "connectorForTaskTypes" not in connectors
        default = connectors["defaultConnector"]
        assert default["endpoint"] == f"dns:///{host}:{service['spec']['ports'][0]['port']}", name
        assert default["insecure"] is insecure, name


def test_propeller_waits_for_create_longer_than_the_connector_may_take() -> None:
    from flytekitplugins.kubejobs.backend.plugins_config import parse_go_duration

    settings = _settings()
    for name in ("propeller-config.yaml", "propeller-config-tls.yaml"):
        timeouts = _propeller(name)["plugins"]["connector-service"]["defaultConnector"]["timeouts"]
        # create: API retries within retry-deadline, plus the inputs write of pod-template tasks
        create = parse_go_duration("CreateTask", timeouts["CreateTask"])
        assert create > settings.retry_deadline + settings.request_timeout
        assert parse_go_duration("DeleteTask", timeouts["DeleteTask"]) >= settings.retry_deadline


def test_the_tls_patch_serves_the_mounted_secret_with_kubejobs_serve() -> None:
    (patch,) = _docs("tls/connector-patch.yaml")
    pod = patch["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    deployed = _by_kind("connector.yaml")["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    assert container["name"] == deployed["name"]
    args = dict(a.split("=", 1) for a in container["command"][2:])
    assert container["command"][:2] == ["kubejobs", "serve"]
    assert args["--port"] == str(next(p["containerPort"] for p in deployed["ports"] if p["name"] == "grpc"))
    (mount,) = container["volumeMounts"]
    (volume,) = pod["volumes"]
    assert volume == {"name": mount["name"], "secret": {"secretName": "kubejobs-connector-tls"}}
    assert {args["--tls-cert-file"], args["--tls-key-file"]} == {
        f"{mount['mountPath']}/tls.crt",
        f"{mount['mountPath']}/tls.key",
    }
    for probe in ("readinessProbe", "livenessProbe"):  # the kubelet's gRPC probe cannot speak TLS
        assert container[probe] == {"grpc": None, "tcpSocket": {"port": int(args["--port"])}}


def test_the_ownership_key_is_read_from_the_mounted_secret() -> None:
    docs = _by_kind("connector.yaml")
    settings = _settings()
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    (container,) = pod["containers"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"] if m["name"] in secrets}
    assert secrets and mounts.keys() == secrets.keys()
    assert settings.ownership_key_file is not None
    assert any(settings.ownership_key_file == f"{path}/key" for path in mounts.values()), (settings, mounts)


# -- the image -----------------------------------------------------------------------------------------------------


def _dockerfile_installs() -> list[list[str]]:
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    (run,) = [line[4:] for line in text.splitlines() if line.startswith("RUN ")]
    return [shlex.split(command) for command in run.split("&&")]


def test_the_image_installs_exactly_the_lock_with_no_resolution() -> None:
    installs = [c for c in _dockerfile_installs() if c[:2] == ["pip", "install"]]
    assert installs == [
        ["pip", "install", "--no-cache-dir", "--no-deps", "-r", "/src/requirements.lock"],
        ["pip", "install", "--no-cache-dir", "--no-deps", "/src/flytekitplugins-kubejobs"],
    ]
    assert ["pip", "check"] in _dockerfile_installs()
    copied = re.findall(r"^COPY (\S+) (\S+)$", (DEPLOY / "Dockerfile").read_text(), re.M)
    assert ("deploy/requirements.lock", "/src/requirements.lock") in copied


def test_the_image_lock_is_the_test_environments_pins_of_what_the_connector_needs() -> None:
    done = subprocess.run(
        [sys.executable, str(DEPLOY / "image_lock.py"), "--check"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    image = [line for line in (DEPLOY / "requirements.lock").read_text().splitlines() if not line.startswith("#")]
    project = set((REPO / "requirements.lock").read_text().splitlines())
    assert set(image) <= project
    names = {canonicalize_name(line.partition("==")[0]) for line in image}
    # what `pyflyte serve connector` imports beyond flytekit itself, and the lower bounds the code relies on
    assert {"grpcio-health-checking", "prometheus-client", "httpx", "protobuf", "kubernetes", "jsonschema"} <= names
    # this venv runs the tests: it holds every image package at the image's version
    installed = {line: metadata.version(line.partition("==")[0]) for line in image}
    assert {line: version for line, version in installed.items() if line.partition("==")[2] != version} == {}
