"""The connector refuses, before any API request, a job whose pod templates break its pod-security level
(Pod Security Standards; default `baseline`), naming the field; at `privileged` the same job is created."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fakeapi import FakeApiServer
from flytekit.extend.backend.base_connector import ConnectorRegistry
from flytekit.models.task import TaskTemplate
from flytekitplugins.kubejobs.connector.runtime import configure, shutdown
from flytekitplugins.kubejobs.connector.settings import ConnectorSettings


def _host_root_task(kit: Any) -> TaskTemplate:
    """A PyTorch task whose pod template asks for the node's network and its root filesystem."""
    pb = kit.template("pytorch").to_flyte_idl()
    args = list(pb.container.args)
    pb.ClearField("container")
    pb.k8s_pod.pod_spec.update(
        {
            "hostNetwork": True,
            "containers": [{"name": "primary", "image": "ghcr.io/acme/train:1", "args": args}],
            "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
        }
    )
    pb.config["primary_container_name"] = "primary"
    return TaskTemplate.from_flyte_idl(pb)


def test_a_host_namespace_job_is_refused_at_baseline_and_created_at_privileged(
    server: FakeApiServer, tmp_path: Any, kit: Any
) -> None:
    connector = ConnectorRegistry.get_connector("pytorch", 1)
    configure(kit.settings(server, tmp_path, cache=False))
    try:
        with pytest.raises(ValueError) as refused:
            asyncio.run(connector.submit(_host_root_task(kit), "s3://b/out", None, kit.metadata("hostile")))
        message = str(refused.value)
        assert "refused by the connector's pod security level 'baseline'" in message
        assert (
            "spec.pytorchReplicaSpecs.Master.template.spec.hostNetwork: host namespaces (hostNetwork=true)" in message
        )
        assert "volumes[0].hostPath: a hostPath volume ('root')" in message
        assert server.request_total() == 0  # nothing reached the API server
        # An ordinary task passes the default level.
        asyncio.run(connector.create(kit.template("pytorch"), "s3://b/out", None, kit.metadata("plain")))
    finally:
        shutdown()
    configure(kit.settings(server, tmp_path, cache=False, pod_security="privileged"))
    try:
        asyncio.run(connector.create(_host_root_task(kit), "s3://b/out", None, kit.metadata("trusted")))
    finally:
        shutdown()
    names = sorted(o["metadata"]["name"] for o in server.objects("kubeflow.org", "pytorchjobs"))
    assert len(names) == 2 and not any("hostile" in n for n in names)


@pytest.mark.parametrize("level", ["Baseline", "strict", ""])
def test_an_unknown_level_is_refused_in_the_settings(level: str) -> None:
    with pytest.raises(ValueError, match=r"ConnectorSettings\.pod_security must be one of privileged, baseline"):
        ConnectorSettings.from_mapping({"connector": {"pod-security": level}})
