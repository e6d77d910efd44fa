"""The connector and the CLI find the cluster the way kubectl does: explicit kubeconfig, else $KUBECONFIG
(a merged list), else ~/.kube/config, else in-cluster; a context without any kubeconfig is an error."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from flytekitplugins.kubejobs.connector.client import KubeClient
from flytekitplugins.kubejobs.connector.kubeconfig import KubeconfigError, client_configuration
from flytekitplugins.kubejobs.connector.settings import ConnectorSettings


def _kubeconfig(path: Path, server: str, context: str = "main", extra: tuple[str, str] | None = None) -> Path:
    """A kubeconfig whose current context ``context`` points at ``server``; ``extra``: one more
    (context, server)."""
    contexts = [{"name": context, "context": {"cluster": context, "user": "u"}}]
    clusters = [{"name": context, "cluster": {"server": server}}]
    if extra:
        contexts.append({"name": extra[0], "context": {"cluster": extra[0], "user": "u"}})
        clusters.append({"name": extra[0], "cluster": {"server": extra[1]}})
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": context,
                "contexts": contexts,
                "clusters": clusters,
                "users": [{"name": "u", "user": {"token": "t0ken"}}],
            }
        )
    )
    return path


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def test_an_explicit_kubeconfig_wins(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(tmp_path / "env.yaml", "https://10.1.0.1:6443")))
    explicit = _kubeconfig(tmp_path / "explicit.yaml", "https://10.9.0.1:6443")
    assert client_configuration(str(explicit)).host == "https://10.9.0.1:6443"


def test_kubeconfig_env_is_used_without_a_context_setting(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The connector used to go in-cluster ("Service host/port is not set.") unless a context was set.
    monkeypatch.setenv("KUBECONFIG", str(_kubeconfig(tmp_path / "env.yaml", "https://10.1.0.1:6443")))
    client = KubeClient(ConnectorSettings.from_mapping({"connector": {}}))
    try:
        assert client._api_client.configuration.host == "https://10.1.0.1:6443"
    finally:
        client.close()


def test_a_kubeconfig_list_is_merged_and_a_context_picked(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _kubeconfig(tmp_path / "a.yaml", "https://10.1.0.1:6443", context="a")
    second = _kubeconfig(
        tmp_path / "b.yaml", "https://10.1.0.1:6443", context="b", extra=("b2", "https://10.2.0.2:6443")
    )
    monkeypatch.setenv("KUBECONFIG", f"{first}:{second}")
    assert client_configuration().host == "https://10.1.0.1:6443"  # current-context of the first file
    assert client_configuration(context="b2").host == "https://10.2.0.2:6443"


def test_home_kubeconfig_is_the_fallback(home: Path) -> None:
    (home / ".kube").mkdir()
    _kubeconfig(home / ".kube" / "config", "https://10.3.0.1:6443")
    assert client_configuration().host == "https://10.3.0.1:6443"


def test_nothing_found_says_what_was_tried(home: Path) -> None:
    with pytest.raises(KubeconfigError, match=r"no kubeconfig \(\$KUBECONFIG unset, no ~/.kube/config\) and not in a"):
        client_configuration()
    with pytest.raises(KubeconfigError, match="context 'prod' was given but no kubeconfig was found"):
        client_configuration(context="prod")


def test_an_unknown_context_names_the_file(home: Path, tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path / "k.yaml", "https://10.1.0.1:6443")
    with pytest.raises(KubeconfigError, match=r"no usable kubeconfig in '.*k.yaml' \(context 'nope'\)"):
        client_configuration(str(path), "nope")


def test_the_kubeconfig_file_is_not_rewritten(home: Path, tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path / "k.yaml", "https://10.1.0.1:6443")
    before = path.read_bytes()
    client_configuration(str(path))
    assert path.read_bytes() == before
