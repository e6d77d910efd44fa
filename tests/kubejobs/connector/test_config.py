"""Connector configuration: one YAML file (connector settings + the propeller ``plugins:`` section) and env."""

from __future__ import annotations

from pathlib import Path

import pytest
from flytekitplugins.kubejobs.connector.settings import CONFIG_ENV, ConnectorSettings

CONFIG = """
connector:
  namespaces: [flytesnacks-development, flytesnacks-staging]
  kubeconfig: /etc/kube/config
  context: prod
  cache: false
  request-timeout: 3s
  watch-timeout: 2m
plugins:
  k8s:
    default-cpus: 500m
    gpu-resource-name: amd.com/gpu
"""


def test_one_yaml_file_holds_connector_and_backend_settings(tmp_path: Path) -> None:
    path = tmp_path / "connector.yaml"
    path.write_text(CONFIG)
    settings = ConnectorSettings.from_yaml(path)
    assert settings.namespaces == ("flytesnacks-development", "flytesnacks-staging")
    assert (settings.kubeconfig, settings.context, settings.cache) == ("/etc/kube/config", "prod", False)
    assert (settings.request_timeout, settings.watch_timeout) == (3.0, 120.0)
    assert settings.backend_config.k8s.default_cpus == "500m"
    assert settings.backend_config.k8s.gpu_resource_name == "amd.com/gpu"


def test_the_environment_names_the_file_and_overrides_single_settings(tmp_path: Path) -> None:
    path = tmp_path / "connector.yaml"
    path.write_text(CONFIG)
    env = {CONFIG_ENV: str(path), "KUBEJOBS_CONNECTOR_CACHE": "true", "KUBEJOBS_CONNECTOR_NAMESPACES": "a, b"}
    settings = ConnectorSettings.from_env(env)
    assert settings.cache is True and settings.namespaces == ("a", "b")
    assert settings.context == "prod"  # the rest still comes from the file


def test_defaults_use_the_in_cluster_service_account_and_the_cache() -> None:
    settings = ConnectorSettings.from_env({})
    assert settings.kubeconfig is None and settings.context is None
    assert settings.cache is True and settings.namespaces == ()
    assert settings.backend_config.k8s.default_cpus == "1000m"  # Flyte's own default


@pytest.mark.parametrize(
    ("section", "error", "match"),
    [
        ({"cach": True}, ValueError, r"connector\.cach is not a connector setting"),
        ({"cache": "yes"}, TypeError, r"ConnectorSettings\.cache must be true or false, got 'yes'"),
        ({"request-timeout": "soon"}, ValueError, r"ConnectorSettings\.request_timeout .*'soon'"),
        ({"request-timeout": "0s"}, ValueError, r"ConnectorSettings\.request_timeout must be positive"),
        ({"workers": 0}, ValueError, r"ConnectorSettings\.workers must be a positive int, got 0"),
        ({"namespaces": "team-a"}, TypeError, r"ConnectorSettings\.namespaces must be a list"),
        ({"cache-max-informers": 0}, ValueError, r"ConnectorSettings\.cache_max_informers must be a positive int"),
        ({"cache-idle-timeout": "0s"}, ValueError, r"ConnectorSettings\.cache_idle_timeout must be positive"),
        ({"ownership-key-file": ""}, TypeError, r"ConnectorSettings\.ownership_key_file must be a non-empty string"),
    ],
)
def test_bad_settings_name_the_field_and_value(section: dict[str, object], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        ConnectorSettings.from_mapping({"connector": section})


def test_bad_env_values_are_refused() -> None:
    with pytest.raises(ValueError, match="KUBEJOBS_CONNECTOR_CACHE must be true or false, got 'maybe'"):
        ConnectorSettings.from_env({"KUBEJOBS_CONNECTOR_CACHE": "maybe"})


POD_TEMPLATES = """
pod-templates:
  - apiVersion: v1
    kind: PodTemplate
    metadata: {name: gpu-base, namespace: flyte}
    template:
      metadata: {labels: {team: ml}}
      spec:
        nodeSelector: {pool: gpu}
        containers: [{name: default, image: unused}]
"""


def test_pod_templates_come_from_the_file_by_name() -> None:
    settings = ConnectorSettings.from_yaml(CONFIG + POD_TEMPLATES)
    (name,) = settings.backend_config.pod_templates
    assert name == "gpu-base"
    assert settings.backend_config.pod_templates[name]["spec"]["nodeSelector"] == {"pool": "gpu"}
    assert settings.backend_config.k8s.default_cpus == "500m"  # the plugins: section still applies


@pytest.mark.parametrize(
    ("data", "error", "match"),
    [
        ({"pod-templates": {"a": {}}}, TypeError, r"pod-templates must be a list of PodTemplate manifests"),
        ({"pod-templates": [{"kind": "Pod"}]}, TypeError, r"pod-templates\[0\] must be a PodTemplate manifest"),
        ({"pod-templates": [{"template": {"spec": {}}}]}, ValueError, r"pod-templates\[0\]\.metadata\.name"),
        ({"pod-templates": [{"metadata": {"name": "a"}}]}, ValueError, r"pod-templates\[0\]\.template must"),
        ({"plugin": {"k8s": {}}}, ValueError, r"\['plugin'\] not known in the connector config"),
    ],
)
def test_bad_top_level_sections_name_the_entry(data: dict[str, object], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        ConnectorSettings.from_mapping(data)


def test_the_ownership_key_file_must_hold_a_key(tmp_path: Path) -> None:
    from flytekitplugins.kubejobs.connector.ownership import Ownership

    with pytest.raises(ValueError, match=r"ownership-key-file '.*absent' cannot be read"):
        Ownership.from_file(str(tmp_path / "absent"))
    short = tmp_path / "short"
    short.write_text("tiny\n")
    with pytest.raises(ValueError, match=r"holds 4 bytes; the key needs at least 16"):
        Ownership.from_file(str(short))
    key = tmp_path / "key"
    key.write_text("k" * 32 + "\n")  # a trailing newline (an editor's) is not part of the key
    assert Ownership.from_file(str(key)).label("e") == Ownership(b"k" * 32).label("e")
    assert Ownership.from_file(None).label("e") != Ownership.from_file(None).label("e")  # a key per process
