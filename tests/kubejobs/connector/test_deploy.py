"""The manifests under deploy/: least-privilege RBAC, a connector config the connector accepts, and
a propeller config that routes the four task types to the connector."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from flytekitplugins.kubejobs.connector import SUPPORTED
from flytekitplugins.kubejobs.connector.config import ConnectorSettings
from flytekitplugins.kubejobs.wire.kinds import KINDS

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def test_the_manifests_hold_no_other_grant() -> None:
    kinds = {name: sorted(d["kind"] for d in _docs(name)) for name in ("rbac.yaml", "connector.yaml")}
    assert kinds == {
        "rbac.yaml": ["ClusterRole", "ClusterRoleBinding", "ServiceAccount"],
        "connector.yaml": ["ConfigMap", "Deployment", "Service"],
    }


def test_rbac_grants_only_create_get_list_watch_delete_on_the_four_crds() -> None:
    (role,) = [d for d in _docs("rbac.yaml") if d["kind"] == "ClusterRole"]
    granted = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    expected = {
        (kind.group, kind.plural, verb)
        for kind in KINDS.values()
        for verb in ("create", "get", "list", "watch", "delete")
    }
    assert granted == expected
    (binding,) = [d for d in _docs("rbac.yaml") if d["kind"] == "ClusterRoleBinding"]
    (account,) = [d for d in _docs("rbac.yaml") if d["kind"] == "ServiceAccount"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "kubejobs-connector", "namespace": "flyte"}]
    assert account["metadata"]["name"] == "kubejobs-connector"


def test_the_deployment_serves_the_configmap_config_the_connector_accepts() -> None:
    docs = {d["kind"]: d for d in _docs("connector.yaml")}
    settings = ConnectorSettings.from_yaml(docs["ConfigMap"]["data"]["connector.yaml"])
    assert settings.cache and settings.kubeconfig is None  # in-cluster service account
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "kubejobs-connector"
    (container,) = pod["containers"]
    assert container["command"][:3] == ["pyflyte", "serve", "connector"]
    env = {e["name"]: e["value"] for e in container["env"]}
    mount = container["volumeMounts"][0]["mountPath"]
    assert env["KUBEJOBS_CONNECTOR_CONFIG"] == f"{mount}/connector.yaml"
    port = int(container["command"][container["command"].index("--port") + 1])
    assert docs["Service"]["spec"]["ports"][0]["port"] == port


def test_propeller_routes_the_four_task_types_to_the_connector_service() -> None:
    (config,) = _docs("propeller-config.yaml")
    plugins = config["tasks"]["task-plugins"]
    task_types = {t for t, _ in SUPPORTED}
    assert {t: plugins["default-for-task-types"][t] for t in task_types} == dict.fromkeys(
        task_types, "connector-service"
    )
    assert not task_types & set(plugins["enabled-plugins"])  # the Go plugins stay off
    service = config["plugins"]["connector-service"]
    assert service["connectorForTaskTypes"] == dict.fromkeys(task_types, "kubejobs")
    endpoint = service["connectors"]["kubejobs"]["endpoint"]
    assert endpoint.endswith("kubejobs-connector.flyte.svc.cluster.local:8000")


def test_propeller_waits_for_create_longer_than_the_connector_may_take() -> None:
    from flytekitplugins.kubejobs.backend.config import parse_go_duration

    (config,) = _docs("propeller-config.yaml")
    timeouts = config["plugins"]["connector-service"]["connectors"]["kubejobs"]["timeouts"]
    docs = {d["kind"]: d for d in _docs("connector.yaml")}
    settings = ConnectorSettings.from_yaml(docs["ConfigMap"]["data"]["connector.yaml"])
    # create: API retries within retry-deadline, plus the inputs write of pod-template tasks
    assert parse_go_duration("CreateTask", timeouts["CreateTask"]) > settings.retry_deadline + settings.request_timeout
    assert parse_go_duration("DeleteTask", timeouts["DeleteTask"]) >= settings.retry_deadline


def test_the_ownership_key_is_read_from_the_mounted_secret() -> None:
    docs = {d["kind"]: d for d in _docs("connector.yaml")}
    settings = ConnectorSettings.from_yaml(docs["ConfigMap"]["data"]["connector.yaml"])
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    (container,) = pod["containers"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"] if m["name"] in secrets}
    assert secrets and mounts.keys() == secrets.keys()
    assert settings.ownership_key_file is not None
    assert any(settings.ownership_key_file == f"{path}/key" for path in mounts.values()), (settings, mounts)
